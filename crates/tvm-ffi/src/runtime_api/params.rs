//! `runtime.SaveParams`, `SaveParamsToFile`, `LoadParams`, `LoadParamsFromFile`: a
//! `Map<String, Tensor>` to and from TVM's params blob (the classic runtime's format code,
//! [`tvm_runtime_classic::ndarray::serialize`]). Tensors are copied to the host to be saved (any device, any
//! byte offset); loaded tensors are CPU tensors. Also the JSON hooks TVM puts on `ffi.Tensor`
//! (`__data_to_json__`, `__data_from_json__`: the base64 of one tensor record), with which
//! `ffi.ToJSONGraph` (`tvm.ir.save_json`) writes tensors.

use super::super::any::{Any, TVMFFIAny};
use super::super::containers::map::{make_map, map_items};
use super::super::function;
use super::super::object::ObjectRef;
use super::super::registry::Builder;
use super::super::tensor::{dltensor, from_ndarray};
use super::super::{ti, types, FfiError, FfiResult};
use super::Sig;
use tvm_runtime_classic::abi::DLDevice;
use tvm_runtime_classic::io::{Reader, Writer};
use tvm_runtime_classic::ndarray::serialize::{load_ndarray, load_params, save_ndarray, save_params};
use tvm_runtime_classic::ndarray::NDArray;

const CPU0: DLDevice = DLDevice { device_type: 1, device_id: 0 };

/// A host copy of a tensor (any device, any byte offset) as a classic array.
fn host_copy(t: &ObjectRef) -> FfiResult<NDArray> {
    // SAFETY: the callers pass live tensors.
    let dl = unsafe { dltensor(t.as_ptr()) };
    let host = NDArray::empty(super::tensor::dims_of(dl)?, dl.dtype, CPU0)?;
    super::copy_to_bytes(dl, host.tensor().data, super::data_size(dl)?)?;
    Ok(host)
}

fn as_tensor(v: &Any, what: &str) -> FfiResult<ObjectRef> {
    v.as_object().filter(|o| types::is_instance(o.type_index(), ti::TENSOR)).ok_or_else(|| {
        FfiError::type_error(format!("{what} must be a Tensor, got `{}`", types::type_key(v.type_index())))
    })
}

/// `__data_to_json__` of `ffi.Tensor`: the base64 of the tensor's record.
pub(crate) fn tensor_to_json(t: &ObjectRef) -> FfiResult<String> {
    let mut w = Writer::default();
    save_ndarray(&mut w, &host_copy(t)?)?;
    Ok(super::super::serialization::graph::base64_encode(&w.buf))
}

/// `__data_from_json__` of `ffi.Tensor`: a CPU tensor from the base64 of a record.
pub(crate) fn tensor_from_json(text: &str) -> FfiResult<ObjectRef> {
    let blob = super::super::serialization::graph::base64_decode(text)?;
    from_ndarray(&load_ndarray(&mut Reader::new(&blob, "tensor"))?)
}

/// The params blob of a `Map<String, Tensor>`, in the map's order.
pub(super) fn save(map: &ObjectRef) -> FfiResult<Vec<u8>> {
    let mut named = Vec::new();
    for (k, v) in map_items(map)? {
        let name = k.as_str().ok_or_else(|| {
            FfiError::type_error(format!("params: the keys must be strings, got `{}`", types::type_key(k.type_index())))
        })?;
        let t = as_tensor(&v, &format!("params: the value of `{name}`"))?;
        let host = host_copy(&t)?;
        named.push((name.to_owned(), host));
    }
    Ok(save_params(&named)?)
}

/// A `Map<String, Tensor>` of CPU tensors from a params blob.
pub(super) fn load(blob: &[u8]) -> FfiResult<ObjectRef> {
    let mut items = Vec::new();
    for (name, a) in load_params(blob)? {
        items.push((Any::string(&name), Any::object(from_ndarray(&a)?)));
    }
    make_map(items)
}

/// A `Map` argument (a `Dict` is read the same way).
fn map_arg(sig: &Sig, a: &[TVMFFIAny], i: usize) -> FfiResult<ObjectRef> {
    let m = match sig.opt_object(a, i, ti::MAP) {
        Ok(m) => m,
        Err(_) => sig.opt_object(a, i, ti::DICT)?,
    };
    m.ok_or_else(|| sig.mismatch(a, i))
}

