//! The process-wide tensor cache of TVM's runtime (`tensor_cache_support.cc`): weights loaded
//! from a `tensor-cache.json` folder (what `tvm.contrib.tvmjs.dump_tensor_cache` writes: shards
//! of raw bytes, records naming each tensor's shape, dtype, byte offset and format, `raw` or
//! `f32-to-bf16`), kept by name, and the `param_module` / parameter arrays made from them.
//! The `vm.builtin.tensor_cache.*` and `vm.builtin.param_*_from_cache*` globals.
//!
//! The metadata is checked before any byte is copied: a record that runs past its shard, a
//! shard of the wrong size, an unknown dtype or format, or a path that leaves the folder is an
//! error naming the file and record.

use super::builtins::add_fn;
use super::builtins::int;
use super::objects::NamedObjects;
use serde_json::Value;
use std::path::{Component, Path};
use tvm_runtime_classic::abi::{DLDataType, DLDevice, DLTensor};
use tvm_runtime_tvm_ffi::any::{view_as_bool, Any, TVMFFIAny};
use tvm_runtime_tvm_ffi::containers::array::{make_array, seq_items};
use tvm_runtime_tvm_ffi::module::{make_native_module, NativeModule};
use tvm_runtime_tvm_ffi::object::ObjectRef;
use tvm_runtime_tvm_ffi::registry::Builder;
use tvm_runtime_tvm_ffi::{function, string, tensor, ti, types, FfiError, FfiResult};

type Args<'a> = &'a [TVMFFIAny];

/// The cache: name -> tensor.
static CACHE: NamedObjects = NamedObjects::new();

fn get(name: &str) -> Option<ObjectRef> {
    CACHE.get(name)
}

/// One tensor of a shard.
struct Record {
    name: String,
    shape: Vec<i64>,
    dtype: DLDataType,
    bf16: bool,
    nbytes: usize,
    offset: usize,
}

/// One shard file.
struct Shard {
    path: String,
    nbytes: usize,
    records: Vec<Record>,
}

fn field<'a>(o: &'a Value, key: &str, at: &str) -> FfiResult<&'a Value> {
    o.get(key).ok_or_else(|| FfiError::value(format!("tensor cache: {at} has no \"{key}\"")))
}

fn text<'a>(o: &'a Value, key: &str, at: &str) -> FfiResult<&'a str> {
    field(o, key, at)?
        .as_str()
        .ok_or_else(|| FfiError::value(format!("tensor cache: {at}: \"{key}\" must be a string")))
}

fn size(o: &Value, key: &str, at: &str) -> FfiResult<usize> {
    field(o, key, at)?
        .as_u64()
        .and_then(|n| usize::try_from(n).ok())
        .ok_or_else(|| FfiError::value(format!("tensor cache: {at}: \"{key}\" must be a non-negative integer")))
}

fn items<'a>(o: &'a Value, key: &str, at: &str) -> FfiResult<&'a Vec<Value>> {
    field(o, key, at)?
        .as_array()
        .ok_or_else(|| FfiError::value(format!("tensor cache: {at}: \"{key}\" must be a list")))
}

fn record(r: &Value, at: &str) -> FfiResult<Record> {
    let name = text(r, "name", at)?.to_owned();
    let at = format!("{at}, record \"{name}\"");
    let shape = items(r, "shape", &at)?
        .iter()
        .map(|d| d.as_i64().filter(|&d| d >= 0))
        .collect::<Option<Vec<i64>>>()
        .ok_or_else(|| FfiError::value(format!("tensor cache: {at}: the shape must hold non-negative integers")))?;
    let dtype = tvm_runtime_tvm_ffi::dtype::parse(text(r, "dtype", &at)?)?;
    let format = text(r, "format", &at)?;
    let bf16 = match format {
        "raw" => false,
        "f32-to-bf16" if dtype == DLDataType { code: 2, bits: 32, lanes: 1 } => true,
        f => return Err(FfiError::value(format!("tensor cache: {at}: unsupported format \"{f}\" for this dtype"))),
    };
    let nbytes = size(r, "nbytes", &at)?;
    let offset = size(r, "byteOffset", &at)?;
    let elems = shape.iter().try_fold(1usize, |n, &d| n.checked_mul(d as usize));
    let bytes = elems
        .and_then(|n| n.checked_mul(if bf16 { 2 } else { tvm_runtime_classic::value::dtype::element_bytes(dtype) }));
    if bytes != Some(nbytes) {
        return Err(FfiError::value(format!(
            "tensor cache: {at}: {nbytes} bytes do not hold a tensor of shape {shape:?} ({format})"
        )));
    }
    Ok(Record { name, shape, dtype, bf16, nbytes, offset })
}

