//! Device globals: `device_api.cpu`, `__tvm_set_device`, `runtime.GetDeviceAttr`,
//! `runtime.RuntimeEnabled`, `runtime.TVMSetStream`, `runtime.TVMArrayAllocWithScope`.

use crate::abi::DLDevice;
use crate::device;
use crate::error::{Error, Result};
use crate::ndarray::NDArray;
use crate::registry::{self, Registrar};
use crate::value::{code, Value};

/// `runtime.GetDeviceAttr(type, id, kind)`.
pub(super) fn get_device_attr(device_type: i32, device_id: i32, kind: i32) -> Result<Value> {
    let dev = DLDevice { device_type, device_id };
    if kind == 0 {
        return match device::get_api(device_type, true)? {
            Some(api) => api.get_attr(dev, 0).map(Value::from),
            None => Ok(Value::Int(0)),
        };
    }
    device::api(device_type)?.get_attr(dev, kind).map(Value::from)
}

/// `runtime.RuntimeEnabled(target)`.
pub(super) fn runtime_enabled(target: &str) -> Result<bool> {
    let name = match target {
        "cpu" => return Ok(true),
        "cuda" | "gpu" => "device_api.cuda",
        "cl" | "opencl" | "sdaccel" => "device_api.opencl",
        "mtl" | "metal" => "device_api.metal",
        "tflite" => "target.runtime.tflite",
        "vulkan" => "device_api.vulkan",
        "stackvm" => "target.build.stackvm",
        "rpc" => "device_api.rpc",
        "hexagon" => "device_api.hexagon",
        t if t.starts_with("nvptx") => "device_api.gpu",
        t if t.starts_with("rocm") => "device_api.rocm",
        t if t.starts_with("llvm") => {
            return match registry::get("codegen.llvm_target_enabled") {
                Some(f) => Ok(matches!(f.call(&[Value::str(t.to_owned())])?, Value::Int(x) if x != 0)),
                None => Ok(false),
            };
        }
        t => return Err(Error::value(format!("Unknown optional runtime {t}"))),
    };
    Ok(registry::contains(name))
}

pub(super) fn register(r: &mut Registrar<'_>) {
    r.func("device_api.cpu", |_| Ok(device::api_token(device::CPU)));
    r.func("__tvm_set_device", |a| {
        a.expect_len("__tvm_set_device", 2)?;
        let dev = DLDevice { device_type: a.i32(0)?, device_id: a.i32(1)? };
        device::api(dev.device_type)?.set_device(dev)?;
        Ok(Value::Null)
    });
    r.func("runtime.GetDeviceAttr", |a| {
        a.expect_len("runtime.GetDeviceAttr", 3)?;
        get_device_attr(a.i32(0)?, a.i32(1)?, a.i32(2)?)
    });
    r.func("runtime.RuntimeEnabled", |a| {
        a.expect_len("runtime.RuntimeEnabled", 1)?;
        Ok(Value::Int(i64::from(runtime_enabled(&a.string(0)?)?)))
    });
    r.func("runtime.TVMSetStream", |a| {
        a.expect_len("runtime.TVMSetStream", 3)?;
        let dev = DLDevice { device_type: a.i32(0)?, device_id: a.i32(1)? };
        let stream = a.handle(2)?;
        let rc = match device::api(dev.device_type).and_then(|api| api.set_stream(dev, stream)) {
            Ok(()) => 0,
            Err(e) => {
                crate::error::set_last(&e);
                -1
            }
        };
        Ok(Value::Int(rc))
    });
    // Two forms: v0.8's (shape pointer, ndim, dtype, device, scope) and, from v0.9 on,
    // (ShapeTuple, dtype, device, scope), told apart by the argument count.
    r.func("runtime.TVMArrayAllocWithScope", |a| {
        let (shape, rest): (Vec<i64>, usize) = match a.len() {
            5 => {
                let shape_ptr = a.handle(0)?.cast::<i64>();
                let ndim = usize::try_from(a.i64(1)?).map_err(|_| Error::value("negative ndim"))?;
                // SAFETY: the caller passes the address of `ndim` int64 extents (Python passes a
                // numpy buffer's address), per the global's contract.
                (unsafe { crate::value::slice_from_raw(shape_ptr, ndim)? }.to_vec(), 2)
            }
            4 => {
                let o = a.object_of(0, crate::object::index::SHAPE_TUPLE, "runtime.ShapeTuple")?;
                let t = o
                    .downcast::<crate::object::ShapeTupleObj>()
                    .ok_or_else(|| Error::type_error("expected ShapeTuple"))?;
                (t.dims().to_vec(), 1)
            }
            n => {
                return Err(Error::tvm(format!(
                    "Function runtime.TVMArrayAllocWithScope expects 4 arguments (ShapeTuple, dtype, device, scope; \
                     TVM v0.9+) or 5 (shape pointer, ndim, dtype, device, scope; TVM v0.8), but {n} were provided."
                )))
            }
        };
        let dtype = a.dtype(rest)?;
        let dev = a.device(rest + 1)?;
        let scope = match a.code(rest + 2)? {
            code::NULL => None,
            _ => Some(a.string(rest + 2)?),
        };
        Ok(Value::NDArray(NDArray::empty_scoped(&shape, dtype, dev, scope.as_deref())?))
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn attrs_and_enabled() {
        assert!(matches!(get_device_attr(1, 5, 0).unwrap(), Value::Int(1)));
        assert!(matches!(get_device_attr(1, 0, 1).unwrap(), Value::Null));
        assert!(matches!(get_device_attr(7, 0, 0).unwrap(), Value::Int(0)));
        assert!(get_device_attr(7, 0, 1).is_err());
        assert!(get_device_attr(13, 0, 0).is_err());
        assert!(runtime_enabled("cpu").unwrap());
        assert!(!runtime_enabled("llvm -mcpu=x").unwrap());
        assert!(!runtime_enabled("nvptx").unwrap());
        assert!(runtime_enabled("foo").is_err());
    }
}
