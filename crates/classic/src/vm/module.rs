//! The two module kinds: `VMExecutable` (a loaded executable, importing its kernel library) and
//! `VirtualMachine` (an interpreter over one, with its devices, allocators, inputs and result),
//! with the functions TVM v0.8's `python/tvm/runtime/vm.py` and `profiler_vm.py` call.
//!
//! Threads: an executable is immutable and serves any number of VMs on any threads. One VM's
//! functions lock it for the whole call, so two threads calling one VM at once take turns; a
//! call back into the same VM from inside one of its calls (a kernel calling `invoke`) is an
//! error instead of a deadlock.

use super::executable::Executable;
use super::interpreter::{copy_object_to, Interpreter, VmState};
use super::memory::{Allocator, AllocatorKind};
use super::profiler::Recorder;
use super::text;
use crate::abi::{DLDevice, DLTensor};
use crate::device;
use crate::error::{Error, Result};
use crate::executor::report::Report;
use crate::function::PackedFunc;
use crate::io::Writer;
use crate::module::{Module, ModuleNode};
use crate::ndarray::NDArray;
use crate::object::{AdtObj, ArrayObj, ObjectRef};
use crate::value::{code, Args, Value};
use parking_lot::ReentrantMutex;
use std::any::Any;
use std::cell::RefCell;
use std::sync::Arc;

/// The `VMExecutable` module.
pub struct ExecutableModule {
    exec: Arc<Executable>,
}

impl ExecutableModule {
    /// Wraps a loaded executable (its library is imported by the caller).
    pub fn new(exec: Executable) -> ExecutableModule {
        ExecutableModule { exec: Arc::new(exec) }
    }

    /// The executable.
    pub fn executable(&self) -> &Arc<Executable> {
        &self.exec
    }

    /// `GetLib`: the kernel library (the only import), or `None`.
    pub fn lib(this: &Module) -> Result<Option<Module>> {
        let imports = this.imports();
        if imports.len() > 1 {
            return Err(Error::value(format!(
                "The kernel library must be imported as the only module in an Executable ({} imports)",
                imports.len()
            )));
        }
        Ok(imports.into_iter().next())
    }

    fn function_params(&self, name: &str) -> Option<&[String]> {
        self.exec.function_index(name).map(|i| self.exec.functions[i].params.as_slice())
    }

    /// The serialized executable framed as a blob entry / file: one length-prefixed string.
    fn framed(&self) -> Result<Vec<u8>> {
        let mut w = Writer::default();
        w.str_bytes(&self.exec.save()?);
        Ok(w.buf)
    }
}

/// The error TVM raises for a name that is not one of a VM module's functions.
fn unknown(name: &str) -> Error {
    Error::tvm(format!("Unknown packed function: {name}"))
}

/// The executable behind a module argument.
pub(crate) fn executable_of(m: &Module) -> Result<&ExecutableModule> {
    m.downcast::<ExecutableModule>()
        .ok_or_else(|| Error::type_error(format!("expected a VMExecutable module, got a {} module", m.type_key())))
}

impl ModuleNode for ExecutableModule {
    fn type_key(&self) -> &str {
        "VMExecutable"
    }

    fn get_function(&self, name: &str, this: &Module) -> Result<Option<PackedFunc>> {
        let m = this.clone();
        let with = move |f: fn(&ExecutableModule, &Module, &Args<'_>) -> Result<Value>| {
            let m = m.clone();
            PackedFunc::from_fn(move |a| f(executable_of(&m)?, &m, a))
        };
        Ok(Some(match name {
            "get_lib" => with(|_, m, _| Ok(ExecutableModule::lib(m)?.map_or(Value::Null, Value::Module))),
            "get_bytecode" => with(|e, _, _| Ok(Value::str(text::bytecode(&e.exec)))),
            "get_constants" => with(|e, _, _| Ok(Value::str(text::constants(&e.exec)))),
            "get_stats" => with(|e, _, _| Ok(Value::str(text::stats(&e.exec)))),
            "save" => with(|e, _, _| Ok(Value::bytes(e.exec.save()?))),
            "get_function_arity" => with(|e, _, a| {
                a.expect_len("get_function_arity", 1)?;
                Ok(Value::Int(e.function_params(&a.string(0)?).map_or(-1, |p| p.len() as i64)))
            }),
            // As TVM: an unknown function or an index past the parameters gives "" (TVM logs an
            // error; for an index equal to the count it reads past its vector).
            "get_function_param_name" => with(|e, _, a| {
                a.expect_len("get_function_param_name", 2)?;
                let name = a.string(0)?;
                let i = a.i64(1)?;
                let p = e.function_params(&name).and_then(|p| usize::try_from(i).ok().and_then(|i| p.get(i)));
                Ok(Value::str(p.cloned().unwrap_or_default()))
            }),
            "vm_load_executable" => with(|_, m, _| Ok(Value::Module(Module::new(VirtualMachine::new(m, false)?)))),
            _ => return Err(unknown(name)),
        }))
    }

