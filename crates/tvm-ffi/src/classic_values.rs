//! Every conversion between the classic runtime's values (`tvm_runtime_classic::value::Value`) and tvm-ffi's
//! (`Any`, `TVMFFIAny`), in one place. Three callers, three sets of rules:
//!
//! - the classic globals seen from the tvm-ffi side (`classic_bridge`): arguments are borrowed
//!   views ([`view_to_classic`]), results plain values only ([`plain_to_ffi`]);
//! - the Relax VM behind the classic C API (the relax crate's `classic`): objects cross too
//!   ([`to_ffi`], [`to_classic`]);
//! - device attributes ([`attr_to_any`]), which need no classic value at all.

use super::any::{Any, TVMFFIAny};
use super::containers::array::{make_array, seq_items};
use super::containers::shape::{make_shape, shape_dims};
use super::object::ObjectRef as FfiObject;
use super::{string, tensor, ti, types, FfiError, FfiResult};
use tvm_runtime_classic::device::Attr;
use tvm_runtime_classic::error::{Error, Result};
use tvm_runtime_classic::ndarray::NDArray;
use tvm_runtime_classic::object::{ArrayObj, ShapeTupleObj, StringObj};
use tvm_runtime_classic::value::Value;

/// A classic plain value (none, numbers, pointers, data types, devices, strings, bytes) as a
/// tvm-ffi one; `None` for the others (objects, modules, functions, tensors).
pub(crate) fn scalar_to_ffi(v: &Value) -> Option<Any> {
    Some(match v {
        Value::Null => Any::none(),
        Value::Int(i) | Value::UInt(i) => Any::int(*i),
        Value::Float(f) => Any::float(*f),
        Value::Handle(p) => Any::opaque_ptr(*p),
        Value::DataType(t) => Any::dtype(*t),
        Value::Device(d) => Any::device(*d),
        Value::Str(s) => Any::string(s),
        Value::Bytes(b) => Any::bytes(b),
        _ => return None,
    })
}

/// A device attribute as a tvm-ffi value (None: no answer).
pub(crate) fn attr_to_any(a: Attr) -> Any {
    match a {
        Attr::Null => Any::none(),
        Attr::Int(i) => Any::int(i),
        Attr::Float(f) => Any::float(f),
        Attr::Str(s) => Any::string(&s),
    }
}

/// Argument `i` of a call to classic function `name` (a tvm-ffi view, borrowed for the call) as a
/// classic value: plain values as they are, tensors as `DLTensor` pointers, strings and bytes
/// copied.
pub(crate) fn view_to_classic(name: &str, i: usize, v: &TVMFFIAny) -> FfiResult<Value> {
    Ok(match v.type_index {
        ti::NONE => Value::Null,
        ti::INT | ti::BOOL => Value::Int(v.bits() as i64),
        ti::FLOAT => Value::Float(f64::from_bits(v.bits())),
        ti::OPAQUE_PTR => Value::Handle(v.bits() as usize as *mut std::ffi::c_void),
        // SAFETY: the union is read as the variant the type index names.
        ti::DATA_TYPE => Value::DataType(unsafe { v.v.v_dtype }),
        // SAFETY: as above.
        ti::DEVICE => Value::Device(unsafe { v.v.v_device }),
        ti::DLTENSOR_PTR => Value::DLTensor(v.bits() as usize as *mut tvm_runtime_classic::abi::DLTensor),
        ti::TENSOR if !v.obj_ptr().is_null() => {
            // SAFETY: a tensor object has its DLTensor after the header; the view keeps it alive
            // for the call.
            Value::DLTensor(unsafe { tensor::dltensor(v.obj_ptr()) } as *const _ as *mut _)
        }
        t => {
            // SAFETY: a valid view.
            match unsafe { string::view_str_bytes(v) } {
                Some(b) if matches!(t, ti::STR | ti::SMALL_STR | ti::RAW_STR) => {
                    Value::Str(Box::new(String::from_utf8_lossy(b).into_owned()))
                }
                Some(b) => Value::Bytes(Box::new(b.to_vec())),
                None => {
                    return Err(FfiError::type_error(format!(
                        "{name}: argument {i} of type {} cannot be passed to this function",
                        types::type_key(t)
                    )))
                }
            }
        }
    })
}

