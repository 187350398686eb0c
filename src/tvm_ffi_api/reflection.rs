//! The type table and reflection registration of `c_api.h`, and data type strings.

use super::arg_str;
use crate::abi::DLDataType;
use crate::tvm_ffi::any::TVMFFIAny;
use crate::tvm_ffi::error::safe_call;
use crate::tvm_ffi::types::{
    self, TVMFFIFieldInfo, TVMFFIMethodInfo, TVMFFITypeAttrColumn, TVMFFITypeInfo, TVMFFITypeMetadata,
};
use crate::tvm_ffi::{FfiError, TVMFFIByteArray};
use std::ffi::c_int;

/// `TVMFFITypeGetOrAllocIndex`: the index of `type_key`, allocating one (in the parent's
/// reserved child slots when it has room) for a new key. -1 with a raised error on failure.
///
/// # Safety
/// `type_key` is a valid byte array.
#[no_mangle]
pub unsafe extern "C" fn TVMFFITypeGetOrAllocIndex(
    type_key: *const TVMFFIByteArray,
    static_type_index: i32,
    type_depth: i32,
    num_child_slots: i32,
    child_slots_can_overflow: i32,
    parent_type_index: i32,
) -> i32 {
    let mut out = -1;
    let rc = safe_call(|| {
        // SAFETY: by contract.
        let k = unsafe { arg_str(type_key, "type key") }?;
        out = types::get_or_alloc_index(
            k,
            static_type_index,
            type_depth,
            num_child_slots,
            child_slots_can_overflow != 0,
            parent_type_index,
        )?;
        Ok(())
    });
    if rc != 0 {
        -1
    } else {
        out
    }
}

/// `TVMFFIGetTypeInfo`: NULL for an unknown index.
#[no_mangle]
pub extern "C" fn TVMFFIGetTypeInfo(type_index: i32) -> *const TVMFFITypeInfo {
    std::panic::catch_unwind(|| types::type_info(type_index)).ok().flatten().unwrap_or(std::ptr::null())
}

/// `TVMFFITypeRegisterField`.
///
/// # Safety
/// `info` is a valid field info.
#[no_mangle]
pub unsafe extern "C" fn TVMFFITypeRegisterField(type_index: i32, info: *const TVMFFIFieldInfo) -> c_int {
    safe_call(|| {
        // SAFETY: by contract.
        let info = unsafe { info.as_ref() }.ok_or_else(|| FfiError::value("field info is NULL"))?;
        types::register_field(type_index, info)
    })
}

/// `TVMFFITypeRegisterMethod`.
///
/// # Safety
/// `info` is a valid method info.
#[no_mangle]
pub unsafe extern "C" fn TVMFFITypeRegisterMethod(type_index: i32, info: *const TVMFFIMethodInfo) -> c_int {
    safe_call(|| {
        // SAFETY: by contract.
        let info = unsafe { info.as_ref() }.ok_or_else(|| FfiError::value("method info is NULL"))?;
        types::register_method(type_index, info)
    })
}

/// `TVMFFITypeRegisterMetadata`.
///
/// # Safety
/// `metadata` is valid.
#[no_mangle]
pub unsafe extern "C" fn TVMFFITypeRegisterMetadata(type_index: i32, metadata: *const TVMFFITypeMetadata) -> c_int {
    safe_call(|| {
        // SAFETY: by contract.
        let m = unsafe { metadata.as_ref() }.ok_or_else(|| FfiError::value("metadata is NULL"))?;
        types::register_metadata(type_index, m)
    })
}

/// `TVMFFITypeRegisterAttr`.
///
/// # Safety
/// `name` and `value` are valid.
#[no_mangle]
pub unsafe extern "C" fn TVMFFITypeRegisterAttr(
    type_index: i32,
    name: *const TVMFFIByteArray,
    value: *const TVMFFIAny,
) -> c_int {
    safe_call(|| {
        // SAFETY: by contract.
        let n = unsafe { arg_str(name, "attribute name") }?;
        // SAFETY: by contract.
        let v = unsafe { value.as_ref() }.ok_or_else(|| FfiError::value("value is NULL"))?;
        types::register_attr(type_index, n, v)
    })
}

/// `TVMFFIGetTypeAttrColumn`: NULL when no type has the attribute.
///
/// # Safety
/// `name` is a valid byte array.
#[no_mangle]
pub unsafe extern "C" fn TVMFFIGetTypeAttrColumn(name: *const TVMFFIByteArray) -> *const TVMFFITypeAttrColumn {
    std::panic::catch_unwind(|| {
        // SAFETY: by contract.
        match unsafe { arg_str(name, "attribute name") } {
            Ok(n) => types::attr_column(n),
            Err(_) => std::ptr::null(),
        }
    })
    .unwrap_or(std::ptr::null())
}

/// `TVMFFIDataTypeFromString`.
///
/// # Safety
/// `s` valid; `out` writable.
#[no_mangle]
pub unsafe extern "C" fn TVMFFIDataTypeFromString(s: *const TVMFFIByteArray, out: *mut DLDataType) -> c_int {
    safe_call(|| {
        // SAFETY: by contract.
        let text = unsafe { arg_str(s, "data type") }?;
        let t = crate::tvm_ffi::dtype::parse(text)?;
        // SAFETY: by contract.
        unsafe { *out.as_mut().ok_or_else(|| FfiError::value("out is NULL"))? = t };
        Ok(())
    })
}

/// `TVMFFIDataTypeToString`: the text as a string value.
///
/// # Safety
/// `dtype` valid; `out` writable.
#[no_mangle]
pub unsafe extern "C" fn TVMFFIDataTypeToString(dtype: *const DLDataType, out: *mut TVMFFIAny) -> c_int {
    safe_call(|| {
        // SAFETY: by contract.
        let t = unsafe { dtype.as_ref() }.ok_or_else(|| FfiError::value("dtype is NULL"))?;
        let s = crate::tvm_ffi::dtype::format(*t)?;
        let a = crate::tvm_ffi::Any::string(&s);
        // SAFETY: by contract.
        unsafe { *out.as_mut().ok_or_else(|| FfiError::value("out is NULL"))? = a.into_raw() };
        Ok(())
    })
}
