//! CUDA: the driver opened at run time ([`driver`], cudarc's bindings with
//! dynamic loading), the device API for `cuda` and `cuda_host` ([`api`]) and the `cuda` module
//! ([`module`]). Loading a CUDA export never opens the driver; the first CUDA operation does,
//! and without a driver it fails with `CUDA: CUDA driver library could not be loaded (...)`.
//!
//! A crate above the classic object model (`tvm-runtime-classic`, whose modules it uses under
//! their usual paths); the library's face installs its device API in the core and registers
//! its globals and its library-binary loader (`register`, `load_tagged`) when it loads.

#![warn(unreachable_pub)]

pub mod api;
pub mod driver;
pub mod libdevice;
pub mod module;

use module::CudaModule;
use tvm_runtime_classic::device::kernel::FunctionMap;
use tvm_runtime_classic::error::Result;
use tvm_runtime_classic::module::{blob, Module};
use tvm_runtime_classic::registry::Registrar;
use tvm_runtime_classic::value::Value;

/// Registers `device_api.cuda`, `device_api.cuda_host`, the loaders and
/// `runtime.GetCudaFreeMemory`.
pub fn register(r: &mut Registrar<'_>) {
    r.func("device_api.cuda", |_| Ok(tvm_runtime_classic::device::api_token(tvm_runtime_classic::device::CUDA)));
    r.func("device_api.cuda_host", |_| Ok(tvm_runtime_classic::device::api_token(tvm_runtime_classic::device::CUDA)));
    r.func("runtime.module.loadbinary_cuda", |a| {
        let m = blob::with_stream(a.handle(0)?, |s| CudaModule::load(s.reader()))?;
        Ok(Value::Module(Module::new(m)))
    });
    for fmt in ["ptx", "cubin", "fatbin"] {
        let name = format!("runtime.module.loadfile_{fmt}");
        r.func(&name, |a| {
            a.expect_at_least("runtime.module.loadfile_ptx", 1)?;
            let format = if a.len() > 1 { a.string(1)? } else { String::new() };
            Ok(Value::Module(Module::new(CudaModule::load_file(&a.string(0)?, &format)?)))
        });
    }
    r.func("runtime.GetCudaFreeMemory", |_| Ok(Value::str(api::free_memory_text()?)));
}

/// The `cuda` entry of a v0.20+ library binary holding PTX or a cubin (installed as its
/// [`tvm_runtime_classic::module::device_code`] loader; CUDA C source is compiled before).
pub fn load_tagged(fmt: String, fmap: FunctionMap, code: Vec<u8>) -> Result<Module> {
    Ok(Module::new(CudaModule::new(fmt, fmap, code)))
}