/// The result of classic function `name` as a tvm-ffi value: only plain values cross.
pub(crate) fn plain_to_ffi(name: &str, v: Value) -> FfiResult<Any> {
    scalar_to_ffi(&v)
        .ok_or_else(|| FfiError::type_error(format!("{name}: its result cannot be returned through tvm-ffi")))
}

/// A tvm-ffi error as a classic one (its kind in the message).
pub fn ffi_err(e: FfiError) -> Error {
    Error::tvm(format!("{}: {}", e.kind(), e.message()))
}

/// A classic array as a tensor over the same memory (its data type as it is).
pub(crate) fn tensor_of(a: &NDArray) -> Result<FfiObject> {
    let m = a.to_dlpack();
    // SAFETY: a fresh managed tensor whose ownership moves in; on error it is still ours.
    match unsafe { tensor::from_dlpack(m, 0, false) } {
        Ok(t) => Ok(t),
        Err(e) => {
            // SAFETY: still ours after a failed import.
            unsafe {
                if let Some(d) = (*m).deleter {
                    d(m);
                }
            }
            Err(ffi_err(e))
        }
    }
}

/// A classic value as a tvm-ffi one, for the Relax VM's classic face: NDArrays become tensors
/// over the same memory, a `DLTensor*` a copy, ShapeTuples shapes, Strings strings, Arrays
/// arrays.
pub fn to_ffi(v: &Value) -> Result<Any> {
    if let Some(a) = scalar_to_ffi(v) {
        return Ok(a);
    }
    Ok(match v {
        Value::NDArray(a) => Any::object(tensor_of(a)?),
        Value::DLTensor(p) => {
            // SAFETY: a DLTensor argument points to a valid tensor for the call.
            let t = unsafe { p.as_ref() }.ok_or_else(|| Error::value("a DLTensor argument is NULL"))?;
            Any::object(tensor::copy_tensor_to(t, t.device).map_err(ffi_err)?)
        }
        Value::Object(o) => {
            if let Some(s) = o.downcast::<ShapeTupleObj>() {
                Any::object(make_shape(s.dims()))
            } else if let Some(s) = o.downcast::<StringObj>() {
                string::any_from_bytes(s.as_bytes(), false)
            } else if let Some(a) = o.downcast::<ArrayObj>() {
                let items = a
                    .items
                    .iter()
                    .map(|i| match i {
                        None => Ok(Any::none()),
                        Some(o) => match NDArray::from_object(o.clone()) {
                            Some(nd) => to_ffi(&Value::NDArray(nd)),
                            None => to_ffi(&Value::Object(o.clone())),
                        },
                    })
                    .collect::<Result<Vec<_>>>()?;
                Any::object(make_array(items))
            } else {
                return Err(Error::type_error(format!(
                    "a {} cannot be passed to the Relax VM",
                    tvm_runtime_classic::object::type_index2key(o.type_index()).unwrap_or_default()
                )));
            }
        }
        other => {
            return Err(Error::type_error(format!(
                "a value of type code {} cannot be passed to the Relax VM",
                other.type_code()
            )))
        }
    })
}

