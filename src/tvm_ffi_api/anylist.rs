//! The AnyList functions of TVM v0.20+'s runtime (`c_backend_api.h` of v0.27, `builtin.cc`):
//! compiled VM-TIR functions (`exec_mode="compiled"`) keep their registers, constants and
//! function pool in arrays of `TVMFFIAny` owned by the Relax VM, and move values between those
//! arrays and the argument/result cells of the calls they make.

use crate::tvm_ffi::any::{Any, TVMFFIAny};
use crate::tvm_ffi::error::safe_call;
use crate::tvm_ffi::FfiError;
use std::ffi::{c_int, c_void};

fn index(i: c_int) -> Result<usize, FfiError> {
    usize::try_from(i).map_err(|_| FfiError::index(format!("AnyList index {i} is negative")))
}

/// `args[arg_offset] = list[index]`, a view (no reference taken).
///
/// # Safety
/// `anylist` is an array of owned values with more than `index` entries; `args` has more than
/// `arg_offset` cells.
#[no_mangle]
pub unsafe extern "C" fn TVMBackendAnyListSetPackedArg(
    anylist: *mut c_void,
    index: c_int,
    args: *mut TVMFFIAny,
    arg_offset: c_int,
) -> c_int {
    safe_call(|| {
        if anylist.is_null() || args.is_null() {
            return Err(FfiError::value("TVMBackendAnyListSetPackedArg: NULL list or arguments"));
        }
        let (i, k) = (self::index(index)?, self::index(arg_offset)?);
        // SAFETY: by contract.
        unsafe { *args.add(k) = *anylist.cast::<TVMFFIAny>().add(i) };
        Ok(())
    })
}

/// `list[index] = None` (the value it held is released).
///
/// # Safety
/// `anylist` is an array of owned values with more than `index` entries.
#[no_mangle]
pub unsafe extern "C" fn TVMBackendAnyListResetItem(anylist: *mut c_void, index: c_int) -> c_int {
    safe_call(|| {
        if anylist.is_null() {
            return Err(FfiError::value("TVMBackendAnyListResetItem: NULL list"));
        }
        let i = self::index(index)?;
        // SAFETY: by contract: the slot holds an owned value.
        drop(unsafe { std::mem::replace(&mut *anylist.cast::<Any>().add(i), Any::none()) });
        Ok(())
    })
}

/// `list[index] = move(args[ret_offset])`: the list takes the result cell's value (the cell is
/// left None) and releases what the slot held.
///
/// # Safety
/// `anylist` is an array of owned values with more than `index` entries; `args[ret_offset]`
/// holds an owned value (a call's result).
#[no_mangle]
pub unsafe extern "C" fn TVMBackendAnyListMoveFromPackedReturn(
    anylist: *mut c_void,
    index: c_int,
    args: *mut TVMFFIAny,
    ret_offset: c_int,
) -> c_int {
    safe_call(|| {
        if anylist.is_null() || args.is_null() {
            return Err(FfiError::value("TVMBackendAnyListMoveFromPackedReturn: NULL list or arguments"));
        }
        let (i, k) = (self::index(index)?, self::index(ret_offset)?);
        // SAFETY: by contract: the cell's value moves into the slot, whose old value is released.
        unsafe {
            let cell = args.add(k);
            let v = Any::from_raw(std::mem::replace(&mut *cell, TVMFFIAny::NONE));
            drop(std::mem::replace(&mut *anylist.cast::<Any>().add(i), v));
        }
        Ok(())
    })
}