/// Parses `tensor-cache.json`.
fn metadata(json: &str, at: &str) -> FfiResult<Vec<Shard>> {
    let v: Value =
        serde_json::from_str(json).map_err(|e| FfiError::value(format!("{at}: Failed to parse JSON: {e}")))?;
    if !v.is_object() {
        return Err(FfiError::value(format!("{at}: The given string is not a JSON object")));
    }
    items(&v, "records", at)?
        .iter()
        .enumerate()
        .map(|(i, s)| {
            let shard_at = format!("{at}, shard {i}");
            let path = text(s, "dataPath", &shard_at)?.to_owned();
            if !Path::new(&path).components().all(|c| matches!(c, Component::Normal(_))) {
                return Err(FfiError::value(format!(
                    "tensor cache: {shard_at}: dataPath \"{path}\" leaves the folder"
                )));
            }
            let format = text(s, "format", &shard_at)?;
            if format != "raw-shard" {
                return Err(FfiError::value(format!(
                    "tensor cache: {shard_at}: Only `raw-shard` format is supported, got \"{format}\""
                )));
            }
            let nbytes = size(s, "nbytes", &shard_at)?;
            let shard_at = format!("{at}, shard \"{path}\"");
            let records =
                items(s, "records", &shard_at)?.iter().map(|r| record(r, &shard_at)).collect::<FfiResult<Vec<_>>>()?;
            for r in &records {
                if r.offset.checked_add(r.nbytes).map_or(true, |end| end > nbytes) {
                    return Err(FfiError::value(format!(
                        "tensor cache: {shard_at}, record \"{}\": bytes {}..+{} run past the shard's {nbytes}",
                        r.name, r.offset, r.nbytes
                    )));
                }
            }
            Ok(Shard { path, nbytes, records })
        })
        .collect()
}

/// A tensor on `dev` holding `bytes` (already checked to be its size).
fn tensor_from_bytes(r: &Record, bytes: &[u8], dev: DLDevice) -> FfiResult<ObjectRef> {
    let decoded: Vec<u8>;
    let bytes = if r.bf16 {
        decoded = bytes
            .chunks_exact(2)
            .flat_map(|h| (u32::from(u16::from_le_bytes([h[0], h[1]])) << 16).to_le_bytes())
            .collect();
        &decoded[..]
    } else {
        bytes
    };
    let out = tensor::empty(&r.shape, r.dtype, dev)?;
    // SAFETY: `out` is a live tensor.
    let t = unsafe { tensor::dltensor(out.as_ptr()) };
    tvm_runtime_tvm_ffi::runtime_api::copy_from_bytes(t, bytes.as_ptr().cast(), bytes.len())?;
    Ok(out)
}

/// `TensorCache::Load`: every tensor of the folder, into the cache (replacing same names).
fn load(dir: &str, dev: DLDevice) -> FfiResult<()> {
    let meta_path = Path::new(dir).join("tensor-cache.json");
    let at = meta_path.display().to_string();
    let json = std::fs::read_to_string(&meta_path).map_err(|e| FfiError::value(format!("cannot read {at}: {e}")))?;
    for shard in metadata(&json, &at)? {
        let path = Path::new(dir).join(&shard.path);
        let raw = std::fs::read(&path)
            .map_err(|e| FfiError::value(format!("Error when loading parameters from {}: {e}", shard.path)))?;
        if raw.len() != shard.nbytes {
            return Err(FfiError::value(format!(
                "Error when loading parameters from {}: Encountered an corrupted parameter shard ({} bytes, the metadata says {})",
                shard.path,
                raw.len(),
                shard.nbytes
            )));
        }
        let tensors = shard
            .records
            .iter()
            .map(|r| tensor_from_bytes(r, &raw[r.offset..r.offset + r.nbytes], dev))
            .collect::<FfiResult<Vec<_>>>()?;
        CACHE.insert_all(shard.records.iter().map(|r| r.name.clone()).zip(tensors));
    }
    Ok(())
}

