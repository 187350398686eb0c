//! The `extern "C"` functions of tvm-ffi's `c_api.h` and `extra/c_env_api.h`. Each one decodes
//! its arguments, runs the core inside [`safe_call`](crate::tvm_ffi::error::safe_call) (errors and panics
//! become a raised `ffi.Error` and a non-zero return) and encodes the result.

pub mod anylist;
pub mod bigint;
pub mod core;
pub mod env;
pub mod module;
pub mod reflection;
pub mod tensor;

/// Turns a C byte array argument into a `&str` (tvm-ffi keys and names are UTF-8).
///
/// # Safety
/// `p` is null or points to a valid `TVMFFIByteArray`.
unsafe fn arg_str<'a>(p: *const crate::tvm_ffi::TVMFFIByteArray, what: &str) -> crate::tvm_ffi::FfiResult<&'a str> {
    // SAFETY: by contract.
    let b = unsafe { p.as_ref() }.ok_or_else(|| crate::tvm_ffi::FfiError::value(format!("{what} is NULL")))?;
    // SAFETY: a valid byte array.
    std::str::from_utf8(unsafe { b.as_slice() })
        .map_err(|_| crate::tvm_ffi::FfiError::value(format!("{what} is not UTF-8")))
}
