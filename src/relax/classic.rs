//! The Relax VM behind the classic C API: exports of TVM v0.14-v0.19 (`relax.build`), whose
//! `__tvm_dev_mblob` holds a `relax.Executable` (classic constant tags) importing a library of
//! classic packed-function kernels. The same executable parser, VM and builtins run them; at the
//! edges values change sides:
//!
//! - the classic loader `runtime.module.loadbinary_relax.Executable` makes a classic module over
//!   a tvm-ffi `relax.VMExecutable`; its `vm_load_executable` gives the VM the classic imports
//!   (the kernel library) as tvm-ffi modules whose functions take tvm-ffi values
//!   ([`crate::tvmffi::classic_bridge`]);
//! - the classic `relax.VirtualMachine` module's functions take classic values (NDArrays become
//!   tensors over the same memory, ShapeTuples shapes, Arrays arrays) and give classic ones back.
//!
//! Data types are not translated: v0.14-v0.19 spell `bool` as `uint1`, in the executable's
//! constants and in the kernels' checks alike, so tensors keep the classic spelling here.

use super::executable::Executable;
use super::vm_module::{self, ExecModule};
use crate::error::{Error, Result};
use crate::function::PackedFunc;
use crate::module::blob;
use crate::module::{Module, ModuleNode};
use crate::ndarray::NDArray;
use crate::object::{ArrayObj, ShapeTupleObj, StringObj};
use crate::registry::Registrar;
use crate::tvmffi::any::{Any, TVMFFIAny};
use crate::tvmffi::containers::array::{make_array, seq_items};
use crate::tvmffi::containers::shape::{make_shape, shape_dims};
use crate::tvmffi::object::ObjectRef as FfiObject;
use crate::tvmffi::{function, module, tensor, ti, types};
use crate::value::Value;

/// The classic `relax.Executable` module.
struct ClassicExec {
    exec: FfiObject,
}

/// The classic `relax.VirtualMachine` module.
struct ClassicVm {
    vm: FfiObject,
}

fn ffi_err(e: crate::tvmffi::FfiError) -> Error {
    Error::tvm(format!("{}: {}", e.kind(), e.message()))
}

/// A classic array as a tensor over the same memory (its data type as it is).
fn tensor_of(a: &NDArray) -> Result<FfiObject> {
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

/// A classic value as a tvm-ffi one.
fn to_ffi(v: &Value) -> Result<Any> {
    Ok(match v {
        Value::Null => Any::none(),
        Value::Int(i) | Value::UInt(i) => Any::int(*i),
        Value::Float(f) => Any::float(*f),
        Value::Handle(p) => Any::opaque_ptr(*p),
        Value::DataType(t) => Any::dtype(*t),
        Value::Device(d) => Any::device(*d),
        Value::Str(s) => Any::string(s),
        Value::Bytes(b) => Any::bytes(b),
        Value::NDArray(a) => Any::object(tensor_of(a)?),
        Value::DLTensor(p) => {
            // SAFETY: a DLTensor argument points to a valid tensor for the call.
            let t = unsafe { p.as_ref() }.ok_or_else(|| Error::value("a DLTensor argument is NULL"))?;
            Any::object(super::vm::copy_tensor_to(t, t.device).map_err(ffi_err)?)
        }
        Value::Object(o) => {
            if let Some(s) = o.downcast::<ShapeTupleObj>() {
                Any::object(make_shape(s.dims()))
            } else if let Some(s) = o.downcast::<StringObj>() {
                crate::tvmffi::string::any_from_bytes(s.as_bytes(), false)
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
                    crate::object::type_index2key(o.type_index()).unwrap_or_default()
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

/// A tvm-ffi value as a classic one (tensors as NDArrays over the same memory).
fn to_classic(v: Any) -> Result<Value> {
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

impl ModuleNode for ClassicExec {
    fn type_key(&self) -> &str {
        "relax.Executable"
    }

    fn get_function(&self, name: &str, this: &Module) -> Result<Option<PackedFunc>> {
        let exec = self.exec.clone();
        let this = this.clone();
        Ok(match name {
            "vm_load_executable" | "vm_profiler_load_executable" => Some(PackedFunc::from_fn(move |_| {
                let imports =
                    this.imports().into_iter().map(crate::tvmffi::classic_bridge::ffi_module).collect::<Vec<_>>();
                module::replace_imports(&exec, imports).map_err(ffi_err)?;
                let vm = vm_module::load_vm(&exec).map_err(ffi_err)?;
                Ok(Value::Module(Module::new(ClassicVm { vm })))
            })),
            "stats" | "as_text" | "has_function" => {
                let f = module::get_function(&exec, name, false).map_err(ffi_err)?.expect("the executable has it");
                Some(bridge_to_ffi(f))
            }
            _ => None,
        })
    }

    fn as_any(&self) -> &dyn std::any::Any {
        self
    }
}

/// A classic function calling tvm-ffi function `f` (classic values in and out).
fn bridge_to_ffi(f: FfiObject) -> PackedFunc {
    PackedFunc::from_fn(move |args| {
        let vals = (0..args.len()).map(|i| args.get(i).and_then(|v| to_ffi(&v))).collect::<Result<Vec<_>>>()?;
        let views: Vec<TVMFFIAny> = vals.iter().map(|a| *a.raw()).collect();
        to_classic(function::call(&f, &views).map_err(ffi_err)?)
    })
}

impl ModuleNode for ClassicVm {
    fn type_key(&self) -> &str {
        "relax.VirtualMachine"
    }

    fn get_function(&self, name: &str, _this: &Module) -> Result<Option<PackedFunc>> {
        Ok(module::get_function(&self.vm, name, false).map_err(ffi_err)?.map(bridge_to_ffi))
    }

    fn as_any(&self) -> &dyn std::any::Any {
        self
    }
}

/// Registers the classic loader of `relax.Executable` blob entries.
pub fn register(r: &mut Registrar<'_>) {
    r.func("runtime.module.loadbinary_relax.Executable", |a| {
        let bytes = blob::with_stream(a.handle(0)?, |s| Ok(s.reader().str_bytes()?.to_vec()))?;
        let exe = Executable::load_classic(&bytes).map_err(|e| Error::value(format!("relax.Executable: {e}")))?;
        let exec = module::make_native_module(Box::new(ExecModule::new(exe)));
        Ok(Value::Module(Module::new(ClassicExec { exec })))
    });
}
