//! Object exports.

use super::guard::guard;
use super::handle::{self, cstr, out};
use super::ret;
use super::runtime_api::TVMObjectHandle;
use crate::abi::TVMByteArray;
use crate::error::{Error, Result};
use crate::object;
use std::ffi::{c_char, c_int, c_uint};

/// The type index of an object.
/// # Safety
/// `obj` is a live object handle (not a `DLTensor*`); `out_tindex` is writable.
#[no_mangle]
pub unsafe extern "C" fn TVMObjectGetTypeIndex(obj: TVMObjectHandle, out_tindex: *mut c_uint) -> c_int {
    guard(|| {
        // SAFETY: per contract.
        let slot = unsafe { out(out_tindex, "out_tindex")? };
        let p = handle::object_ptr(obj);
        if p.is_null() {
            return Err(Error::value("Object handle is NULL"));
        }
        // SAFETY: a live object header.
        slot.write(unsafe { (*p).type_index });
        Ok(())
    })
}

/// The type index registered under a key (`runtime.Object` itself is not resolvable).
/// # Safety
/// `type_key` is NUL-terminated; `out_tindex` is writable.
#[no_mangle]
pub unsafe extern "C" fn TVMObjectTypeKey2Index(type_key: *const c_char, out_tindex: *mut c_uint) -> c_int {
    guard(|| {
        // SAFETY: per contract.
        let key = unsafe { cstr(type_key, "type_key")? };
        // SAFETY: per contract.
        let slot = unsafe { out(out_tindex, "out_tindex")? };
        slot.write(object::type_key2index(key)?);
        Ok(())
    })
}

/// The key of a type index.
/// # Ownership
/// `*out_type_key`: a `malloc`ed string owned by caller (release with C `free()`).
/// # Safety
/// `out_type_key` is writable.
#[no_mangle]
pub unsafe extern "C" fn TVMObjectTypeIndex2Key(tindex: c_uint, out_type_key: *mut *mut c_char) -> c_int {
    guard(|| {
        // SAFETY: per contract.
        let slot = unsafe { out(out_type_key, "out_type_key")? };
        let key = object::type_index2key(tindex)?;
        slot.write(malloc_cstr(key.as_bytes())?);
        Ok(())
    })
}

fn malloc_cstr(b: &[u8]) -> Result<*mut c_char> {
    // SAFETY: plain allocation of len + 1 bytes.
    let p = unsafe { libc::malloc(b.len() + 1) }.cast::<u8>();
    if p.is_null() {
        return Err(Error::tvm("out of memory"));
    }
    // SAFETY: `p` holds len + 1 bytes; the source does not overlap a fresh allocation.
    unsafe {
        std::ptr::copy_nonoverlapping(b.as_ptr(), p, b.len());
        p.add(b.len()).write(0);
    }
    Ok(p.cast())
}

/// Adds a reference (NULL accepted).
/// # Safety
/// `obj` is NULL or a live object handle.
#[no_mangle]
pub unsafe extern "C" fn TVMObjectRetain(obj: TVMObjectHandle) -> c_int {
    // SAFETY: per contract.
    guard(|| unsafe {
        object::retain_raw(handle::object_ptr(obj));
        Ok(())
    })
}

/// Drops a reference (NULL accepted); the object is deleted at zero.
/// # Safety
/// `obj` is NULL or an owned object handle (never a `DLTensor*`), not used afterwards.
#[no_mangle]
pub unsafe extern "C" fn TVMObjectFree(obj: TVMObjectHandle) -> c_int {
    // SAFETY: per contract.
    guard(|| unsafe {
        object::release_raw(handle::object_ptr(obj));
        Ok(())
    })
}

/// Whether `child_type_index` is `parent_type_index` or derives from it.
/// # Safety
/// `is_derived` is writable.
#[no_mangle]
pub unsafe extern "C" fn TVMObjectDerivedFrom(
    child_type_index: u32,
    parent_type_index: u32,
    is_derived: *mut c_int,
) -> c_int {
    guard(|| {
        // SAFETY: per contract.
        let slot = unsafe { out(is_derived, "is_derived")? };
        let d = object::derived_from(child_type_index, parent_type_index)?;
        slot.write(c_int::from(d));
        Ok(())
    })
}

/// Frees a byte array returned by the runtime: the thread-local return slot, so a no-op. The
/// runtime never returns heap byte arrays; passing any other pointer does nothing.
/// # Safety
/// None beyond passing a pointer value.
#[no_mangle]
pub unsafe extern "C" fn TVMByteArrayFree(arr: *mut TVMByteArray) -> c_int {
    guard(|| {
        let _ = ret::is_slot_bytes(arr);
        Ok(())
    })
}