/// A tvm-ffi value as a classic one (tensors as NDArrays over the same memory, shapes as
/// ShapeTuples, arrays as Arrays).
pub fn to_classic(v: Any) -> Result<Value> {
    if let Some(i) = v.as_i64().filter(|_| matches!(v.type_index(), ti::INT | ti::BOOL)) {
        return Ok(Value::Int(i));
    }
    if v.type_index() == ti::FLOAT {
        return Ok(Value::Float(v.as_f64().unwrap_or_default()));
    }
    if v.is_none() {
        return Ok(Value::Null);
    }
    if let Some(s) = v.as_str_bytes() {
        return Ok(Value::Str(Box::new(String::from_utf8_lossy(s).into_owned())));
    }
    let t = v.type_index();
    let o = v
        .into_object()
        .map_err(|_| Error::type_error(format!("a {} result cannot be returned", types::type_key(t))))?;
    Ok(match o.type_index() {
        ti::TENSOR => Value::NDArray(classic_array(&o)?),
        ti::SHAPE => Value::Object(ShapeTupleObj::new_object(shape_dims(&o).to_vec())),
        ti::ARRAY => {
            let mut items = Vec::new();
            for item in seq_items(&o) {
                items.push(match to_classic(item.clone())? {
                    Value::Null => None,
                    Value::NDArray(a) => Some(a.into_object()),
                    Value::Object(x) => Some(x),
                    Value::Str(s) => Some(StringObj::new_object(s.as_bytes())),
                    _ => {
                        return Err(Error::type_error(
                            "a tuple holding scalars cannot be returned through the classic API",
                        ))
                    }
                });
            }
            Value::Object(ArrayObj::new_object(items))
        }
        t => {
            return Err(Error::type_error(format!(
                "a {} result cannot be returned through the classic API",
                types::type_key(t)
            )))
        }
    })
}

/// A classic array over a tensor's memory (holding the tensor).
fn classic_array(t: &FfiObject) -> Result<NDArray> {
    // SAFETY: a live tensor.
    let m = unsafe { tensor::to_dlpack(t.as_ptr()) };
    // SAFETY: a fresh managed tensor whose ownership moves to the array.
    unsafe { NDArray::from_dlpack(m) }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tvm_runtime_classic::abi::DLDevice;
    use tvm_runtime_classic::value::dtype::FLOAT32;

    #[test]
    fn plain_values_cross_both_ways() {
        for v in [Value::Null, Value::Int(-3), Value::Float(0.5), Value::str("abc")] {
            let a = scalar_to_ffi(&v).unwrap();
            let back = to_classic(a).unwrap();
            assert_eq!(format!("{back:?}"), format!("{v:?}"));
        }
        let e = plain_to_ffi(
            "f",
            Value::Module(tvm_runtime_classic::module::Module::new(tvm_runtime_classic::module::FunctionModule::new(
                "test",
            ))),
        )
        .unwrap_err();
        assert!(e.message().contains("f: its result cannot be returned through tvm-ffi"), "{}", e.message());
        assert_eq!(attr_to_any(Attr::Int(7)).as_i64(), Some(7));
        assert!(attr_to_any(Attr::Null).is_none());
        assert_eq!(attr_to_any(Attr::Str("sm_90".into())).as_str_bytes(), Some(&b"sm_90"[..]));
    }

    #[test]
    fn arrays_shapes_and_tensors_cross_as_their_counterparts() {
        let cpu = DLDevice { device_type: 1, device_id: 0 };
        let nd = NDArray::empty(&[2, 3], FLOAT32, cpu).unwrap();
        let shape = ShapeTupleObj::new_object(vec![4, 5]);
        let arr = Value::Object(ArrayObj::new_object(vec![Some(nd.clone().into_object()), Some(shape), None]));
        let a = to_ffi(&arr).unwrap();
        assert_eq!(a.type_index(), ti::ARRAY);
        let Value::Object(o) = to_classic(a).unwrap() else { panic!("not an object") };
        let items = &o.downcast::<ArrayObj>().unwrap().items;
        let back = NDArray::from_object(items[0].clone().unwrap()).unwrap();
        assert_eq!(back.tensor().data, nd.tensor().data, "the same memory");
        assert_eq!(items[1].as_ref().unwrap().downcast::<ShapeTupleObj>().unwrap().dims(), &[4, 5]);
        assert!(items[2].is_none());
        let e = to_ffi(&Value::Module(tvm_runtime_classic::module::Module::new(
            tvm_runtime_classic::module::FunctionModule::new("test"),
        )))
        .unwrap_err()
        .to_string();
        assert!(e.contains("cannot be passed"), "{e}");
    }
}