fn str_arg(name: &str, a: Args, i: usize) -> FfiResult<String> {
    a.get(i)
        // SAFETY: a valid view.
        .and_then(|v| unsafe { string::view_str_bytes(v) })
        .and_then(|b| std::str::from_utf8(b).ok())
        .map(str::to_owned)
        .ok_or_else(|| FfiError::type_error(format!("{name}: argument {i} must be a string")))
}

/// `GetParams`: `prefix_0`, `prefix_1`, ... (`num` of them, or as many as there are for -1).
fn params(prefix: &str, num: i64) -> FfiResult<Vec<Any>> {
    let mut out = Vec::new();
    for i in 0.. {
        if num != -1 && i >= num {
            break;
        }
        let key = format!("{prefix}_{i}");
        match get(&key) {
            Some(t) => out.push(Any::object(t)),
            None if num == -1 => break,
            None => return Err(FfiError::value(format!("Cannot find {key} in cache"))),
        }
    }
    Ok(out)
}

fn params_by_name(names: &[String]) -> FfiResult<Vec<Any>> {
    names
        .iter()
        .map(|n| get(n).map(Any::object).ok_or_else(|| FfiError::value(format!("Cannot find parameter in cache: {n}"))))
        .collect()
}

fn names_of_array(name: &str, a: Args) -> FfiResult<Vec<String>> {
    let v = a
        .first()
        .filter(|v| v.type_index == ti::ARRAY)
        .ok_or_else(|| FfiError::type_error(format!("{name}: expected an Array of names")))?;
    // SAFETY: a view of a live array.
    let arr = unsafe { ObjectRef::from_borrowed(v.obj_ptr()) }.expect("non-null");
    seq_items(&arr)
        .iter()
        .map(|s| {
            s.as_str().map(str::to_owned).ok_or_else(|| FfiError::type_error(format!("{name}: names must be strings")))
        })
        .collect()
}

/// `param_module`: one function, `get_params`, giving its parameter array.
struct ParamModule(ObjectRef);

impl NativeModule for ParamModule {
    fn kind(&self) -> &str {
        "param_module"
    }
    fn get_function(&self, _this: &ObjectRef, name: &str) -> FfiResult<Option<ObjectRef>> {
        let params = self.0.clone();
        Ok((name == "get_params").then(|| function::from_fn(move |_| Ok(Any::object(params.clone())))))
    }
    fn as_any(&self) -> &dyn std::any::Any {
        self
    }
}

fn param_module(params: Vec<Any>) -> Any {
    Any::object(make_native_module(Box::new(ParamModule(make_array(params)))))
}

