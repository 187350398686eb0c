//! The two `ffi.Module`s of the Relax VM: `relax.VMExecutable` (the executable a library
//! carries in `__tvm_ffi__library_bin`, importing the kernel library) and
//! `relax.VirtualMachine` (what its `vm_load_executable` makes: the functions
//! `tvm/runtime/vm.py` calls, and every VM function by name).

use super::executable::{Constant, Executable, FuncKind};
use super::vm::{self, ActiveGuard, Runtime, SendAnys};
use parking_lot::{Mutex, RwLock};
use std::collections::HashMap;
use std::sync::{Arc, OnceLock};
use tvm_runtime_classic::abi::{DLDevice, DLTensor};
use tvm_runtime_tvm_ffi::any::{Any, TVMFFIAny};
use tvm_runtime_tvm_ffi::containers::array::seq_items;
use tvm_runtime_tvm_ffi::globals::{arg_any, arg_str};
use tvm_runtime_tvm_ffi::module::{self, NativeModule};
use tvm_runtime_tvm_ffi::object::ObjectRef;
use tvm_runtime_tvm_ffi::registry::Builder;
use tvm_runtime_tvm_ffi::{function, registry, ti, types, FfiError, FfiResult};

const CPU: DLDevice = DLDevice { device_type: 1, device_id: 0 };

/// The `relax.VMExecutable` module.
pub struct ExecModule {
    exe: Arc<Executable>,
    /// The constants as values on the CPU, made once and shared by every machine on the CPU.
    constants: OnceLock<Result<SendAnys, String>>,
}

impl ExecModule {
    /// A module over a loaded executable.
    pub fn new(exe: Executable) -> ExecModule {
        ExecModule { exe: Arc::new(exe), constants: OnceLock::new() }
    }

    /// The executable.
    pub fn executable(&self) -> &Arc<Executable> {
        &self.exe
    }

    fn constants(&self) -> FfiResult<&[Any]> {
        let r = self.constants.get_or_init(|| {
            self.exe
                .constants
                .iter()
                .map(constant_value)
                .collect::<FfiResult<Vec<_>>>()
                .map(SendAnys)
                .map_err(|e| format!("{}: {}", e.kind(), e.message()))
        });
        match r {
            Ok(v) => Ok(&v.0),
            Err(e) => Err(FfiError::runtime(format!("the executable's constants cannot be made: {e}"))),
        }
    }
}

/// A constant-pool entry as a value (tensors on the CPU).
fn constant_value(c: &Constant) -> FfiResult<Any> {
    Ok(match c {
        Constant::Tensor(t) => {
            let out = tvm_runtime_tvm_ffi::tensor::empty(&t.shape, t.dtype, CPU)?;
            let need = super::objects::data_size(&t.shape, t.dtype)?;
            if need != t.data.len() {
                return Err(FfiError::value(format!(
                    "a tensor constant of shape {:?} holds {} bytes, its type needs {need}",
                    t.shape,
                    t.data.len()
                )));
            }
            // SAFETY: `out` is a fresh compact CPU tensor of `need` bytes.
            unsafe {
                let dl: &DLTensor = tvm_runtime_tvm_ffi::tensor::dltensor(out.as_ptr());
                let dst = dl.data.cast::<u8>().add(dl.byte_offset as usize);
                std::ptr::copy_nonoverlapping(t.data.as_ptr(), dst, need);
            }
            Any::object(out)
        }
        Constant::Shape(s) => Any::object(tvm_runtime_tvm_ffi::containers::shape::make_shape(s)),
        Constant::Str(b) => tvm_runtime_tvm_ffi::string::any_from_bytes(b, false),
        Constant::Int(v) => Any::int(*v),
        Constant::Float(v) => Any::float(*v),
        Constant::DataType(t) => Any::dtype(*t),
    })
}

impl NativeModule for ExecModule {
    fn kind(&self) -> &str {
        super::format::VM_EXECUTABLE_KIND
    }

    fn property_mask(&self) -> i64 {
        module::PROPERTY_BINARY_SERIALIZABLE
    }

