//! Requests to model runs and back: every request checked against the configuration (names,
//! types, shapes, sizes; a bad one gets its own error), then run as the model allows:
//!
//! * `max_batch_size: 0`: one run per request, the request's shapes as they are;
//! * a model of a fixed batch `B` (graph, AOT): the gathered requests in one run when their
//!   batches add up to `B`, else one run per request of batch `B`, and for `B = 1` one run per
//!   sample of a larger request (outputs concatenated again);
//! * a model with a symbolic batch (Relay VM): the gathered requests in one run, the outputs
//!   split again along the first dimension; if that fails, one run per request.

use crate::config::{ModelConfig, TritonType};
use crate::model::{Executor, Model};
use tvm_rt::{Device, NDArray};

/// One input of a request, its bytes gathered.
#[derive(Clone, Debug)]
pub struct InputTensor {
    /// Its name.
    pub name: String,
    /// `TRITONSERVER_DataType`.
    pub dtype: u32,
    /// Its shape (with the batch dimension when the model batches).
    pub shape: Vec<i64>,
    /// Its bytes.
    pub data: Vec<u8>,
}

/// One output of a response.
#[derive(Clone, Debug, PartialEq)]
pub struct OutputTensor {
    /// `output_<i>`.
    pub name: String,
    /// Its type.
    pub dtype: TritonType,
    /// Its shape.
    pub shape: Vec<i64>,
    /// Its bytes.
    pub data: Vec<u8>,
}

/// The outputs of one request, or why it failed.
pub type Outcome = Result<Vec<OutputTensor>, String>;

/// A request's inputs in the model's order, checked.
struct Checked<'a> {
    /// Per model input: its shape and bytes.
    tensors: Vec<(Vec<i64>, &'a [u8])>,
    /// The request's batch (1 without batching).
    batch: i64,
}

/// Checks one request against the configuration; its inputs in the model's order.
fn check<'a>(cfg: &ModelConfig, order: &[usize], req: &'a [InputTensor]) -> Result<Checked<'a>, String> {
    let mut found: Vec<Option<&InputTensor>> = vec![None; cfg.inputs.len()];
    for t in req {
        let Some(i) = cfg.inputs.iter().position(|c| c.name == t.name) else {
            let names: Vec<&str> = cfg.inputs.iter().map(|c| c.name.as_str()).collect();
            return Err(format!("unexpected input {:?} (the model's inputs: {})", t.name, names.join(", ")));
        };
        if found[i].replace(t).is_some() {
            return Err(format!("input {:?} given twice", t.name));
        }
    }
    let mut batch = None;
    let mut by_config = Vec::with_capacity(cfg.inputs.len());
    for (c, t) in cfg.inputs.iter().zip(&found) {
        let t = t.ok_or_else(|| format!("input {:?} is missing", c.name))?;
        if t.dtype != c.dtype.code {
            let got = TritonType::from_code(t.dtype).map_or("an unsupported type", |x| x.config_name);
            return Err(format!("input {:?}: expected {}, got {got}", c.name, c.dtype.config_name));
        }
        let dims: &[i64] = if cfg.max_batch_size > 0 {
            let (&b, rest) = t.shape.split_first().ok_or_else(|| format!("input {:?}: no batch dimension", c.name))?;
            if b < 1 || b > cfg.max_batch_size {
                return Err(format!("input {:?}: batch {b} is not in 1..={}", c.name, cfg.max_batch_size));
            }
            if *batch.get_or_insert(b) != b {
                return Err(format!(
                    "input {:?}: batch {b} differs from the other inputs' {}",
                    c.name,
                    batch.unwrap_or(b)
                ));
            }
            rest
        } else {
            &t.shape
        };
        let fits = dims.len() == c.dims.len() && dims.iter().zip(&c.dims).all(|(&d, &w)| d >= 0 && (w == -1 || d == w));
        if !fits {
            return Err(format!(
                "input {:?}: shape {:?} does not match the model's dims {:?}",
                c.name, t.shape, c.dims
            ));
        }
        let elems = t.shape.iter().try_fold(1usize, |a, &d| a.checked_mul(usize::try_from(d).ok()?));
        let bytes = elems.and_then(|n| n.checked_mul(c.dtype.element_bytes()));
        if bytes != Some(t.data.len()) {
            return Err(format!(
                "input {:?}: {} bytes for shape {:?}, expected {bytes:?}",
                c.name,
                t.data.len(),
                t.shape
            ));
        }
        by_config.push((t.shape.clone(), t.data.as_slice()));
    }
    let tensors = order.iter().map(|&i| by_config[i].clone()).collect();
    Ok(Checked { tensors, batch: batch.unwrap_or(1) })
}

