//! The model configuration as Triton hands it over (`config.pbtxt` as JSON, config version 1):
//! what the backend reads from it, how it is checked against the model, and how it is completed
//! from the model's own input/output information (auto-complete).

use crate::model::{ModelIo, TensorDesc};
use serde_json::{json, Map, Value};
use std::collections::BTreeMap;
use tvm_rt::{DataType, Device};

/// A data type as Triton names it: the `TRITONSERVER_DataType` number and the config spelling.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TritonType {
    /// `TRITONSERVER_DataType` (1 = BOOL ... 14 = BF16).
    pub code: u32,
    /// `TYPE_FP32`, ...
    pub config_name: &'static str,
    /// The TVM type.
    pub tvm: DataType,
}

/// Every type a tensor of ours can have (no `TYPE_STRING`: TVM tensors hold numbers).
const TYPES: &[TritonType] = &[
    TritonType { code: 1, config_name: "TYPE_BOOL", tvm: DataType::BOOL },
    TritonType { code: 2, config_name: "TYPE_UINT8", tvm: DataType::UINT8 },
    TritonType { code: 3, config_name: "TYPE_UINT16", tvm: DataType::UINT16 },
    TritonType { code: 4, config_name: "TYPE_UINT32", tvm: DataType::UINT32 },
    TritonType { code: 5, config_name: "TYPE_UINT64", tvm: DataType::UINT64 },
    TritonType { code: 6, config_name: "TYPE_INT8", tvm: DataType::INT8 },
    TritonType { code: 7, config_name: "TYPE_INT16", tvm: DataType::INT16 },
    TritonType { code: 8, config_name: "TYPE_INT32", tvm: DataType::INT32 },
    TritonType { code: 9, config_name: "TYPE_INT64", tvm: DataType::INT64 },
    TritonType { code: 10, config_name: "TYPE_FP16", tvm: DataType::FLOAT16 },
    TritonType { code: 11, config_name: "TYPE_FP32", tvm: DataType::FLOAT32 },
    TritonType { code: 12, config_name: "TYPE_FP64", tvm: DataType::FLOAT64 },
    TritonType { code: 14, config_name: "TYPE_BF16", tvm: DataType::BFLOAT16 },
];

impl TritonType {
    /// The type of a `TRITONSERVER_DataType` number.
    pub fn from_code(code: u32) -> Option<TritonType> {
        TYPES.iter().copied().find(|t| t.code == code)
    }

    /// The type of a config spelling (`TYPE_FP32`).
    pub fn from_config(name: &str) -> Option<TritonType> {
        TYPES.iter().copied().find(|t| t.config_name == name)
    }

    /// The Triton type of a TVM type.
    pub fn from_tvm(dt: DataType) -> Option<TritonType> {
        TYPES.iter().copied().find(|t| t.tvm == dt)
    }

    /// Bytes per element.
    pub fn element_bytes(&self) -> usize {
        self.tvm.element_bytes()
    }
}

/// One input or output of the configuration.
#[derive(Clone, Debug, PartialEq)]
pub struct TensorConfig {
    /// The name requests use.
    pub name: String,
    /// Its type.
    pub dtype: TritonType,
    /// Its dimensions less the batch dimension (when `max_batch_size > 0`); -1: any size.
    pub dims: Vec<i64>,
}

/// What the backend reads from a model's configuration.
#[derive(Clone, Debug)]
pub struct ModelConfig {
    /// The model's name.
    pub name: String,
    /// 0: no batching (requests give the whole shape); N: requests carry a batch dimension of at
    /// most N first.
    pub max_batch_size: i64,
    /// The inputs.
    pub inputs: Vec<TensorConfig>,
    /// The outputs.
    pub outputs: Vec<TensorConfig>,
    /// The export's file name inside the version directory (`default_model_filename`).
    pub model_filename: String,
    /// `parameters { key: "..." value: { string_value: "..." } }`.
    pub parameters: BTreeMap<String, String>,
    /// How many instances all instance groups together ask for.
    pub instance_count: usize,
}

/// The export's file name when the config names none.
pub const DEFAULT_MODEL_FILENAME: &str = "model.so";

/// An integer that protobuf's JSON form may write as a number or a string.
fn int(v: &Value) -> Option<i64> {
    match v {
        Value::Number(n) => n.as_i64(),
        Value::String(s) => s.parse().ok(),
        _ => None,
    }
}