    fn save_to_binary(&self) -> Result<Vec<u8>> {
        self.framed()
    }

    fn save_to_file(&self, path: &str, _format: &str) -> Result<()> {
        std::fs::write(path, self.framed()?).map_err(|e| Error::value(format!("cannot write {path}: {e}")))
    }

    fn as_any(&self) -> &dyn Any {
        self
    }
}

/// The `VirtualMachine` module (also the profiling VM of `runtime._VirtualMachineDebug`).
pub struct VirtualMachine {
    /// Keeps the executable module (and so its library) alive.
    _exec_module: Module,
    interp: Interpreter,
    debug: bool,
    state: ReentrantMutex<RefCell<VmState>>,
}

/// A DLTensor argument (code 7).
fn dltensor_arg<'a>(a: &Args<'a>, i: usize) -> Result<&'a DLTensor> {
    let p = a.dltensor(i)?;
    // SAFETY: a code-7 argument is a live DLTensor for the call (the Args contract).
    unsafe { p.as_ref() }.ok_or_else(|| Error::value(format!("argument {i}: null tensor")))
}

impl VirtualMachine {
    /// `LoadExecutable`: a VM for the executable module `exec`, with its primitives resolved in
    /// the kernel library.
    pub fn new(exec_module: &Module, debug: bool) -> Result<VirtualMachine> {
        let exec = executable_of(exec_module)?.exec.clone();
        let lib = ExecutableModule::lib(exec_module)?;
        let mut packed = Vec::with_capacity(exec.primitives.len());
        if !exec.primitives.is_empty() {
            let lib = lib.ok_or_else(|| {
                Error::value(
                    "If the executable has declared primitive functions, the generated kernel library must non-be null.",
                )
            })?;
            for name in &exec.primitives {
                let f = lib
                    .get_function(name, true)?
                    .ok_or_else(|| Error::value(format!("Cannot find function in module: {name}")))?;
                packed.push(f);
            }
        }
        Ok(VirtualMachine {
            _exec_module: exec_module.clone(),
            interp: Interpreter { exec, packed },
            debug,
            state: ReentrantMutex::new(RefCell::new(VmState::default())),
        })
    }

    /// Runs `f` on the VM's state, holding the VM for the call.
    fn with_state<R>(&self, f: impl FnOnce(&mut VmState) -> Result<R>) -> Result<R> {
        let guard = self.state.lock();
        let mut st = guard.try_borrow_mut().map_err(|_| {
            Error::tvm("VirtualMachine: called again from inside one of its own calls on this thread (re-entrant use)")
        })?;
        f(&mut st)
    }

    fn function(&self, name: &str) -> Result<usize> {
        self.interp
            .exec
            .function_index(name)
            .ok_or_else(|| Error::value(format!("Cannot find function {name} in the executable")))
    }

    /// `init(dev_type, dev_id, alloc_type, ...)`.
    pub fn init(&self, a: &Args<'_>) -> Result<()> {
        if a.len() % 3 != 0 {
            return Err(Error::value(format!(
                "init expects (device type, device id, allocator type) triples, got {} arguments",
                a.len()
            )));
        }
        let mut devs = Vec::new();
        for i in (0..a.len()).step_by(3) {
            let dev = DLDevice { device_type: a.i32(i)?, device_id: a.i32(i + 1)? };
            if dev.device_type <= 0 || dev.device_type >= device::RPC_SESS_MASK {
                return Err(Error::value(format!("init: {} is not a local device type", dev.device_type)));
            }
            device::device_name(dev.device_type)?;
            devs.push((dev, AllocatorKind::from_code(a.i64(i + 2)?)?));
        }
        self.with_state(|st| devs.into_iter().try_for_each(|(d, k)| st.set_device(d, k)))
    }

