//! Every cast between a C handle and a core type: one place to audit.
//!
//! | handle | points to |
//! |---|---|
//! | object / module | the object's header |
//! | NDArray | the `DLTensor` 16 bytes past its container's header |
//! | function | a `Box<PackedFunc>` (one per handle) |
//! | return slot of a callback | a core `Value` |

use crate::abi::DLTensor;
use crate::error::{Error, Result};
use crate::function::PackedFunc;
use crate::module::Module;
use crate::ndarray::NDArray;
use crate::object::{ObjectHeader, ObjectRef};
use crate::value::Value;
use std::ffi::{c_char, c_void, CStr};

/// A borrowed NUL-terminated string argument.
///
/// # Safety
/// `p` is NULL or a NUL-terminated string valid for `'a`.
pub unsafe fn cstr<'a>(p: *const c_char, what: &str) -> Result<&'a str> {
    if p.is_null() {
        return Err(Error::value(format!("{what} must not be NULL")));
    }
    // SAFETY: per contract.
    unsafe { CStr::from_ptr(p) }.to_str().map_err(|_| Error::value(format!("{what} is not valid UTF-8")))
}

/// An out-parameter, checked for NULL.
///
/// # Safety
/// `p` is NULL or writable for a `T`.
pub unsafe fn out<'a, T>(p: *mut T, what: &str) -> Result<&'a mut std::mem::MaybeUninit<T>> {
    // SAFETY: per contract, non-NULL means writable; MaybeUninit tolerates garbage.
    unsafe { p.cast::<std::mem::MaybeUninit<T>>().as_mut() }
        .ok_or_else(|| Error::value(format!("{what} must not be NULL")))
}

/// The function behind a handle, borrowed.
///
/// # Safety
/// `h` is NULL or a live function handle.
pub unsafe fn func<'a>(h: *mut c_void) -> Result<&'a PackedFunc> {
    // SAFETY: per contract.
    unsafe { h.cast::<PackedFunc>().as_ref() }.ok_or_else(|| Error::value("function handle is NULL"))
}

/// A new module reference from a borrowed module handle.
///
/// # Safety
/// `h` is NULL or a live module handle.
pub unsafe fn module(h: *mut c_void) -> Result<Module> {
    // SAFETY: per contract.
    let obj = unsafe { ObjectRef::from_borrowed(h.cast()) }.ok_or_else(|| Error::value("module handle is NULL"))?;
    Module::from_object(obj).ok_or_else(|| Error::type_error("handle is not a module"))
}

/// A new array reference from a borrowed NDArray handle.
///
/// # Safety
/// `h` is NULL or a live NDArray handle made by this runtime.
pub unsafe fn ndarray(h: *mut DLTensor) -> Result<NDArray> {
    // SAFETY: per contract.
    unsafe { NDArray::from_handle_borrowed(h) }.ok_or_else(|| Error::value("array handle is NULL"))
}

/// A borrowed tensor (an NDArray handle or a caller's own `DLTensor`).
///
/// # Safety
/// `h` is NULL or a live `DLTensor` valid for `'a`.
pub unsafe fn tensor<'a>(h: *const DLTensor, what: &str) -> Result<&'a DLTensor> {
    // SAFETY: per contract.
    unsafe { h.as_ref() }.ok_or_else(|| Error::value(format!("{what} must not be NULL")))
}

/// The object header behind an object handle.
pub fn object_ptr(h: *mut c_void) -> *mut ObjectHeader {
    h.cast()
}

/// The return slot behind a callback's `TVMRetValueHandle`.
///
/// # Safety
/// `h` is NULL or the handle a callback received (a live `Value`, exclusively ours for the call).
pub unsafe fn ret_slot<'a>(h: *mut c_void) -> Result<&'a mut Value> {
    // SAFETY: per contract.
    unsafe { h.cast::<Value>().as_mut() }.ok_or_else(|| Error::value("return value handle is NULL"))
}
