//! Devices: the core's device API ([`tvm_runtime_core::device`], re-exported here: the trait,
//! the CPU, names, workspaces) and the back ends above it: CUDA and OpenCL (`cuda/`,
//! `opencl/`, sharing `kernel.rs`), and the RPC device API of remote device types.
//!
//! The core finds a back end only once it is installed: [`install_back_ends`] installs every
//! back end this build has; the library runs it when it is loaded (`crate::init`).

#[cfg(feature = "cuda")]
pub mod cuda;
#[cfg(any(feature = "opencl", feature = "cuda"))]
pub mod kernel;
#[cfg(feature = "opencl")]
pub mod opencl;

pub use tvm_runtime_core::device::*;

use crate::value::Value;
use std::ffi::c_void;

/// Installs the device APIs of this build's back ends in the core (idempotent).
pub fn install_back_ends() {
    #[cfg(feature = "cuda")]
    {
        install(CUDA, &cuda::api::CUDA_API);
        install(CUDA_HOST, &cuda::api::CUDA_API);
    }
    #[cfg(feature = "opencl")]
    install(OPENCL, &opencl::api::OPENCL_API);
    #[cfg(feature = "rpc")]
    install_remote(crate::rpc::device_api());
}

/// The first of `names` that the dynamic loader opens (a GPU driver, opened at run time), or
/// every attempt's error, joined.
pub fn open_first_library(names: &[&str]) -> std::result::Result<libloading::Library, String> {
    let mut errors = Vec::new();
    for name in names {
        // SAFETY: loading a driver library runs its initialisers, which have no preconditions.
        match unsafe { libloading::Library::new(*name) } {
            Ok(l) => return Ok(l),
            Err(e) => errors.push(crate::error::source_chain(&e)),
        }
    }
    Err(errors.join("; "))
}

/// The handle a `device_api.<name>` global returns: a token for the device type, never
/// dereferenced.
pub fn api_token(device_type: i32) -> Value {
    Value::Handle(device_type as usize as *mut c_void)
}

impl From<Attr> for Value {
    fn from(a: Attr) -> Value {
        match a {
            Attr::Null => Value::Null,
            Attr::Int(i) => Value::Int(i),
            Attr::Float(x) => Value::Float(x),
            Attr::Str(s) => Value::str(s),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn back_ends_are_installed_at_load() {
        // Installed before main by the constructor: nothing here installs them.
        #[cfg(feature = "rpc")]
        {
            // RPC devices go to the RPC device API, which needs a live session.
            let rpc = get_api(200, false).unwrap().unwrap();
            let e = rpc.set_device(device_of(200, 0)).unwrap_err().to_string();
            assert!(e.contains("RPC session 0 is closed or does not exist"), "{e}");
        }
        #[cfg(feature = "cuda")]
        assert!(get_api(CUDA, false).unwrap().is_some() && get_api(CUDA_HOST, false).unwrap().is_some());
        #[cfg(feature = "opencl")]
        assert!(get_api(OPENCL, false).unwrap().is_some());
        #[cfg(not(feature = "cuda"))]
        assert!(get_api(CUDA, true).unwrap().is_none());
    }
}