    /// `set_input(func, *args)` (arguments from `offset` on).
    pub fn set_input(&self, name: &str, a: &Args<'_>, offset: usize) -> Result<()> {
        let fi = self.function(name)?;
        self.with_state(|st| self.set_input_locked(st, fi, name, a, offset))
    }

    fn set_input_locked(&self, st: &mut VmState, fi: usize, name: &str, a: &Args<'_>, offset: usize) -> Result<()> {
        let f = &self.interp.exec.functions[fi];
        let given = a.len().saturating_sub(offset);
        if given != f.params.len() {
            return Err(Error::value(format!(
                "The number of provided parameters doesn't match the number of arguments: \
                 {name} takes {}, got {given}",
                f.params.len()
            )));
        }
        let mut args = Vec::with_capacity(given);
        for (k, &dt) in f.params_device_type.iter().enumerate() {
            let i = offset + k;
            let dev = st.device(dt)?;
            let obj = if a.code(i)? == code::DLTENSOR {
                let t = dltensor_arg(a, i)?;
                let arr = NDArray::empty(device::tensor_shape(t)?, t.dtype, dev)?;
                arr.copy_from(t)?;
                arr.into_object()
            } else {
                let o = a
                    .object(i)?
                    .ok_or_else(|| Error::value(format!("input {k} ({}) of {name} is None", f.params[k])))?;
                copy_object_to(&o, dev).map_err(|e| e.context(format!("input {k} ({})", f.params[k])))?
            };
            args.push(obj);
        }
        st.inputs.insert(name.to_owned(), args);
        Ok(())
    }

    /// `invoke(func)`: runs it on the inputs set for it.
    pub fn invoke(&self, name: &str) -> Result<Value> {
        let fi = self.function(name)?;
        self.with_state(|st| self.invoke_locked(st, fi, name)).map(Value::from_object)
    }

    fn invoke_locked(&self, st: &mut VmState, fi: usize, name: &str) -> Result<ObjectRef> {
        let args = if self.interp.exec.functions[fi].params.is_empty() {
            Vec::new()
        } else {
            st.inputs
                .get(name)
                .cloned()
                .ok_or_else(|| Error::value(format!("Input has not been set for function {name}")))?
        };
        self.interp.invoke(st, fi, args)
    }

    /// `get_output(i)`.
    pub fn get_output(&self, i: i64) -> Result<Value> {
        self.with_state(|st| {
            let r =
                st.return_register.as_ref().ok_or_else(|| Error::value("no output yet: invoke a function first"))?;
            let out = match r.downcast::<AdtObj>() {
                Some(adt) => usize::try_from(i)
                    .ok()
                    .and_then(|k| adt.fields.get(k))
                    .ok_or_else(|| Error::index(format!("output {i} of {}", adt.fields.len())))?
                    .clone()
                    .ok_or_else(|| Error::value(format!("output {i} is None")))?,
                None if i == 0 => r.clone(),
                None => {
                    return Err(Error::index(format!(
                        "VM output contains only one item, but you are trying to get the {i}th."
                    )))
                }
            };
            NDArray::from_object(out)
                .map(Value::NDArray)
                .ok_or_else(|| Error::type_error(format!("output {i} is not a tensor")))
        })
    }

    /// `get_num_outputs()`.
    pub fn num_outputs(&self) -> Result<i64> {
        self.with_state(|st| {
            Ok(st
                .return_register
                .as_ref()
                .and_then(|r| r.downcast::<AdtObj>())
                .map_or(1, |adt| adt.fields.len() as i64))
        })
    }

