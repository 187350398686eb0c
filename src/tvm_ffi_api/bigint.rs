//! The big-integer exports of `c_api.h`.

use crate::tvm_ffi::error::safe_call;
use crate::tvm_ffi::{bigint, FfiError, TVMFFIAny, TVMFFIByteArray};
use std::ffi::c_int;

/// `TVMFFIBigIntFromByteArray`: whole 64-bit words (least significant first, native byte
/// order) in, the canonical integer (an int when it fits) out.
///
/// # Safety
/// `input` is null or a valid byte array; `out` is null or writable.
#[no_mangle]
pub unsafe extern "C" fn TVMFFIBigIntFromByteArray(input: *const TVMFFIByteArray, out: *mut TVMFFIAny) -> c_int {
    safe_call(|| {
        // SAFETY: by contract.
        let slot = unsafe { out.as_mut() }.ok_or_else(|| FfiError::value("TVMFFIBigIntFromByteArray: out is NULL"))?;
        *slot = TVMFFIAny::NONE;
        // SAFETY: by contract.
        let b = unsafe { input.as_ref() }.ok_or_else(|| FfiError::value("TVMFFIBigIntFromByteArray: input is NULL"))?;
        // SAFETY: a valid byte array.
        *slot = bigint::from_bytes(unsafe { b.as_slice() })?.into_raw();
        Ok(())
    })
}

/// `TVMFFIBigIntGetContentByteArray`: the words of an int or BigInt cell (empty for anything
/// else, or a null cell).
///
/// # Safety
/// `value` is null or a valid cell that outlives the returned view.
#[no_mangle]
pub unsafe extern "C" fn TVMFFIBigIntGetContentByteArray(value: *const TVMFFIAny) -> TVMFFIByteArray {
    // SAFETY: by contract.
    match unsafe { value.as_ref() } {
        // SAFETY: by contract.
        Some(v) => unsafe { bigint::content(v) },
        None => TVMFFIByteArray::EMPTY,
    }
}