fn tensors(cfg: &Value, key: &str) -> Result<Vec<TensorConfig>, String> {
    let Some(list) = cfg.get(key).and_then(Value::as_array) else { return Ok(Vec::new()) };
    list.iter()
        .map(|t| {
            let name = t.get("name").and_then(Value::as_str).unwrap_or_default().to_owned();
            let ty = t.get("data_type").and_then(Value::as_str).unwrap_or("TYPE_INVALID");
            let dtype = TritonType::from_config(ty)
                .ok_or_else(|| format!("{key} {name}: data type {ty} is not one a TVM tensor can have"))?;
            let dims = match t.get("dims").and_then(Value::as_array) {
                Some(d) => d.iter().map(|x| int(x).ok_or_else(|| format!("{key} {name}: bad dims"))).collect(),
                None => Ok(Vec::new()),
            }?;
            Ok(TensorConfig { name, dtype, dims })
        })
        .collect()
}

impl ModelConfig {
    /// Reads the configuration from its JSON form.
    pub fn parse(cfg: &Value) -> Result<ModelConfig, String> {
        let parameters = cfg
            .get("parameters")
            .and_then(Value::as_object)
            .map(|m| {
                m.iter().filter_map(|(k, v)| Some((k.clone(), v.get("string_value")?.as_str()?.to_owned()))).collect()
            })
            .unwrap_or_default();
        let instance_count = cfg
            .get("instance_group")
            .and_then(Value::as_array)
            .map(|g| g.iter().map(|x| x.get("count").and_then(int).unwrap_or(1).max(1) as usize).sum())
            .filter(|&n: &usize| n > 0)
            .unwrap_or(1);
        let model_filename = cfg
            .get("default_model_filename")
            .and_then(Value::as_str)
            .filter(|s| !s.is_empty())
            .unwrap_or(DEFAULT_MODEL_FILENAME)
            .to_owned();
        Ok(ModelConfig {
            name: cfg.get("name").and_then(Value::as_str).unwrap_or_default().to_owned(),
            max_batch_size: cfg.get("max_batch_size").and_then(int).unwrap_or(0),
            inputs: tensors(cfg, "input")?,
            outputs: tensors(cfg, "output")?,
            model_filename,
            parameters,
            instance_count,
        })
    }

    /// A positive integer parameter.
    pub fn count_parameter(&self, key: &str) -> Result<Option<usize>, String> {
        self.parameters
            .get(key)
            .map(|v| {
                v.trim()
                    .parse::<usize>()
                    .ok()
                    .filter(|&n| n > 0)
                    .ok_or_else(|| format!("parameter {key}: expected a positive integer, got {v:?}"))
            })
            .transpose()
    }

    /// The device of `parameters { key: "device" value: { string_value: "opencl:0" } }`
    /// (`cpu`, `opencl[:N]`, `cuda[:N]`, ...) where KIND_CPU instances run; the CPU without it.
    pub fn device_parameter(&self) -> Result<Device, String> {
        match self.parameters.get("device") {
            Some(d) => d.trim().parse::<Device>().map_err(|e| format!("parameter device: {e}")),
            None => Ok(Device::cpu()),
        }
    }

    /// Checks the configuration against the model: every input the model takes and nothing
    /// else, types and shapes as the model records them, outputs `output_<i>` of the model's.
    pub fn check(&self, io: &ModelIo) -> Result<(), String> {
        let names: Vec<&str> = io.inputs.iter().map(|t| t.name.as_str()).collect();
        for c in &self.inputs {
            let Some(m) = io.inputs.iter().find(|t| t.name == c.name) else {
                return Err(format!(
                    "config.pbtxt names input {:?}, which the model does not have (its inputs: {})",
                    c.name,
                    names.join(", ")
                ));
            };
            check_tensor("input", c, m, self.max_batch_size)?;
        }
        for m in &io.inputs {
            if !self.inputs.iter().any(|c| c.name == m.name) {
                return Err(format!("the model's input {:?} is missing from config.pbtxt", m.name));
            }
        }
        for c in &self.outputs {
            let idx = output_index(&c.name).ok_or_else(|| {
                format!("config.pbtxt output {:?}: outputs are named output_0, output_1, ... (by position)", c.name)
            })?;
            if let Some(outs) = &io.outputs {
                let m = outs.get(idx).ok_or_else(|| {
                    format!("config.pbtxt names output {:?}, but the model has {} output(s)", c.name, outs.len())
                })?;
                check_tensor("output", c, m, self.max_batch_size)?;
            }
        }
        if self.max_batch_size < 0 {
            return Err(format!("max_batch_size {} is negative", self.max_batch_size));
        }
        Ok(())
    }
}

/// Threads per instance: the model's `threads` parameter, else the backend's
/// (`--backend-config=tvm,threads=N`), else the runtime's cores shared out among the model's
/// instances (at least one each, so N instances on fewer cores run one thread each).
pub fn threads_per_instance(param: Option<usize>, backend: Option<usize>, cores: usize, instances: usize) -> usize {
    param.or(backend).unwrap_or_else(|| cores / instances.max(1)).max(1)
}

