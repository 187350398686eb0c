//! `c_env_api.h`: streams, the DLPack allocator, signals, the frontend's C API.

use crate::tvm_ffi::env;
use crate::tvm_ffi::error::safe_call;
use crate::tvm_ffi::FfiError;
use std::ffi::{c_char, c_int, c_void, CStr};

/// `TVMFFIEnvSetStream`.
///
/// # Safety
/// `orig` is null or writable.
#[no_mangle]
pub unsafe extern "C" fn TVMFFIEnvSetStream(
    device_type: i32,
    device_id: i32,
    stream: *mut c_void,
    orig: *mut *mut c_void,
) -> c_int {
    safe_call(|| {
        let old = env::set_stream(device_type, device_id, stream)?;
        // SAFETY: by contract.
        if let Some(o) = unsafe { orig.as_mut() } {
            *o = old;
        }
        Ok(())
    })
}

/// `TVMFFIEnvGetStream`.
#[no_mangle]
pub extern "C" fn TVMFFIEnvGetStream(device_type: i32, device_id: i32) -> *mut c_void {
    env::get_stream(device_type, device_id)
}

/// `TVMFFIEnvSetDLPackManagedTensorAllocator`.
///
/// # Safety
/// `orig` is null or writable; `alloc` follows `DLPackManagedTensorAllocator`.
#[no_mangle]
pub unsafe extern "C" fn TVMFFIEnvSetDLPackManagedTensorAllocator(
    alloc: *mut c_void,
    global: c_int,
    orig: *mut *mut c_void,
) -> c_int {
    let old = env::set_allocator(alloc, global != 0);
    // SAFETY: by contract.
    if let Some(o) = unsafe { orig.as_mut() } {
        *o = old;
    }
    0
}

/// `TVMFFIEnvGetDLPackManagedTensorAllocator`.
#[no_mangle]
pub extern "C" fn TVMFFIEnvGetDLPackManagedTensorAllocator() -> *mut c_void {
    env::get_allocator()
}

/// `TVMFFIEnvCheckSignals`.
#[no_mangle]
pub extern "C" fn TVMFFIEnvCheckSignals() -> c_int {
    std::panic::catch_unwind(env::check_signals).unwrap_or(-1)
}

/// `TVMFFIEnvRegisterCAPI`.
///
/// # Safety
/// `name` is NUL-terminated.
#[no_mangle]
pub unsafe extern "C" fn TVMFFIEnvRegisterCAPI(name: *const c_char, symbol: *mut c_void) -> c_int {
    safe_call(|| {
        if name.is_null() {
            return Err(FfiError::value("TVMFFIEnvRegisterCAPI: name is NULL"));
        }
        // SAFETY: by contract.
        let n = unsafe { CStr::from_ptr(name) }.to_string_lossy();
        env::register_capi(&n, symbol)
    })
}
