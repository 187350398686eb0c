//! OpenCL: the driver opened at run time ([`driver`]), the device API
//! ([`api`]) and the `opencl` module ([`module`]). Nothing here opens the driver before an
//! OpenCL operation needs it, so CPU models load and run on machines without OpenCL, and
//! OpenCL modules load there too (their calls fail with `No OpenCL device (...)`).
//!
//! A crate above the classic object model (`tvm-runtime-classic`, whose modules it uses under
//! their usual paths); the library's face installs its device API in the core and registers
//! its globals and its library-binary loader (`register`, `load_tagged`) when it loads.

#![warn(unreachable_pub)]

pub mod api;
pub mod driver;
pub mod module;

use module::OpenClModule;
use tvm_runtime_classic::device::kernel::FunctionMap;
use tvm_runtime_classic::error::{Error, Result};
use tvm_runtime_classic::module::{blob, Module};
use tvm_runtime_classic::registry::Registrar;
use tvm_runtime_classic::value::Value;

/// Registers `device_api.opencl`, the texture globals and the loaders.
pub fn register(r: &mut Registrar<'_>) {
    r.func("device_api.opencl", |_| Ok(tvm_runtime_classic::device::api_token(tvm_runtime_classic::device::OPENCL)));
    r.func("device_api.opencl.AllocTexture", |_| Err(texture_unsupported()));
    r.func("device_api.opencl.FreeTexture", |_| Err(texture_unsupported()));
    r.func("runtime.module.loadbinary_opencl", |a| {
        let m = blob::with_stream(a.handle(0)?, |s| OpenClModule::load(s.reader()))?;
        Ok(Value::Module(Module::new(m)))
    });
    r.func("runtime.module.loadfile_cl", |a| {
        a.expect_at_least("runtime.module.loadfile_cl", 1)?;
        let format = if a.len() > 1 { a.string(1)? } else { String::new() };
        Ok(Value::Module(Module::new(OpenClModule::load_file(&a.string(0)?, &format)?)))
    });
    r.func("runtime.module.loadfile_clbin", |_| {
        Err(Error::value("OpenCL binary formats are not supported (as in TVM v0.8, only `cl` source modules load)"))
    });
    r.func("runtime.opencl.SetProgramCacheDir", |a| {
        a.expect_len("runtime.opencl.SetProgramCacheDir", 1)?;
        let dir = a.string(0)?;
        module::set_cache_dir((!dir.is_empty()).then(|| dir.into()));
        Ok(Value::Null)
    });
}

/// The `opencl` entry of a v0.20+ library binary (installed as its
/// [`tvm_runtime_classic::module::device_code`] loader).
pub fn load_tagged(fmt: String, fmap: FunctionMap, code: Vec<u8>) -> Result<Module> {
    OpenClModule::new(fmt, fmap, code).map(Module::new)
}

fn texture_unsupported() -> Error {
    Error::value("OpenCL textures (image2d memory scopes) are not supported by this runtime")
}

/// Whether OpenCL can run here: the driver loads and a platform has a device.
pub fn available() -> Result<usize> {
    Ok(api::workspace()?.devices.len())
}