/// Runs `exec` on the given tensors (model order).
fn run(
    exec: &mut Executor,
    cfg: &ModelConfig,
    order: &[usize],
    tensors: &[(Vec<i64>, &[u8])],
) -> Result<Vec<NDArray>, String> {
    let arrays: Result<Vec<NDArray>, String> = tensors
        .iter()
        .zip(order)
        .map(|((shape, bytes), &ci)| {
            NDArray::from_bytes(bytes, shape, cfg.inputs[ci].dtype.tvm, Device::cpu()).map_err(|e| e.to_string())
        })
        .collect();
    exec.run(&arrays?)
}

fn to_outputs(arrays: &[NDArray]) -> Outcome {
    arrays
        .iter()
        .enumerate()
        .map(|(i, a)| {
            let dtype = TritonType::from_tvm(a.dtype())
                .ok_or_else(|| format!("output {i}: {} has no Triton type", a.dtype()))?;
            let data = a.to_bytes().map_err(|e| e.to_string())?;
            Ok(OutputTensor { name: format!("output_{i}"), dtype, shape: a.shape().to_vec(), data })
        })
        .collect()
}

/// Concatenates the same output of several runs along the first dimension.
fn concat(parts: Vec<Vec<OutputTensor>>) -> Outcome {
    let mut it = parts.into_iter();
    let mut acc = it.next().ok_or("no runs")?;
    for part in it {
        if part.len() != acc.len() {
            return Err("runs gave different output counts".into());
        }
        for (a, p) in acc.iter_mut().zip(part) {
            if a.shape.is_empty() || a.shape.get(1..) != p.shape.get(1..) || a.dtype != p.dtype {
                return Err(format!("{}: the runs' outputs cannot be joined along the batch", a.name));
            }
            a.shape[0] += p.shape[0];
            a.data.extend_from_slice(&p.data);
        }
    }
    Ok(acc)
}

/// Splits a gathered run's outputs into per-request outputs of batches `batches`.
fn split(outs: Vec<OutputTensor>, batches: &[i64]) -> Result<Vec<Vec<OutputTensor>>, String> {
    let total: i64 = batches.iter().sum();
    let mut per: Vec<Vec<OutputTensor>> = vec![Vec::new(); batches.len()];
    for o in outs {
        if o.shape.first() != Some(&total) {
            return Err(format!("{}: shape {:?} has no batch of {total} first", o.name, o.shape));
        }
        let row = o.data.len() / usize::try_from(total).map_err(|_| "bad batch")?;
        let mut at = 0;
        for (p, &b) in per.iter_mut().zip(batches) {
            let n = row * b as usize;
            let mut shape = o.shape.clone();
            shape[0] = b;
            p.push(OutputTensor { name: o.name.clone(), dtype: o.dtype, shape, data: o.data[at..at + n].to_vec() });
            at += n;
        }
    }
    Ok(per)
}

