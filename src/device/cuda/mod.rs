//! CUDA: the driver opened at run time ([`driver`], cudarc's bindings with
//! dynamic loading), the device API for `cuda` and `cuda_host` ([`api`]) and the `cuda` module
//! ([`module`]). Loading a CUDA export never opens the driver; the first CUDA operation does,
//! and without a driver it fails with `CUDA: CUDA driver library could not be loaded (...)`.

pub mod api;
pub mod driver;
pub mod libdevice;
pub mod module;

use crate::module::{blob, Module};
use crate::registry::Registrar;
use crate::value::Value;
use module::CudaModule;

/// Registers `device_api.cuda`, `device_api.cuda_host`, the loaders and
/// `runtime.GetCudaFreeMemory`.
pub fn register(r: &mut Registrar<'_>) {
    r.func("device_api.cuda", |_| Ok(crate::device::api_token(crate::device::CUDA)));
    r.func("device_api.cuda_host", |_| Ok(crate::device::api_token(crate::device::CUDA)));
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