    /// `invoke_return_to_device(func, dev_type, dev_id, *args)`.
    pub fn invoke_return_to_device(&self, a: &Args<'_>) -> Result<Value> {
        a.expect_at_least("invoke_return_to_device", 3)?;
        let name = a.string(0)?;
        let host = DLDevice { device_type: a.i32(1)?, device_id: a.i32(2)? };
        device::device_name(host.device_type)?;
        let fi = self.function(&name)?;
        // One call: another thread's inputs cannot come between these inputs and this run.
        let r = self.with_state(|st| {
            self.set_input_locked(st, fi, &name, a, 3)?;
            self.invoke_locked(st, fi, &name)
        })?;
        Ok(Value::from_object(copy_object_to(&r, host)?))
    }

    /// `get_input_index(input, func)`: the parameter's position, or -1.
    pub fn input_index(&self, input: &str, func: &str) -> Result<i64> {
        let f = &self.interp.exec.functions[self.function(func)?];
        Ok(f.params.iter().position(|p| p == input).map_or(-1, |i| i as i64))
    }

    /// `profile(func, collectors)` of the profiling VM: the report's JSON.
    pub fn profile(&self, name: &str) -> Result<String> {
        let fi = self.function(name)?;
        self.with_state(|st| {
            for _ in 0..3 {
                self.invoke_locked(st, fi, name)?;
            }
            let devices: Vec<DLDevice> = st.devices.iter().flatten().copied().collect();
            st.recorder = Some(Recorder::default());
            let r = self.invoke_locked(st, fi, name);
            let rec = st.recorder.take();
            r?;
            Ok(rec.unwrap_or_default().into_json(&devices))
        })
    }

    /// The allocator of a device type (for tests and diagnostics).
    pub fn allocator(&self, device_type: i32) -> Result<Option<Arc<Allocator>>> {
        self.with_state(|st| {
            Ok(usize::try_from(device_type).ok().and_then(|t| st.allocators.get(t).cloned().flatten()))
        })
    }
}

impl ModuleNode for VirtualMachine {
    fn type_key(&self) -> &str {
        "VirtualMachine"
    }

    fn get_function(&self, name: &str, this: &Module) -> Result<Option<PackedFunc>> {
        let with = |f: fn(&VirtualMachine, &Args<'_>) -> Result<Value>| this.method(move |vm, _, a| f(vm, a));
        Ok(Some(match name {
            "invoke" => with(|vm, a| {
                a.expect_at_least("invoke", 1)?;
                vm.invoke(&a.string(0)?)
            }),
            "invoke_stateful" => with(|vm, a| {
                a.expect_at_least("invoke_stateful", 1)?;
                vm.invoke(&a.string(0)?).map(|_| Value::Null)
            }),
            "invoke_return_to_device" => with(VirtualMachine::invoke_return_to_device),
            "get_output" => with(|vm, a| {
                a.expect_len("get_output", 1)?;
                vm.get_output(a.i64(0)?)
            }),
            "get_num_outputs" => with(|vm, _| vm.num_outputs().map(Value::Int)),
            "get_input_index" => with(|vm, a| {
                a.expect_len("get_input_index", 2)?;
                vm.input_index(&a.string(0)?, &a.string(1)?).map(Value::Int)
            }),
            "init" => with(|vm, a| vm.init(a).map(|()| Value::Null)),
            "set_input" => with(|vm, a| {
                a.expect_at_least("set_input", 1)?;
                vm.set_input(&a.string(0)?, a, 1).map(|()| Value::Null)
            }),
            "profile" if self.debug => with(|vm, a| {
                a.expect_at_least("profile", 1)?;
                if a.len() > 1 {
                    if let Some(c) = a.object(1)? {
                        if c.downcast::<ArrayObj>().is_some_and(|arr| !arr.items.is_empty()) {
                            return Err(Error::value("profile: metric collectors are not supported by this runtime"));
                        }
                    }
                }
                Ok(Value::Object(Report::new_object(vm.profile(&a.string(0)?)?)))
            }),
            "profile_rpc" if self.debug => with(|vm, a| {
                a.expect_len("profile_rpc", 1)?;
                Ok(Value::str(vm.profile(&a.string(0)?)?))
            }),
            _ => return Err(unknown(name)),
        }))
    }

    fn as_any(&self) -> &dyn Any {
        self
    }
}