    fn as_any(&self) -> &dyn std::any::Any {
        self
    }

    fn get_function(&self, this: &ObjectRef, name: &str) -> FfiResult<Option<ObjectRef>> {
        let exe = self.exe.clone();
        let this = this.clone();
        Ok(Some(match name {
            "stats" => function::from_fn(move |_| Ok(Any::string(&exe.stats()))),
            "as_text" => function::from_fn(move |_| Ok(Any::string(&exe.as_text()))),
            "has_function" => function::from_fn(move |a| {
                let n = arg_str("has_function", a, 0)?;
                Ok(Any::bool(exe.function_index(n).is_some()))
            }),
            "vm_load_executable" => function::from_fn(move |_| Ok(Any::object(load_vm(&this)?))),
            "vm_profiler_load_executable" => function::from_fn(move |_| Ok(Any::object(load_vm(&this)?))),
            "save_to_bytes" => function::from_fn(move |_| Ok(Any::bytes(&exe.save()))),
            _ => return Ok(None),
        }))
    }
}

/// `VMExecutable::VMLoadExecutable`: a new machine over the executable, importing what it
/// imports.
pub fn load_vm(exec_mod: &ObjectRef) -> FfiResult<ObjectRef> {
    let em = module::native::<ExecModule>(exec_mod)
        .ok_or_else(|| FfiError::type_error("vm_load_executable: not a relax.VMExecutable"))?;
    let vm = VmModule {
        exe: em.exe.clone(),
        exec_mod: exec_mod.clone(),
        rt: RwLock::new(None),
        state: Mutex::new(VmState::default()),
    };
    let m = module::make_native_module(Box::new(vm));
    module::replace_imports(&m, module::imports(exec_mod)?)?;
    Ok(m)
}

#[derive(Default)]
struct VmState {
    inputs: HashMap<String, SendAnys>,
    outputs: HashMap<String, SendAnys>,
    saved: HashMap<String, ObjectRef>,
}

/// The `relax.VirtualMachine` module.
pub(crate) struct VmModule {
    exe: Arc<Executable>,
    exec_mod: ObjectRef,
    rt: RwLock<Option<Arc<Runtime>>>,
    state: Mutex<VmState>,
}

impl VmModule {
    /// The initialized machine.
    pub(crate) fn runtime(&self) -> FfiResult<Arc<Runtime>> {
        self.rt.read().clone().ok_or_else(|| {
            FfiError::runtime("the VirtualMachine is not initialized: call vm_initialization (devices) first")
        })
    }

    fn init(&self, this: &ObjectRef, a: &[TVMFFIAny]) -> FfiResult<()> {
        if a.is_empty() || a.len() % 3 != 0 {
            return Err(FfiError::value(format!(
                "vm_initialization takes (device_type, device_id, allocator_type) triples, got {} arguments",
                a.len()
            )));
        }
        let int = |i: usize| {
            tvm_runtime_tvm_ffi::any::view_as_i64(&a[i])
                .ok_or_else(|| FfiError::type_error(format!("vm_initialization: argument {i} must be an integer")))
        };
        let mut devices = Vec::new();
        for i in (0..a.len()).step_by(3) {
            let (t, id, kind) = (int(i)?, int(i + 1)?, int(i + 2)?);
            let dev = DLDevice {
                device_type: i32::try_from(t).map_err(|_| FfiError::value(format!("bad device type {t}")))?,
                device_id: i32::try_from(id).map_err(|_| FfiError::value(format!("bad device id {id}")))?,
            };
            devices.push((dev, kind));
        }
        let em = module::native::<ExecModule>(&self.exec_mod).expect("made by load_vm");
        let rt = vm::init(self.exe.clone(), em.constants()?, &module::imports(this)?, devices)?;
        *self.rt.write() = Some(Arc::new(rt));
        Ok(())
    }

