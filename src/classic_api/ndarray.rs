//! NDArray and DLPack exports.

use super::guard::{guard, guard_void};
use super::handle::{self, out};
use super::runtime_api::{tvm_index_t, TVMArrayHandle, TVMStreamHandle};
use crate::abi::{DLDevice, DLManagedTensor};
use crate::error::Error;
use crate::ndarray::{self, NDArray};
use crate::object;
use crate::value::dtype::dtype;
use std::ffi::{c_int, c_uint, c_void};

/// Allocates an array of uninitialized memory.
/// # Ownership
/// `shape`: borrowed for the call (copied). `*out`: owned by caller (free with `TVMArrayFree`).
/// # Safety
/// `shape` holds `ndim` extents; `out` is writable.
#[no_mangle]
pub unsafe extern "C" fn TVMArrayAlloc(
    shape: *const tvm_index_t,
    ndim: c_int,
    dtype_code: c_int,
    dtype_bits: c_int,
    dtype_lanes: c_int,
    device_type: c_int,
    device_id: c_int,
    out: *mut TVMArrayHandle,
) -> c_int {
    guard(|| {
        let n = usize::try_from(ndim).map_err(|_| Error::value(format!("TVMArrayAlloc: negative ndim {ndim}")))?;
        // SAFETY: per contract.
        let shape = unsafe { crate::value::slice_from_raw(shape, n)? };
        // SAFETY: per contract.
        let slot = unsafe { handle::out(out, "out")? };
        // TVM truncates code/bits/lanes to u8/u8/u16.
        let t = dtype(dtype_code as u8, dtype_bits as u8, dtype_lanes as u16);
        let a = NDArray::empty(shape, t, DLDevice { device_type, device_id })?;
        slot.write(a.into_handle());
        Ok(())
    })
}

/// Releases an array reference (NULL accepted).
/// # Safety
/// `handle` is NULL or an owned NDArray handle, not used afterwards.
#[no_mangle]
pub unsafe extern "C" fn TVMArrayFree(handle: TVMArrayHandle) -> c_int {
    guard(|| {
        if !handle.is_null() {
            // SAFETY: per contract: an owned handle, 16 bytes past its container's header.
            unsafe { object::release_raw(NDArray::header_of_handle(handle)) };
        }
        Ok(())
    })
}

/// Copies `nbytes` of host memory into the array (synchronous).
/// # Safety
/// `handle` is a live array; `data` holds `nbytes` readable bytes.
#[no_mangle]
pub unsafe extern "C" fn TVMArrayCopyFromBytes(handle: TVMArrayHandle, data: *mut c_void, nbytes: usize) -> c_int {
    guard(|| {
        // SAFETY: per contract.
        let t = unsafe { handle::tensor(handle, "handle")? };
        ndarray::copy_from_bytes(t, data, nbytes)
    })
}

/// Copies the array into `nbytes` of host memory (synchronous).
/// # Safety
/// `handle` is a live array; `data` holds `nbytes` writable bytes.
#[no_mangle]
pub unsafe extern "C" fn TVMArrayCopyToBytes(handle: TVMArrayHandle, data: *mut c_void, nbytes: usize) -> c_int {
    guard(|| {
        // SAFETY: per contract.
        let t = unsafe { handle::tensor(handle, "handle")? };
        ndarray::copy_to_bytes(t, data, nbytes)
    })
}

/// Copies between two tensors of equal byte size (asynchronous on GPUs).
/// # Safety
/// Both are live tensors (array handles or plain `DLTensor*`).
#[no_mangle]
pub unsafe extern "C" fn TVMArrayCopyFromTo(
    from: TVMArrayHandle,
    to: TVMArrayHandle,
    stream: TVMStreamHandle,
) -> c_int {
    guard(|| {
        // SAFETY: per contract.
        let (f, t) = unsafe { (handle::tensor(from, "from")?, handle::tensor(to, "to")?) };
        ndarray::copy_tensor(f, t, stream)
    })
}

/// Adopts a DLPack tensor without copying; its deleter runs when the array's last reference goes.
/// # Ownership
/// `from`: ownership moves to the array. `*out`: owned by caller (free with `TVMArrayFree`).
/// # Safety
/// `from` is a live managed tensor; `out` is writable.
#[no_mangle]
pub unsafe extern "C" fn TVMArrayFromDLPack(from: *mut DLManagedTensor, out: *mut TVMArrayHandle) -> c_int {
    guard(|| {
        // SAFETY: per contract.
        let slot = unsafe { handle::out(out, "out")? };
        // SAFETY: per contract.
        let a = unsafe { NDArray::from_dlpack(from)? };
        slot.write(a.into_handle());
        Ok(())
    })
}

/// Exports an array to DLPack.
/// # Ownership
/// `*out`: owned by caller; call its `deleter` exactly once.
/// # Safety
/// `from` is a live array; `out` is writable.
#[no_mangle]
pub unsafe extern "C" fn TVMArrayToDLPack(from: TVMArrayHandle, out: *mut *mut DLManagedTensor) -> c_int {
    guard(|| {
        // SAFETY: per contract.
        let a = unsafe { handle::ndarray(from)? };
        // SAFETY: per contract.
        let slot = unsafe { handle::out(out, "out")? };
        slot.write(a.to_dlpack());
        Ok(())
    })
}

/// Calls `dltensor->deleter(dltensor)` (skipped when NULL).
/// # Safety
/// `dltensor` is NULL or a live managed tensor, not used afterwards.
#[no_mangle]
pub unsafe extern "C" fn TVMDLManagedTensorCallDeleter(dltensor: *mut DLManagedTensor) {
    guard_void(|| {
        // SAFETY: per contract.
        if let Some(m) = unsafe { dltensor.as_ref() } {
            if let Some(del) = m.deleter {
                // SAFETY: per contract, called once.
                unsafe { del(dltensor) };
            }
        }
    })
}

/// The type index of the container behind an array handle (2 for every array).
/// # Safety
/// `handle` is a live NDArray handle; `out_tindex` is writable.
#[no_mangle]
pub unsafe extern "C" fn TVMArrayGetTypeIndex(handle: TVMArrayHandle, out_tindex: *mut c_uint) -> c_int {
    guard(|| {
        // SAFETY: per contract.
        let slot = unsafe { out(out_tindex, "out_tindex")? };
        if handle.is_null() {
            return Err(Error::value("array handle is NULL"));
        }
        // SAFETY: a live NDArray handle is 16 bytes past its container's header.
        let tindex = unsafe { (*NDArray::header_of_handle(handle)).type_index };
        slot.write(tindex);
        Ok(())
    })
}