pub(super) fn register(b: &mut Builder) {
    let to_json = function::from_fn(|a| {
        let v = Sig { name: "__data_to_json__", params: &["ffi.Tensor"], ret: "str" }.tensor(a, 0)?;
        Ok(Any::string(&tensor_to_json(&v)?))
    });
    let from_json = function::from_fn(|a| {
        let s = Sig { name: "__data_from_json__", params: &["str"], ret: "ffi.Tensor" }.str(a, 0)?;
        Ok(Any::object(tensor_from_json(s)?))
    });
    for (name, f) in [("__data_to_json__", to_json), ("__data_from_json__", from_json)] {
        let _ = types::register_attr(ti::TENSOR, name, Any::object(f).raw());
    }
    const SAVE: Sig =
        Sig { name: "runtime.SaveParams", params: &["ffi.Map<ffi.String, ffi.Tensor>"], ret: "ffi.Bytes" };
    b.add(SAVE.name, |a| {
        SAVE.check_count(a)?;
        Ok(Any::bytes(&save(&map_arg(&SAVE, a, 0)?)?))
    });
    const SAVE_FILE: Sig = Sig {
        name: "runtime.SaveParamsToFile",
        params: &["ffi.Map<ffi.String, ffi.Tensor>", "ffi.String"],
        ret: "void",
    };
    b.add(SAVE_FILE.name, |a| {
        SAVE_FILE.check_count(a)?;
        let blob = save(&map_arg(&SAVE_FILE, a, 0)?)?;
        let path = SAVE_FILE.str(a, 1)?;
        std::fs::write(path, blob).map_err(|e| FfiError::runtime(format!("cannot write {path}: {e}")))?;
        Ok(Any::none())
    });
    const LOAD: Sig =
        Sig { name: "runtime.LoadParams", params: &["ffi.Bytes"], ret: "ffi.Map<ffi.String, ffi.Tensor>" };
    b.add(LOAD.name, |a| {
        LOAD.check_count(a)?;
        Ok(Any::object(load(LOAD.bytes(a, 0)?)?))
    });
    const LOAD_FILE: Sig =
        Sig { name: "runtime.LoadParamsFromFile", params: &["ffi.String"], ret: "ffi.Map<ffi.String, ffi.Tensor>" };
    b.add(LOAD_FILE.name, |a| {
        LOAD_FILE.check_count(a)?;
        let path = LOAD_FILE.str(a, 0)?;
        let blob = std::fs::read(path).map_err(|e| FfiError::runtime(format!("cannot read {path}: {e}")))?;
        Ok(Any::object(load(&blob)?))
    });
}

#[cfg(test)]
mod tests {
    use super::super::testutil::*;
    use super::*;

    #[test]
    fn params_round_trip_through_bytes_and_files() {
        let a = tensor_of(&[2, 2], "float32", &(0..16).collect::<Vec<u8>>());
        let b = tensor_of(&[3], "int8", &[7, 8, 9]);
        // A view with a byte offset saves its own bytes.
        let v =
            call("runtime.TVMTensorCreateView", &[a.clone(), shape(&[2]), Any::string("int16"), Any::int(4)]).unwrap();
        let m = Any::object(
            make_map(vec![(Any::string("weight"), a.clone()), (Any::string("b"), b), (Any::string("v"), v)]).unwrap(),
        );
        let blob = call("runtime.SaveParams", std::slice::from_ref(&m)).unwrap();
        assert_eq!(blob.type_index(), ti::BYTES);
        let loaded = call("runtime.LoadParams", &[blob]).unwrap().as_object().unwrap();
        let items = map_items(&loaded).unwrap();
        assert_eq!(items.len(), 3);
        let get = |n: &str| items.iter().find(|(k, _)| k.as_str() == Some(n)).map(|(_, v)| v.clone()).unwrap();
        assert_eq!(bytes_of(&get("weight")), (0..16).collect::<Vec<u8>>());
        assert_eq!(bytes_of(&get("b")), vec![7, 8, 9]);
        assert_eq!(bytes_of(&get("v")), vec![4, 5, 6, 7]);

        let path = std::env::temp_dir().join(format!("rtapi_params_{}.bin", std::process::id()));
        let p = Any::string(path.to_str().unwrap());
        call("runtime.SaveParamsToFile", &[m, p.clone()]).unwrap();
        let loaded = call("runtime.LoadParamsFromFile", &[p]).unwrap().as_object().unwrap();
        assert_eq!(map_items(&loaded).unwrap().len(), 3);
        let _ = std::fs::remove_file(path);
    }

    #[test]
    fn tensors_have_tvm_json_hooks() {
        let bytes: Vec<u8> = [0.0f32, 1.0, 2.0, 3.0].iter().flat_map(|f| f.to_le_bytes()).collect();
        let t = tensor_of(&[4], "float32", &bytes);
        let hook = types::attr_value("__data_to_json__", ti::TENSOR).unwrap().as_object().unwrap();
        let text = function::call_any(&hook, std::slice::from_ref(&t)).unwrap();
        // What TVM v0.27 writes for tvm.runtime.tensor(np.arange(4, dtype="float32")).
        let expect = "P6G0lvBAXt0AAAAAAAAAAAEAAAAAAAAAAQAAAAIgAQAEAAAAAAAAABAAAAAAAAAAAAAAAAAAgD8AAABAAABAQA==";
        assert_eq!(text.as_str(), Some(expect));
        let back = types::attr_value("__data_from_json__", ti::TENSOR).unwrap().as_object().unwrap();
        let u = function::call_any(&back, &[Any::string(expect)]).unwrap();
        assert_eq!(bytes_of(&u), bytes);
        assert!(function::call_any(&back, &[Any::string("AAAA")]).is_err());
        // Through the JSON graph functions, as tvm.ir.save_json / load_json use them.
        let json = call("ffi.ToJSONGraphString", &[t, Any::none()]).unwrap();
        assert!(json.as_str().unwrap().contains(expect), "{:?}", json.as_str());
        let u = call("ffi.FromJSONGraphString", &[json]).unwrap();
        assert_eq!(bytes_of(&u), bytes);
    }

    #[test]
    fn bad_params_are_errors() {
        assert!(call("runtime.LoadParams", &[Any::bytes(b"not a params blob")]).is_err());
        assert!(call("runtime.LoadParamsFromFile", &[Any::string("/nonexistent/p.bin")])
            .unwrap_err()
            .message()
            .contains("cannot read"));
        let m = Any::object(make_map(vec![(Any::string("x"), Any::int(1))]).unwrap());
        let e = call("runtime.SaveParams", &[m]).unwrap_err();
        assert!(e.message().contains("must be a Tensor, got `int`"), "{}", e.message());
        let e = call("runtime.SaveParams", &[Any::none()]).unwrap_err();
        assert!(e.message().contains("but got `None`"), "{}", e.message());
    }
}