    /// The closure of a saved function or of a VM function (`GetClosureInternal`).
    fn closure(&self, name: &str) -> FfiResult<Option<Closure>> {
        if let Some(c) = self.state.lock().saved.get(name) {
            return Ok(Some(Closure::Object(c.clone())));
        }
        let Some(i) = self.exe.function_index(name) else { return Ok(None) };
        match self.exe.functions[i].kind {
            FuncKind::Vm | FuncKind::VmTir => Ok(Some(Closure::Pool(i))),
            FuncKind::Packed => Err(FfiError::value(format!(
                "Cannot support closure with function kind 0 ({name} is a packed function of the executable)"
            ))),
        }
    }

    fn invoke(&self, rt: &Runtime, c: &Closure, args: &[TVMFFIAny]) -> FfiResult<Any> {
        let _g = ActiveGuard::enter(rt);
        match c {
            Closure::Pool(i) => match self.exe.functions[*i].kind {
                FuncKind::Vm => rt.invoke_bytecode(*i, args),
                _ => {
                    let o = rt.pooled_function(*i).as_object().expect("pool entries of VM functions are closures");
                    rt.invoke_closure(&o, args)
                }
            },
            Closure::Object(o) => rt.invoke_closure(o, args),
        }
    }

    fn set_input(&self, a: &[TVMFFIAny], with_param_module: bool) -> FfiResult<()> {
        let rt = self.runtime()?;
        let name = arg_str("set_input", a, 0)?;
        let i = self.exe.function_index(name).ok_or_else(|| FfiError::value(format!("Unknown function: {name}")))?;
        let f = &self.exe.functions[i];
        let args = &a[1..];
        if args.len() as i64 != f.num_args {
            return Err(FfiError::value(format!(
                "The number of provided parameters doesn't match the number of arguments for {name}: {} given, {} expected",
                args.len(),
                f.num_args
            )));
        }
        let mut vals = Vec::with_capacity(args.len());
        for (k, v) in args.iter().enumerate() {
            if with_param_module && k + 1 == args.len() {
                // SAFETY: a valid view.
                let m = unsafe { Any::from_view(v) }?
                    .into_object()
                    .ok()
                    .filter(|o| o.type_index() == ti::MODULE)
                    .ok_or_else(|| {
                        FfiError::type_error("set_input_with_param_module: the last argument must be a module")
                    })?;
                let g = module::get_function(&m, "get_params", false)?
                    .ok_or_else(|| FfiError::attribute("the parameter module has no get_params"))?;
                vals.push(function::call(&g, &[])?);
            } else {
                vals.push(vm::convert_arg_to_device(v, rt.devices[0])?);
            }
        }
        self.state.lock().inputs.insert(name.to_owned(), SendAnys(vals));
        Ok(())
    }

    fn output(&self, a: &[TVMFFIAny], what: &str) -> FfiResult<Any> {
        let name = arg_str(what, a, 0)?;
        let out = self.state.lock().outputs.get(name).map(|v| v.0[0].clone()).ok_or_else(|| {
            FfiError::value(format!("No output saved for call of \"{name}\"; use `invoke_stateful` to call it first."))
        })?;
        let mut obj = out;
        for (k, v) in a[1..].iter().enumerate() {
            let idx = tvm_runtime_tvm_ffi::any::view_as_i64(v)
                .ok_or_else(|| FfiError::type_error(format!("{what}: index {k} must be an integer")))?;
            let arr = obj
                .as_object()
                .filter(|o| o.type_index() == ti::ARRAY)
                .ok_or_else(|| FfiError::value("Attempted to index into an object that is not an Array."))?;
            let items = seq_items(&arr);
            let item = usize::try_from(idx)
                .ok()
                .and_then(|i| items.get(i))
                .ok_or_else(|| FfiError::index(format!("Invalid index ({idx} >= {}).", items.len())))?;
            obj = item.clone();
        }
        Ok(obj)
    }
}

/// A callable of the machine.
enum Closure {
    /// A function-table entry of the executable.
    Pool(usize),
    /// A saved closure (or any closure/function object).
    Object(ObjectRef),
}

fn vm_of(this: &ObjectRef) -> &VmModule {
    module::native::<VmModule>(this).expect("functions of a VM module hold it")
}