/// Joins the requests' inputs along the batch dimension.
fn gather(checked: &[&Checked<'_>]) -> Vec<(Vec<i64>, Vec<u8>)> {
    let n = checked[0].tensors.len();
    (0..n)
        .map(|k| {
            let mut shape = checked[0].tensors[k].0.clone();
            shape[0] = checked.iter().map(|c| c.tensors[k].0[0]).sum();
            let data = checked.iter().flat_map(|c| c.tensors[k].1.iter().copied()).collect();
            (shape, data)
        })
        .collect()
}

/// Runs a request one sample at a time (a model of batch 1 given a larger batch).
fn per_sample(exec: &mut Executor, cfg: &ModelConfig, order: &[usize], c: &Checked<'_>) -> Outcome {
    let b = usize::try_from(c.batch).map_err(|_| "bad batch")?;
    let mut parts = Vec::with_capacity(b);
    for i in 0..b {
        let one: Vec<(Vec<i64>, &[u8])> = c
            .tensors
            .iter()
            .map(|(shape, bytes)| {
                let row = bytes.len() / b;
                let mut s = shape.clone();
                s[0] = 1;
                (s, &bytes[i * row..(i + 1) * row])
            })
            .collect();
        parts.push(to_outputs(&run(exec, cfg, order, &one)?)?);
    }
    concat(parts)
}

/// What a call of [`execute`] did, for the server's statistics.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Runs {
    /// Model runs made.
    pub runs: usize,
    /// Samples those runs covered.
    pub samples: i64,
}