/// The model output a config output names (`output_3` is output 3).
pub fn output_index(name: &str) -> Option<usize> {
    name.strip_prefix("output_")?.parse().ok()
}

fn check_tensor(what: &str, c: &TensorConfig, m: &TensorDesc, max_batch: i64) -> Result<(), String> {
    if let Some(dt) = m.dtype {
        if dt != c.dtype.tvm {
            let model_ty = TritonType::from_tvm(dt).map_or("an unsupported type", |t| t.config_name);
            return Err(format!(
                "{what} {}: config.pbtxt says {}, the model has {model_ty} ({dt})",
                c.name, c.dtype.config_name
            ));
        }
    }
    if let Some(shape) = &m.shape {
        let model_dims = if max_batch > 0 {
            match shape.split_first() {
                Some((_, rest)) => rest,
                None => return Err(format!("{what} {}: a scalar has no batch dimension (max_batch_size > 0)", c.name)),
            }
        } else {
            &shape[..]
        };
        let fits = c.dims.len() == model_dims.len()
            && c.dims.iter().zip(model_dims).all(|(&cd, &md)| cd == -1 || md == -1 || cd == md);
        if !fits {
            return Err(format!(
                "{what} {}: config.pbtxt dims {:?}{} do not match the model's shape {:?}",
                c.name,
                c.dims,
                if max_batch > 0 { " (after the batch dimension)" } else { "" },
                shape
            ));
        }
    }
    Ok(())
}