impl NativeModule for VmModule {
    fn kind(&self) -> &str {
        "relax.VirtualMachine"
    }

    fn as_any(&self) -> &dyn std::any::Any {
        self
    }

    fn get_function(&self, this: &ObjectRef, name: &str) -> FfiResult<Option<ObjectRef>> {
        let me = this.clone();
        let f = match name {
            "vm_initialization" => function::from_fn(move |a| vm_of(&me).init(&me, a).map(|_| Any::none())),
            "invoke_closure" => function::from_fn(move |a| {
                let vmm = vm_of(&me);
                let rt = vmm.runtime()?;
                let c = arg_any("invoke_closure", a, 0)?.into_object().map_err(|v| {
                    FfiError::type_error(format!(
                        "invoke_closure: expected a closure, got {}",
                        types::type_key(v.type_index())
                    ))
                })?;
                vmm.invoke(&rt, &Closure::Object(c), &a[1..])
            }),
            "save_function" => function::from_fn(move |a| {
                let vmm = vm_of(&me);
                let rt = vmm.runtime()?;
                if a.len() < 3 {
                    return Err(FfiError::value("save_function takes (func_name, save_name, include_return, args...)"));
                }
                let (fname, save) = (arg_str("save_function", a, 0)?, arg_str("save_function", a, 1)?.to_owned());
                let include_return = tvm_runtime_tvm_ffi::any::view_as_bool(&a[2])
                    .ok_or_else(|| FfiError::type_error("save_function: include_return must be a bool"))?;
                let c = vmm.closure(fname)?.ok_or_else(|| FfiError::value(format!("Unknown function: {fname}")))?;
                let mut bound = Vec::new();
                for v in &a[3..] {
                    bound.push(vm::convert_arg_to_device(v, rt.devices[0])?);
                }
                let bound = SendAnys(bound);
                let owner = me.clone();
                let imp = function::from_fn(move |call| {
                    let vmm = vm_of(&owner);
                    let rt = vmm.runtime()?;
                    let mut all: Vec<TVMFFIAny> = call.to_vec();
                    all.extend(bound.items().iter().map(|b| *b.raw()));
                    let r = vmm.invoke(&rt, &c, &all)?;
                    Ok(if include_return { r } else { Any::none() })
                });
                vmm.state.lock().saved.insert(save, imp);
                Ok(Any::none())
            }),
            "invoke_stateful" => function::from_fn(move |a| {
                let vmm = vm_of(&me);
                let rt = vmm.runtime()?;
                let name = arg_str("invoke_stateful", a, 0)?;
                let i =
                    vmm.exe.function_index(name).ok_or_else(|| FfiError::value(format!("Unknown function: {name}")))?;
                let inputs = vmm.state.lock().inputs.get(name).map(|v| SendAnys(v.0.clone())).ok_or_else(|| {
                    FfiError::value(format!("No inputs set for stateful call of {name}; use `set_input` first."))
                })?;
                let views: Vec<TVMFFIAny> = inputs.0.iter().map(|v| *v.raw()).collect();
                let out = vmm.invoke(&rt, &Closure::Pool(i), &views)?;
                vmm.state.lock().outputs.insert(name.to_owned(), SendAnys(vec![out]));
                Ok(Any::none())
            }),
            "set_input" => function::from_fn(move |a| vm_of(&me).set_input(a, false).map(|_| Any::none())),
            "set_input_with_param_module" => {
                function::from_fn(move |a| vm_of(&me).set_input(a, true).map(|_| Any::none()))
            }
            "get_output" => function::from_fn(move |a| {
                let v = vm_of(&me).output(a, "get_output")?;
                if v.type_index() == ti::ARRAY {
                    return Err(FfiError::value(
                        "`get_output` cannot return a tuple for RPC compatibility. Please specify another index argument.",
                    ));
                }
                Ok(v)
            }),
            "get_output_arity" => function::from_fn(move |a| {
                let v = vm_of(&me).output(a, "get_output_arity")?;
                Ok(Any::int(match v.as_object() {
                    Some(o) if o.type_index() == ti::ARRAY => seq_items(&o).len() as i64,
                    _ => -1,
                }))
            }),
            "get_function_arity" => function::from_fn(move |a| {
                let vmm = vm_of(&me);
                let name = arg_str("get_function_arity", a, 0)?;
                let i =
                    vmm.exe.function_index(name).ok_or_else(|| FfiError::value(format!("Unknown function: {name}")))?;
                Ok(Any::int(vmm.exe.functions[i].param_names.len() as i64))
            }),
            "get_function_param_name" => function::from_fn(move |a| {
                let vmm = vm_of(&me);
                let name = arg_str("get_function_param_name", a, 0)?;
                let i =
                    vmm.exe.function_index(name).ok_or_else(|| FfiError::value(format!("Unknown function: {name}")))?;
                let idx = a
                    .get(1)
                    .and_then(tvm_runtime_tvm_ffi::any::view_as_i64)
                    .ok_or_else(|| FfiError::type_error("get_function_param_name: the index must be an integer"))?;
                let names = &vmm.exe.functions[i].param_names;
                let n = usize::try_from(idx).ok().and_then(|k| names.get(k)).ok_or_else(|| {
                    FfiError::value(format!("Invalid index for {name} ({idx} out of {})", names.len()))
                })?;
                Ok(Any::string(n))
            }),
            "set_instrument" => function::from_fn(move |a| {
                let vmm = vm_of(&me);
                let rt = vmm.runtime()?;
                let first = arg_any("set_instrument", a, 0)?;
                let f =
                    if first.is_none() {
                        None
                    } else if let Some(o) = first.as_object().filter(|o| o.type_index() == ti::FUNCTION) {
                        Some(o)
                    } else {
                        let key = first.as_str().ok_or_else(|| {
                            FfiError::type_error("set_instrument takes a function or the name of a factory")
                        })?;
                        let factory =
                            registry::get(key).ok_or_else(|| FfiError::value(format!("Cannot find factory {key}")))?;
                        let r = function::call(&factory, &a[1..])?;
                        Some(r.into_object().ok().filter(|o| o.type_index() == ti::FUNCTION).ok_or_else(|| {
                            FfiError::type_error(format!("the factory {key} did not return a function"))
                        })?)
                    };
                rt.set_instrument(f);
                Ok(Any::none())
            }),
            _ => {
                let Some(c) = self.closure(name)? else { return Ok(None) };
                function::from_fn(move |a| {
                    let vmm = vm_of(&me);
                    let rt = vmm.runtime()?;
                    vmm.invoke(&rt, &c, a)
                })
            }
        };
        Ok(Some(f))
    }
}