/// Executes the requests (each a list of inputs) on `exec`; one outcome per request.
pub fn execute(
    model: &Model,
    cfg: &ModelConfig,
    exec: &mut Executor,
    reqs: &[Vec<InputTensor>],
) -> (Vec<Outcome>, Runs) {
    // Config input index of each model input (the config was checked to name them all).
    let order: Vec<usize> =
        model.io().inputs.iter().map(|t| cfg.inputs.iter().position(|c| c.name == t.name).unwrap_or(0)).collect();
    let checked: Vec<Result<Checked<'_>, String>> = reqs.iter().map(|r| check(cfg, &order, r)).collect();
    let mut out: Vec<Option<Outcome>> = checked.iter().map(|c| c.as_ref().err().map(|e| Err(e.clone()))).collect();
    let mut stats = Runs::default();
    let valid: Vec<(usize, &Checked<'_>)> =
        checked.iter().enumerate().filter_map(|(i, c)| Some((i, c.as_ref().ok()?))).collect();
    let total: i64 = valid.iter().map(|(_, c)| c.batch).sum();
    let fixed = model.fixed_batch();
    // Requests join along the batch only when the rest of their shapes agree (dims of -1 let
    // them differ: ragged requests run one by one).
    let same_rows = valid
        .windows(2)
        .all(|w| w[0].1.tensors.iter().zip(&w[1].1.tensors).all(|((a, _), (b, _))| a.get(1..) == b.get(1..)));
    let gathered = cfg.max_batch_size > 0 && valid.len() > 1 && same_rows && fixed.is_none_or(|b| b == total);
    if gathered {
        let all: Vec<&Checked<'_>> = valid.iter().map(|(_, c)| *c).collect();
        let joined = gather(&all);
        let views: Vec<(Vec<i64>, &[u8])> = joined.iter().map(|(s, d)| (s.clone(), d.as_slice())).collect();
        let batches: Vec<i64> = all.iter().map(|c| c.batch).collect();
        let res = run(exec, cfg, &order, &views).and_then(|a| to_outputs(&a)).and_then(|o| split(o, &batches));
        if let Ok(per) = res {
            stats.runs += 1;
            stats.samples += total;
            for ((i, _), o) in valid.iter().zip(per) {
                out[*i] = Some(Ok(o));
            }
            return (out.into_iter().map(|o| o.unwrap_or_else(|| Err("not run".into()))).collect(), stats);
        }
        // Fall through: each request alone, so that one request cannot fail the others.
    }
    for (i, c) in valid {
        let res = match fixed {
            Some(b) if cfg.max_batch_size > 0 && c.batch != b => {
                if b == 1 {
                    stats.runs += c.batch as usize;
                    per_sample(exec, cfg, &order, c)
                } else {
                    Err(format!("batch {}: the model runs batches of exactly {b}", c.batch))
                }
            }
            _ => {
                stats.runs += 1;
                run(exec, cfg, &order, &c.tensors).and_then(|a| to_outputs(&a))
            }
        };
        if res.is_ok() {
            stats.samples += c.batch;
        }
        out[i] = Some(res);
    }
    (out.into_iter().map(|o| o.unwrap_or_else(|| Err("not run".into()))).collect(), stats)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::tests::fixture;
    use serde_json::json;

    /// An `.npy` file of float32 as (shape, bytes).
    fn npy(rel: &str) -> Option<(Vec<i64>, Vec<u8>)> {
        let p = fixture(rel)?;
        let f = npyz::NpyFile::new(std::fs::File::open(p).unwrap()).unwrap();
        let shape = f.shape().iter().map(|&d| d as i64).collect();
        let v: Vec<f32> = f.into_vec().unwrap();
        Some((shape, v.iter().flat_map(|x| x.to_le_bytes()).collect()))
    }

    fn floats(b: &[u8]) -> Vec<f32> {
        b.chunks_exact(4).map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]])).collect()
    }

    fn close(got: &[u8], want: &[u8]) {
        let (g, w) = (floats(got), floats(want));
        assert_eq!(g.len(), w.len());
        for (a, b) in g.iter().zip(&w) {
            assert!((a - b).abs() <= 1e-5 + 1e-5 * b.abs(), "{a} vs {b}");
        }
    }

    fn input(name: &str, shape: Vec<i64>, data: Vec<u8>) -> InputTensor {
        InputTensor { name: name.into(), dtype: 11, shape, data }
    }

    #[test]
    fn a_symbolic_batch_runs_gathered_requests_in_one_call() {
        let Some(path) = fixture("fixtures-vm/vm_dyn_batch.so") else { return };
        let model = Model::load(&path, "main").unwrap();
        let name = model.io().inputs[0].name.clone();
        let cfg = ModelConfig::parse(&json!({"max_batch_size": 16,
            "input": [{"name": name, "data_type": "TYPE_FP32", "dims": [784]}],
            "output": [{"name": "output_0", "data_type": "TYPE_FP32", "dims": [10]}]}))
        .unwrap();
        cfg.check(model.io()).unwrap();
        let mut exec = model.executor(Device::cpu()).unwrap();
        let (Some(i0), Some(o0)) =
            (npy("fixtures-vm/vm_dyn_batch.run0.input0.npy"), npy("fixtures-vm/vm_dyn_batch.run0.output0.npy"))
        else {
            return;
        };
        let (Some(i1), Some(o1)) =
            (npy("fixtures-vm/vm_dyn_batch.run1.input0.npy"), npy("fixtures-vm/vm_dyn_batch.run1.output0.npy"))
        else {
            return;
        };
        let reqs = vec![
            vec![input(&name, i0.0.clone(), i0.1.clone())],
            vec![input(&name, vec![2, 784], vec![0; 8])], // wrong size: its own error
            vec![input(&name, i1.0.clone(), i1.1.clone())],
        ];
        let (out, runs) = execute(&model, &cfg, &mut exec, &reqs);
        assert_eq!(runs, Runs { runs: 1, samples: 6 });
        let r0 = out[0].as_ref().unwrap();
        assert_eq!(r0[0].shape, vec![1, 10]);
        close(&r0[0].data, &o0.1);
        assert!(out[1].as_ref().unwrap_err().contains("bytes"), "{:?}", out[1]);
        let r2 = out[2].as_ref().unwrap();
        assert_eq!(r2[0].shape, vec![5, 10]);
        close(&r2[0].data, &o1.1);
    }

    #[test]
    fn ragged_requests_run_one_by_one_and_fail_alone() {
        let Some(path) = fixture("fixtures-vm/vm_dyn_batch.so") else { return };
        let model = Model::load(&path, "main").unwrap();
        let cfg = ModelConfig::parse(&json!({"max_batch_size": 16,
            "input": [{"name": "data", "data_type": "TYPE_FP32", "dims": [-1]}],
            "output": [{"name": "output_0", "data_type": "TYPE_FP32", "dims": [10]}]}))
        .unwrap();
        let mut exec = model.executor(Device::cpu()).unwrap();
        let (Some(i0), Some(o0)) =
            (npy("fixtures-vm/vm_dyn_batch.run0.input0.npy"), npy("fixtures-vm/vm_dyn_batch.run0.output0.npy"))
        else {
            return;
        };
        let reqs =
            vec![vec![input("data", vec![1, 700], vec![0; 700 * 4])], vec![input("data", i0.0.clone(), i0.1.clone())]];
        let (out, runs) = execute(&model, &cfg, &mut exec, &reqs);
        assert_eq!(runs.runs, 2);
        assert!(out[0].is_err(), "a row of 700 cannot run: {:?}", out[0]);
        close(&out[1].as_ref().unwrap()[0].data, &o0.1);
    }

    #[test]
    fn a_batch_one_model_runs_larger_batches_sample_by_sample() {
        let Some(path) = fixture("fixtures/mlp2.so") else { return };
        let model = Model::load(&path, "main").unwrap();
        let cfg = ModelConfig::parse(&json!({"max_batch_size": 4,
            "input": [{"name": "data", "data_type": "TYPE_FP32", "dims": [784]}],
            "output": [{"name": "output_0", "data_type": "TYPE_FP32", "dims": [10]}]}))
        .unwrap();
        cfg.check(model.io()).unwrap();
        let mut exec = model.executor(Device::cpu()).unwrap();
        let (Some(x), Some(y)) = (npy("fixtures/mlp2.input.data.npy"), npy("fixtures/mlp2.output.0.npy")) else {
            return;
        };
        let three: Vec<u8> = x.1.iter().chain(&x.1).chain(&x.1).copied().collect();
        let reqs = vec![
            vec![input("data", vec![3, 784], three)],
            vec![input("data", vec![1, 784], x.1.clone())],
            vec![input("data", vec![5, 784], vec![0; 5 * 784 * 4])], // over max_batch_size
            vec![InputTensor { name: "data".into(), dtype: 12, shape: vec![1, 784], data: vec![0; 784 * 8] }],
            vec![input("image", vec![1, 784], x.1.clone())],
            vec![],
        ];
        let (out, runs) = execute(&model, &cfg, &mut exec, &reqs);
        assert_eq!(runs, Runs { runs: 4, samples: 4 });
        let r0 = out[0].as_ref().unwrap();
        assert_eq!(r0[0].shape, vec![3, 10]);
        let want: Vec<u8> = y.1.iter().chain(&y.1).chain(&y.1).copied().collect();
        close(&r0[0].data, &want);
        close(&out[1].as_ref().unwrap()[0].data, &y.1);
        assert!(out[2].as_ref().unwrap_err().contains("batch 5"), "{:?}", out[2]);
        assert!(out[3].as_ref().unwrap_err().contains("TYPE_FP64"), "{:?}", out[3]);
        assert!(out[4].as_ref().unwrap_err().contains("unexpected input \"image\""), "{:?}", out[4]);
        assert!(out[5].as_ref().unwrap_err().contains("missing"), "{:?}", out[5]);
    }

    #[test]
    fn without_batching_each_request_is_one_run_of_its_own_shape() {
        let Some(path) = fixture("fixtures-v0.18/aot_mlp.so") else { return };
        let model = Model::load(&path, "main").unwrap();
        let cfg = ModelConfig::parse(&crate::config::auto_complete(&json!({}), model.io()).unwrap().unwrap()).unwrap();
        let mut exec = model.executor(Device::cpu()).unwrap();
        let (Some(x), Some(y)) =
            (npy("fixtures-v0.18/aot_mlp.input.data.npy"), npy("fixtures-v0.18/aot_mlp.output.0.npy"))
        else {
            return;
        };
        let reqs = vec![vec![input("data", x.0.clone(), x.1.clone())]; 2];
        let (out, runs) = execute(&model, &cfg, &mut exec, &reqs);
        assert_eq!(runs, Runs { runs: 2, samples: 2 });
        for o in &out {
            close(&o.as_ref().unwrap()[0].data, &y.1);
        }
    }
}
