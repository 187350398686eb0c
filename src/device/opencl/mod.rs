//! OpenCL: the driver opened at run time ([`driver`]), the device API
//! ([`api`]) and the `opencl` module ([`module`]). Nothing here opens the driver before an
//! OpenCL operation needs it, so CPU models load and run on machines without OpenCL, and
//! OpenCL modules load there too (their calls fail with `No OpenCL device (...)`).

pub mod api;
pub mod driver;
pub mod module;

use crate::error::{Error, Result};
use crate::module::{blob, Module};
use crate::registry::Registrar;
use crate::value::Value;
use module::OpenClModule;

/// Registers `device_api.opencl`, the texture globals and the loaders.
pub fn register(r: &mut Registrar<'_>) {
    r.func("device_api.opencl", |_| Ok(crate::device::api_token(crate::device::OPENCL)));
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

fn texture_unsupported() -> Error {
    Error::value("OpenCL textures (image2d memory scopes) are not supported by this runtime")
}

/// Whether OpenCL can run here: the driver loads and a platform has a device.
pub fn available() -> Result<usize> {
    Ok(api::workspace()?.devices.len())
}
