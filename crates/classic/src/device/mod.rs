//! Devices as the classic object model sees them: the core's device API
//! ([`tvm_runtime_core::device`], re-exported here: the trait, the CPU, names, workspaces), what
//! the GPU back ends share (`kernel.rs`: kernel metadata and argument decoding), the driver
//! opener and the `device_api.*` tokens. The back ends themselves (CUDA, OpenCL) are crates
//! above this one, installed in the core by the library's face.

pub mod kernel;

pub use tvm_runtime_core::device::*;

use crate::value::Value;
use std::ffi::c_void;

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