/// Registers the tensor cache's globals.
pub fn register(b: &mut Builder) {
    add_fn(b, "vm.builtin.tensor_cache.load", |a| {
        let name = "vm.builtin.tensor_cache.load";
        let dir = str_arg(name, a, 0)?;
        let device_type =
            i32::try_from(int(name, a, 1)?).map_err(|_| FfiError::value(format!("{name}: bad device type")))?;
        let device_id =
            i32::try_from(int(name, a, 2)?).map_err(|_| FfiError::value(format!("{name}: bad device id")))?;
        load(&dir, DLDevice { device_type, device_id })?;
        Ok(Any::none())
    });
    add_fn(b, "vm.builtin.tensor_cache.get", |a| {
        Ok(Any::opt_object(get(&str_arg("vm.builtin.tensor_cache.get", a, 0)?)))
    });
    add_fn(b, "vm.builtin.tensor_cache.update", |a| {
        let name = "vm.builtin.tensor_cache.update";
        if !(a.len() == 2 || a.len() == 3) {
            return Err(FfiError::type_error(format!("{name} expects 2 or 3 arguments, got {}", a.len())));
        }
        let key = str_arg(name, a, 0)?;
        let replace = a.len() == 3
            && view_as_bool(&a[2]).ok_or_else(|| FfiError::type_error(format!("{name}: argument 2 must be a bool")))?;
        let t = match a[1].type_index {
            ti::TENSOR if !a[1].obj_ptr().is_null() => {
                // SAFETY: a view of a live tensor.
                let t = unsafe { ObjectRef::from_borrowed(a[1].obj_ptr()) };
                t.expect("non-null")
            }
            ti::DLTENSOR_PTR if !a[1].obj_ptr().is_null() => {
                // SAFETY: a DLTensor* argument points to a valid DLTensor for the call.
                let src = unsafe { &*(a[1].obj_ptr() as *const DLTensor) };
                let out = super::vm::copy_tensor_to(src, src.device)?;
                tvm_runtime_classic::device::api(src.device.device_type)?
                    .stream_sync(src.device, std::ptr::null_mut())?;
                out
            }
            t => {
                return Err(FfiError::type_error(format!(
                    "{name}: argument 1 must be a Tensor, got {}",
                    types::type_key(t)
                )))
            }
        };
        CACHE.insert(key, t, replace)?;
        Ok(Any::none())
    });
    add_fn(b, "vm.builtin.tensor_cache.remove", |a| {
        CACHE.remove(&str_arg("vm.builtin.tensor_cache.remove", a, 0)?);
        Ok(Any::none())
    });
    add_fn(b, "vm.builtin.tensor_cache.clear", |_| {
        CACHE.clear();
        Ok(Any::none())
    });
    add_fn(b, "vm.builtin.param_module_from_cache", |a| {
        let name = "vm.builtin.param_module_from_cache";
        Ok(param_module(params(&str_arg(name, a, 0)?, int(name, a, 1)?)?))
    });
    add_fn(b, "vm.builtin.param_module_from_cache_by_name", |a| {
        Ok(param_module(params_by_name(&names_of_array("vm.builtin.param_module_from_cache_by_name", a)?)?))
    });
    add_fn(b, "vm.builtin.param_array_from_cache", |a| {
        let name = "vm.builtin.param_array_from_cache";
        Ok(Any::object(make_array(params(&str_arg(name, a, 0)?, int(name, a, 1)?)?)))
    });
    add_fn(b, "vm.builtin.param_array_from_cache_by_name", |a| {
        Ok(Any::object(make_array(params_by_name(&names_of_array("vm.builtin.param_array_from_cache_by_name", a)?)?)))
    });
    add_fn(b, "vm.builtin.param_array_from_cache_by_name_unpacked", |a| {
        let names = (0..a.len())
            .map(|i| {
                str_arg("vm.builtin.param_array_from_cache_by_name_unpacked", a, i).map_err(|_| {
                    FfiError::value(format!(
                        "Expect string as input, but get {} at {i}",
                        types::type_key(a[i].type_index)
                    ))
                })
            })
            .collect::<FfiResult<Vec<_>>>()?;
        Ok(Any::object(make_array(params_by_name(&names)?)))
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    const META: &str = r#"{"metadata": {}, "records": [{"dataPath": "s0.bin", "format": "raw-shard", "nbytes": 24,
        "records": [{"name": "a", "shape": [2, 2], "dtype": "float32", "format": "raw", "nbytes": 16, "byteOffset": 0},
                    {"name": "b", "shape": [2], "dtype": "float32", "format": "f32-to-bf16", "nbytes": 4, "byteOffset": 16},
                    {"name": "c", "shape": [4], "dtype": "uint8", "format": "raw", "nbytes": 4, "byteOffset": 20}]}]}"#;

    #[test]
    fn metadata_parses_and_checks() {
        let m = metadata(META, "t").unwrap();
        assert_eq!(m[0].records.len(), 3);
        assert!(m[0].records[1].bf16 && !m[0].records[0].bf16);
        for (from, to, says) in [
            ("\"byteOffset\": 20}", "\"byteOffset\": 21}", "run past"),
            ("\"nbytes\": 16", "\"nbytes\": 12", "do not hold"),
            ("s0.bin", "../s0.bin", "leaves the folder"),
            ("\"raw-shard\"", "\"zip\"", "raw-shard"),
            ("\"uint8\"", "\"notatype\"", "notatype"),
            (
                "\"dtype\": \"uint8\", \"format\": \"raw\"",
                "\"dtype\": \"uint8\", \"format\": \"f32-to-bf16\"",
                "unsupported format",
            ),
            ("[2, 2]", "[2, -2]", "non-negative"),
        ] {
            assert!(META.contains(from), "{from}");
            let e = metadata(&META.replacen(from, to, 1), "t").err().unwrap_or_else(|| panic!("{to} was accepted"));
            assert!(e.message().contains(says), "{to}: {}", e.message());
        }
        assert!(metadata("[1]", "t").is_err() && metadata("{", "t").is_err());
    }
}