/// Fills what the configuration leaves out from the model (Triton's auto-complete): the inputs
/// and outputs with their types and shapes. Returns the completed JSON, or `None` when there is
/// nothing to add; an error when the model does not record what is missing (Relay VM).
pub fn auto_complete(cfg: &Value, io: &ModelIo) -> Result<Option<Value>, String> {
    let empty = |key: &str| cfg.get(key).and_then(Value::as_array).is_none_or(|a| a.is_empty());
    let (need_in, need_out) = (empty("input"), empty("output"));
    if !need_in && !need_out {
        return Ok(None);
    }
    let max_batch = cfg.get("max_batch_size").and_then(int).unwrap_or(0);
    let entry = |name: &str, t: &TensorDesc| -> Result<Value, String> {
        let (Some(dt), Some(shape)) = (t.dtype, &t.shape) else {
            return Err(format!(
                "cannot complete config.pbtxt: the model does not record the type and shape of {name} \
                 (Relay VM executables record input names only): list inputs and outputs in config.pbtxt"
            ));
        };
        let ty = TritonType::from_tvm(dt).ok_or_else(|| format!("{name}: {dt} has no Triton type"))?;
        let dims: &[i64] = if max_batch > 0 { shape.get(1..).unwrap_or_default() } else { shape };
        Ok(json!({"name": name, "data_type": ty.config_name, "dims": dims}))
    };
    let mut out: Map<String, Value> = cfg.as_object().cloned().unwrap_or_default();
    if need_in {
        let v: Result<Vec<Value>, String> = io.inputs.iter().map(|t| entry(&t.name, t)).collect();
        out.insert("input".into(), Value::Array(v?));
    }
    if need_out {
        let outs = io.outputs.as_ref().ok_or_else(|| {
            "cannot complete config.pbtxt: a Relay VM executable does not record its outputs; list them \
             (output_0, output_1, ...) in config.pbtxt"
                .to_owned()
        })?;
        let v: Result<Vec<Value>, String> =
            outs.iter().enumerate().map(|(i, t)| entry(&format!("output_{i}"), t)).collect();
        out.insert("output".into(), Value::Array(v?));
    }
    Ok(Some(Value::Object(out)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn io() -> ModelIo {
        ModelIo {
            inputs: vec![TensorDesc { name: "data".into(), dtype: Some(DataType::FLOAT32), shape: Some(vec![1, 784]) }],
            outputs: Some(vec![TensorDesc {
                name: "out".into(),
                dtype: Some(DataType::FLOAT32),
                shape: Some(vec![1, 10]),
            }]),
        }
    }

    #[test]
    fn parses_protobuf_json_with_string_dims() {
        let c = ModelConfig::parse(&json!({
            "name": "m", "max_batch_size": 8,
            "input": [{"name": "data", "data_type": "TYPE_FP32", "dims": ["784"]}],
            "output": [{"name": "output_0", "data_type": "TYPE_FP32", "dims": [10]}],
            "instance_group": [{"count": 2, "kind": "KIND_CPU"}, {"count": 1}],
            "parameters": {"threads": {"string_value": "3"}}
        }))
        .unwrap();
        assert_eq!(c.max_batch_size, 8);
        assert_eq!(c.inputs[0].dims, vec![784]);
        assert_eq!(c.inputs[0].dtype.code, 11);
        assert_eq!(c.instance_count, 3);
        assert_eq!(c.count_parameter("threads").unwrap(), Some(3));
        assert_eq!(c.model_filename, "model.so");
        assert_eq!(c.device_parameter().unwrap(), Device::cpu());
        let mut d = c.clone();
        d.parameters.insert("device".into(), "opencl:1".into());
        assert_eq!(d.device_parameter().unwrap(), Device::new(Device::OPENCL, 1));
        d.parameters.insert("device".into(), "abacus".into());
        assert!(d.device_parameter().unwrap_err().contains("abacus"));
        c.check(&io()).unwrap();
    }

    #[test]
    fn wrong_names_types_and_shapes_are_refused_with_the_reason() {
        let base = json!({"name": "m", "max_batch_size": 0,
            "input": [{"name": "image", "data_type": "TYPE_FP32", "dims": [1, 784]}]});
        let e = ModelConfig::parse(&base).unwrap().check(&io()).unwrap_err();
        assert!(e.contains("\"image\"") && e.contains("its inputs: data"), "{e}");
        let ty = json!({"input": [{"name": "data", "data_type": "TYPE_INT32", "dims": [1, 784]}]});
        let e = ModelConfig::parse(&ty).unwrap().check(&io()).unwrap_err();
        assert!(e.contains("TYPE_INT32") && e.contains("TYPE_FP32"), "{e}");
        let sh = json!({"input": [{"name": "data", "data_type": "TYPE_FP32", "dims": [784]}]});
        assert!(ModelConfig::parse(&sh).unwrap().check(&io()).unwrap_err().contains("dims"));
        let out = json!({"input": [{"name": "data", "data_type": "TYPE_FP32", "dims": [1, 784]}],
            "output": [{"name": "output_1", "data_type": "TYPE_FP32", "dims": [1, 10]}]});
        assert!(ModelConfig::parse(&out).unwrap().check(&io()).unwrap_err().contains("1 output"));
        let missing = json!({"input": []});
        assert!(ModelConfig::parse(&missing).unwrap().check(&io()).unwrap_err().contains("missing"));
        let s = json!({"input": [{"name": "data", "data_type": "TYPE_STRING", "dims": [1]}]});
        assert!(ModelConfig::parse(&s).is_err());
        let p = json!({"parameters": {"threads": {"string_value": "zero"}}});
        assert!(ModelConfig::parse(&p).unwrap().count_parameter("threads").is_err());
    }

    #[test]
    fn auto_complete_fills_inputs_and_outputs_from_the_model() {
        let done = auto_complete(&json!({"name": "m", "max_batch_size": 4}), &io()).unwrap().unwrap();
        let c = ModelConfig::parse(&done).unwrap();
        assert_eq!(c.inputs[0].name, "data");
        assert_eq!(c.inputs[0].dims, vec![784]);
        assert_eq!(c.outputs[0].name, "output_0");
        assert_eq!(c.outputs[0].dims, vec![10]);
        c.check(&io()).unwrap();
        let full = json!({"input": [{"name": "data"}], "output": [{"name": "output_0"}]});
        assert!(auto_complete(&full, &io()).unwrap().is_none());
        let vm = ModelIo { inputs: vec![TensorDesc { name: "x".into(), dtype: None, shape: None }], outputs: None };
        assert!(auto_complete(&json!({}), &vm).unwrap_err().contains("Relay VM"));
    }

    #[test]
    fn threads_split_the_cores_among_instances_unless_set() {
        assert_eq!(threads_per_instance(None, None, 8, 1), 8);
        assert_eq!(threads_per_instance(None, None, 8, 4), 2);
        assert_eq!(threads_per_instance(None, None, 8, 3), 2);
        assert_eq!(threads_per_instance(None, None, 2, 4), 1);
        assert_eq!(threads_per_instance(None, Some(3), 8, 4), 3);
        assert_eq!(threads_per_instance(Some(5), Some(3), 8, 4), 5);
    }

    #[test]
    fn type_table_round_trips() {
        for t in TYPES {
            assert_eq!(TritonType::from_code(t.code), Some(*t));
            assert_eq!(TritonType::from_config(t.config_name), Some(*t));
            assert_eq!(TritonType::from_tvm(t.tvm), Some(*t));
        }
        assert_eq!(TritonType::from_code(13), None); // BYTES
    }
}
