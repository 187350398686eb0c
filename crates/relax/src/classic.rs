//! The Relax VM behind the classic C API: exports of TVM v0.14-v0.19 (`relax.build`), whose
//! `__tvm_dev_mblob` holds a `relax.Executable` (classic constant tags) importing a library of
//! classic packed-function kernels. The same executable parser, VM and builtins run them; at the
//! edges values change sides:
//!
//! - the classic loader `runtime.module.loadbinary_relax.Executable` makes a classic module over
//!   a tvm-ffi `relax.VMExecutable`; its `vm_load_executable` gives the VM the classic imports
//!   (the kernel library) as tvm-ffi modules whose functions take tvm-ffi values
//!   ([`tvm_runtime_tvm_ffi::classic_bridge`]);
//! - the classic `relax.VirtualMachine` module's functions take classic values (NDArrays become
//!   tensors over the same memory, ShapeTuples shapes, Arrays arrays) and give classic ones back.
//!
//! Data types are not translated: v0.14-v0.19 spell `bool` as `uint1`, in the executable's
//! constants and in the kernels' checks alike, so tensors keep the classic spelling here.

use super::executable::Executable;
use super::vm_module::{self, ExecModule};
use tvm_runtime_classic::error::{Error, Result};
use tvm_runtime_classic::function::PackedFunc;
use tvm_runtime_classic::module::blob;
use tvm_runtime_classic::module::{Module, ModuleNode};
use tvm_runtime_classic::registry::Registrar;
use tvm_runtime_classic::value::Value;
use tvm_runtime_tvm_ffi::any::TVMFFIAny;
use tvm_runtime_tvm_ffi::classic_values::{ffi_err, to_classic, to_ffi};
use tvm_runtime_tvm_ffi::object::ObjectRef as FfiObject;
use tvm_runtime_tvm_ffi::{function, module};

/// The classic `relax.Executable` module.
struct ClassicExec {
    exec: FfiObject,
}

/// The classic `relax.VirtualMachine` module.
struct ClassicVm {
    vm: FfiObject,
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
                    this.imports().into_iter().map(tvm_runtime_tvm_ffi::classic_bridge::ffi_module).collect::<Vec<_>>();
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