/// `ffi.Module.load_from_bytes.relax.VMExecutable`: the module of a serialized executable.
pub fn load_from_bytes(bytes: &[u8]) -> FfiResult<ObjectRef> {
    let exe = Executable::load(bytes).map_err(|e| FfiError::value(format!("relax.VMExecutable: {e}")))?;
    Ok(module::make_native_module(Box::new(ExecModule::new(exe))))
}

/// Registers the loaders.
pub fn register(b: &mut Builder) {
    b.add("ffi.Module.load_from_bytes.relax.VMExecutable", |a| {
        let v = arg_any("ffi.Module.load_from_bytes.relax.VMExecutable", a, 0)?;
        let bytes = v
            .as_str_bytes()
            .ok_or_else(|| FfiError::type_error("ffi.Module.load_from_bytes.relax.VMExecutable takes bytes"))?;
        Ok(Any::object(load_from_bytes(bytes)?))
    });
    let from_file = |a: &[TVMFFIAny]| {
        let path = arg_str("relax.ExecutableLoadFromFile", a, 0)?;
        let bytes = std::fs::read(path).map_err(|e| FfiError::runtime(format!("cannot read {path}: {e}")))?;
        Ok(Any::object(load_from_bytes(&bytes)?))
    };
    b.add("ffi.Module.load_from_file.relax.VMExecutable", from_file);
    b.add("relax.ExecutableLoadFromFile", from_file);
}
