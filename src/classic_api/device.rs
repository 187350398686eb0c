//! Streams and raw device memory.

use super::guard::guard;
use super::handle;
use super::runtime_api::TVMStreamHandle;
use crate::abi::{DLDataType, DLDevice, DLTensor};
use crate::device::{self, device_of};
use crate::error::Error;
use crate::ndarray;
use std::ffi::{c_char, c_int, c_void};

/// Creates a stream (NULL on devices without streams, such as the CPU).
/// # Ownership
/// `*out`: owned by caller (free with `TVMStreamFree`).
/// # Safety
/// `out` is writable.
#[no_mangle]
pub unsafe extern "C" fn TVMStreamCreate(device_type: c_int, device_id: c_int, out: *mut TVMStreamHandle) -> c_int {
    guard(|| {
        // SAFETY: per contract.
        let slot = unsafe { handle::out(out, "out")? };
        let s = device::api(device_type)?.create_stream(device_of(device_type, device_id))?;
        slot.write(s);
        Ok(())
    })
}

/// Frees a stream.
/// # Safety
/// `stream` came from `TVMStreamCreate` on that device.
#[no_mangle]
pub unsafe extern "C" fn TVMStreamFree(device_type: c_int, device_id: c_int, stream: TVMStreamHandle) -> c_int {
    guard(|| device::api(device_type)?.free_stream(device_of(device_type, device_id), stream))
}

/// Makes `handle` this thread's current stream on the device.
/// # Safety
/// `handle` is NULL or a stream of that device.
#[no_mangle]
pub unsafe extern "C" fn TVMSetStream(device_type: c_int, device_id: c_int, handle: TVMStreamHandle) -> c_int {
    guard(|| device::api(device_type)?.set_stream(device_of(device_type, device_id), handle))
}

/// Waits for `stream` (NULL: the default stream).
/// # Safety
/// `stream` is NULL or a stream of that device.
#[no_mangle]
pub unsafe extern "C" fn TVMSynchronize(device_type: c_int, device_id: c_int, stream: TVMStreamHandle) -> c_int {
    guard(|| device::api(device_type)?.stream_sync(device_of(device_type, device_id), stream))
}

/// Makes `dst` wait for the work queued on `src`.
/// # Safety
/// Both are NULL or streams of that device.
#[no_mangle]
pub unsafe extern "C" fn TVMStreamStreamSynchronize(
    device_type: c_int,
    device_id: c_int,
    src: TVMStreamHandle,
    dst: TVMStreamHandle,
) -> c_int {
    guard(|| device::api(device_type)?.sync_stream_from_to(device_of(device_type, device_id), src, dst))
}

/// Allocates device memory.
/// # Ownership
/// `*out_data`: owned by caller (free with `TVMDeviceFreeDataSpace` on the same device).
/// # Safety
/// `out_data` is writable.
#[no_mangle]
pub unsafe extern "C" fn TVMDeviceAllocDataSpace(
    dev: DLDevice,
    nbytes: usize,
    alignment: usize,
    type_hint: DLDataType,
    out_data: *mut *mut c_void,
) -> c_int {
    guard(|| {
        // SAFETY: per contract.
        let slot = unsafe { handle::out(out_data, "out_data")? };
        let p = device::api(dev.device_type)?.alloc_data_space(dev, nbytes, alignment, type_hint)?;
        slot.write(p);
        Ok(())
    })
}

/// Allocates device memory for a shape, in a memory scope (NULL or "global": plain memory).
/// # Ownership
/// `*out_data`: owned by caller (free with `TVMDeviceFreeDataSpace`).
/// # Safety
/// `shape` holds `ndim` extents; `mem_scope` is NULL or NUL-terminated; `out_data` is writable.
#[no_mangle]
pub unsafe extern "C" fn TVMDeviceAllocDataSpaceWithScope(
    dev: DLDevice,
    ndim: c_int,
    shape: *const i64,
    dtype: DLDataType,
    mem_scope: *const c_char,
    out_data: *mut *mut c_void,
) -> c_int {
    guard(|| {
        // SAFETY: per contract.
        let slot = unsafe { handle::out(out_data, "out_data")? };
        let n = usize::try_from(ndim).map_err(|_| Error::value(format!("negative ndim {ndim}")))?;
        // SAFETY: per contract.
        let shape = unsafe { crate::value::slice_from_raw(shape, n)? };
        // SAFETY: per contract.
        let scope = if mem_scope.is_null() { None } else { Some(unsafe { handle::cstr(mem_scope, "mem_scope")? }) };
        let p = device::api(dev.device_type)?.alloc_data_space_scoped(dev, shape, dtype, scope)?;
        slot.write(p);
        Ok(())
    })
}

/// Frees device memory (NULL is a no-op).
/// # Safety
/// `ptr` is NULL or came from an allocation on `dev`, not used afterwards.
#[no_mangle]
pub unsafe extern "C" fn TVMDeviceFreeDataSpace(dev: DLDevice, ptr: *mut c_void) -> c_int {
    guard(|| device::api(dev.device_type)?.free_data_space(dev, ptr))
}

/// Copies between tensors through the non-CPU side's device API (no device-type check).
/// # Safety
/// Both are live tensors.
#[no_mangle]
pub unsafe extern "C" fn TVMDeviceCopyDataFromTo(
    from: *mut DLTensor,
    to: *mut DLTensor,
    stream: TVMStreamHandle,
) -> c_int {
    guard(|| {
        // SAFETY: per contract.
        let (f, t) = unsafe { (handle::tensor(from, "from")?, handle::tensor(to, "to")?) };
        ndarray::copy_routed(f, t, stream)
    })
}
