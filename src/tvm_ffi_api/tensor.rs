//! The tensor exports of `c_api.h` and `TVMFFIEnvTensorAlloc` of `c_env_api.h`.

use crate::abi::{DLManagedTensor, DLTensor};
use crate::tvm_ffi::error::safe_call;
use crate::tvm_ffi::object::TVMFFIObject;
use crate::tvm_ffi::tensor::{self, dlpack::DLManagedTensorVersioned};
use crate::tvm_ffi::{FfiError, FfiResult};
use std::ffi::{c_int, c_void};

#[inline]
fn out_slot<'a, T>(out: *mut T, what: &'static str) -> FfiResult<&'a mut T> {
    // SAFETY: callers pass null or a writable slot (checked for null here).
    match unsafe { out.as_mut() } {
        Some(slot) => Ok(slot),
        None => Err(null_out(what)),
    }
}

#[cold]
#[inline(never)]
fn null_out(what: &'static str) -> FfiError {
    FfiError::value(format!("{what}: the output pointer is NULL"))
}

/// `TVMFFITensorFromDLPack`: adopts a legacy DLPack tensor (ownership moves on success only).
///
/// # Safety
/// `from` is null or a live managed tensor; `out` is null or writable.
#[no_mangle]
pub unsafe extern "C" fn TVMFFITensorFromDLPack(
    from: *mut DLManagedTensor,
    require_alignment: i32,
    require_contiguous: i32,
    out: *mut *mut c_void,
) -> c_int {
    safe_call(|| {
        let slot = out_slot(out, "TVMFFITensorFromDLPack")?;
        // SAFETY: by contract.
        let t = unsafe { tensor::from_dlpack(from, require_alignment, require_contiguous != 0) }?;
        *slot = t.into_raw().cast();
        Ok(())
    })
}

/// `TVMFFITensorFromDLPackVersioned`: adopts a versioned DLPack tensor (ownership moves on
/// success only).
///
/// # Safety
/// `from` is null or a live managed tensor; `out` is null or writable.
#[no_mangle]
pub unsafe extern "C" fn TVMFFITensorFromDLPackVersioned(
    from: *mut DLManagedTensorVersioned,
    require_alignment: i32,
    require_contiguous: i32,
    out: *mut *mut c_void,
) -> c_int {
    safe_call(|| {
        let slot = out_slot(out, "TVMFFITensorFromDLPackVersioned")?;
        // SAFETY: by contract.
        let t = unsafe { tensor::from_dlpack_versioned(from, require_alignment, require_contiguous != 0) }?;
        *slot = t.into_raw().cast();
        Ok(())
    })
}

/// `TVMFFITensorToDLPack`: a legacy managed tensor holding a reference to the tensor.
///
/// # Safety
/// `from` is null or a live object; `out` is null or writable.
#[no_mangle]
pub unsafe extern "C" fn TVMFFITensorToDLPack(from: *mut c_void, out: *mut *mut DLManagedTensor) -> c_int {
    safe_call(|| {
        let slot = out_slot(out, "TVMFFITensorToDLPack")?;
        // SAFETY: by contract.
        unsafe {
            tensor::expect_tensor(from.cast(), "TVMFFITensorToDLPack")?;
            *slot = tensor::to_dlpack(from.cast());
        }
        Ok(())
    })
}

/// `TVMFFITensorToDLPackVersioned`: a versioned managed tensor holding a reference.
///
/// # Safety
/// `from` is null or a live object; `out` is null or writable.
#[no_mangle]
pub unsafe extern "C" fn TVMFFITensorToDLPackVersioned(
    from: *mut c_void,
    out: *mut *mut DLManagedTensorVersioned,
) -> c_int {
    safe_call(|| {
        let slot = out_slot(out, "TVMFFITensorToDLPackVersioned")?;
        // SAFETY: by contract.
        unsafe {
            tensor::expect_tensor(from.cast(), "TVMFFITensorToDLPackVersioned")?;
            *slot = tensor::to_dlpack_versioned(from.cast());
        }
        Ok(())
    })
}

/// `TVMFFITensorCreateUnsafeView`: a tensor over `prototype` that keeps `source` alive.
///
/// # Safety
/// `source` is null or a live object; `prototype` is null or a valid DLTensor; `out` is null or
/// writable.
#[no_mangle]
pub unsafe extern "C" fn TVMFFITensorCreateUnsafeView(
    source: *mut c_void,
    prototype: *const DLTensor,
    out: *mut *mut c_void,
) -> c_int {
    safe_call(|| {
        let slot = out_slot(out, "TVMFFITensorCreateUnsafeView")?;
        // SAFETY: by contract.
        let t = unsafe { tensor::create_view(source.cast::<TVMFFIObject>(), prototype) }?;
        *slot = t.into_raw().cast();
        Ok(())
    })
}

/// `TVMFFIEnvTensorAlloc`: a tensor like `prototype` from the environment's DLPack allocator.
///
/// # Safety
/// `prototype` is null or a valid DLTensor; `out` is null or writable.
#[no_mangle]
pub unsafe extern "C" fn TVMFFIEnvTensorAlloc(prototype: *mut DLTensor, out: *mut *mut c_void) -> c_int {
    safe_call(|| {
        let slot = out_slot(out, "TVMFFIEnvTensorAlloc")?;
        // SAFETY: by contract.
        let t = unsafe { tensor::env_alloc(prototype) }?;
        *slot = t.into_raw().cast();
        Ok(())
    })
}
