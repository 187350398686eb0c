//! Reflected field access (tvm-ffi's `reflection/accessor.h`): reading a field through its
//! getter, writing through its setter (a C function or a function object), defaults and
//! factories, and the getters this library hands out for fields stored in place (POD values,
//! `TVMFFIAny` cells, object pointers).

use crate::any::{Any, TVMFFIAny};
use crate::error::safe_call;
use crate::object::{dec_ref, inc_ref, ObjectRef, TVMFFIObject};
use crate::types::{self, FieldGetter, TVMFFIFieldInfo};
use crate::{function, ti, FfiError, FfiResult};
use std::ffi::c_void;
use tvm_runtime_classic::abi::{DLDataType, DLDevice};

/// `kTVMFFIFieldFlagBitMaskWritable`.
pub const WRITABLE: i64 = 1;
/// `kTVMFFIFieldFlagBitMaskHasDefault`.
pub(crate) const HAS_DEFAULT: i64 = 1 << 1;
/// `kTVMFFIFieldFlagBitMaskSEqHashIgnore`.
pub(crate) const SEQ_HASH_IGNORE: i64 = 1 << 3;
/// `kTVMFFIFieldFlagBitMaskDefaultFromFactory`.
pub(crate) const DEFAULT_FROM_FACTORY: i64 = 1 << 5;
/// `kTVMFFIFieldFlagBitMaskReprOff`.
pub(crate) const REPR_OFF: i64 = 1 << 6;
/// `kTVMFFIFieldFlagBitMaskCompareOff`.
pub(crate) const COMPARE_OFF: i64 = 1 << 7;
/// `kTVMFFIFieldFlagBitMaskHashOff`.
pub(crate) const HASH_OFF: i64 = 1 << 8;
/// `kTVMFFIFieldFlagBitMaskInitOff`.
pub(crate) const INIT_OFF: i64 = 1 << 9;
/// `kTVMFFIFieldFlagBitMaskKwOnly`.
pub(crate) const KW_ONLY: i64 = 1 << 10;
/// `kTVMFFIFieldFlagBitSetterIsFunctionObj`.
pub(crate) const SETTER_IS_FUNCTION_OBJ: i64 = 1 << 11;

/// `TVMFFIFieldSetter`.
pub(crate) type FieldSetter = unsafe extern "C" fn(field: *mut c_void, value: *const TVMFFIAny) -> i32;

/// The name of a field.
pub(crate) fn field_name(f: &TVMFFIFieldInfo) -> &'static str {
    // SAFETY: registered names are kept for the process's life.
    std::str::from_utf8(unsafe { f.name.as_slice() }).unwrap_or("<non-utf8>")
}

/// The fields of a type with its ancestors' first, as `ForEachFieldInfo` lists them (copies:
/// the table's field vectors may grow while we use them).
pub(crate) fn all_fields(type_index: i32) -> Vec<TVMFFIFieldInfo> {
    let Some(info) = types::type_info(type_index) else { return Vec::new() };
    let mut out = Vec::new();
    // SAFETY: type infos and the ancestors they point to live for the process; `fields` holds
    // `num_fields` entries.
    unsafe {
        let info = &*info;
        let push = |out: &mut Vec<TVMFFIFieldInfo>, t: &types::TVMFFITypeInfo| {
            if t.num_fields > 0 && !t.fields.is_null() {
                out.extend_from_slice(std::slice::from_raw_parts(t.fields, t.num_fields as usize));
            }
        };
        for i in 1..info.type_depth.max(0) as usize {
            let a = *info.type_ancestors.add(i);
            if !a.is_null() {
                push(&mut out, &*a);
            }
        }
        push(&mut out, info);
    }
    out
}

/// Reads a field of an object through its getter.
///
/// # Safety
/// `obj` is a live object of a type that has the field.
pub unsafe fn get_field(obj: *mut TVMFFIObject, f: &TVMFFIFieldInfo) -> FfiResult<Any> {
    let getter = f.getter.ok_or_else(|| FfiError::runtime(format!("field `{}` has no getter", field_name(f))))?;
    let mut out = TVMFFIAny::NONE;
    // SAFETY: by contract the field lives at `offset` in the object.
    let rc = unsafe { getter((obj as *mut u8).add(f.offset as usize).cast(), &mut out) };
    if rc != 0 {
        return Err(FfiError::take_raised(rc));
    }
    // SAFETY: a getter writes an owned value.
    Ok(unsafe { Any::from_raw(out) })
}

/// Writes a field through its setter (`CallFieldSetter`).
///
/// # Safety
/// `obj` is a live object of a type that has the field; `value` is a valid view.
pub(crate) unsafe fn set_field(obj: *mut TVMFFIObject, f: &TVMFFIFieldInfo, value: &TVMFFIAny) -> FfiResult<()> {
    if f.setter.is_null() {
        return Err(FfiError::attribute(format!("field `{}` is read-only", field_name(f))));
    }
    // SAFETY: by contract.
    let addr = unsafe { (obj as *mut u8).add(f.offset as usize) };
    if f.flags & SETTER_IS_FUNCTION_OBJ != 0 {
        let args = [TVMFFIAny::with_bits(ti::OPAQUE_PTR, addr as u64), *value];
        // SAFETY: the setter is a function object kept alive by the type table.
        unsafe { function::call_raw(f.setter.cast(), &args) }.map(drop)
    } else {
        // SAFETY: a setter without the flag is a C function of this signature.
        let setter: FieldSetter = unsafe { std::mem::transmute::<*mut c_void, FieldSetter>(f.setter) };
        // SAFETY: the field lives at `addr`.
        let rc = unsafe { setter(addr.cast(), value) };
        if rc != 0 {
            return Err(FfiError::take_raised(rc));
        }
        Ok(())
    }
}

/// Writes a field's default (its value, or what its factory makes) through its setter.
///
/// # Safety
/// As [`set_field`].
pub(crate) unsafe fn set_field_default(obj: *mut TVMFFIObject, f: &TVMFFIFieldInfo) -> FfiResult<()> {
    if f.flags & DEFAULT_FROM_FACTORY != 0 {
        // SAFETY: registered defaults are kept alive by the table.
        let factory = unsafe { Any::from_view(&f.default_value_or_factory) }?;
        let factory = factory
            .as_object()
            .filter(|o| o.type_index() == ti::FUNCTION)
            .ok_or_else(|| FfiError::type_error(format!("default factory of `{}` is not a function", field_name(f))))?;
        let v = function::call(&factory, &[])?;
        // SAFETY: by contract.
        unsafe { set_field(obj, f, v.raw()) }
    } else {
        // SAFETY: by contract.
        unsafe { set_field(obj, f, &f.default_value_or_factory) }
    }
}

fn getter_result(result: *mut TVMFFIAny, v: Any) -> i32 {
    if result.is_null() {
        return FfiError::value("getter result is NULL").raise();
    }
    // SAFETY: the caller passes a writable cell.
    unsafe { *result = v.into_raw() };
    0
}

unsafe extern "C" fn get_i64(field: *mut c_void, result: *mut TVMFFIAny) -> i32 {
    // SAFETY: the field holds an i64.
    getter_result(result, Any::int(unsafe { *field.cast::<i64>() }))
}
unsafe extern "C" fn get_f64(field: *mut c_void, result: *mut TVMFFIAny) -> i32 {
    // SAFETY: the field holds an f64.
    getter_result(result, Any::float(unsafe { *field.cast::<f64>() }))
}
unsafe extern "C" fn get_bool(field: *mut c_void, result: *mut TVMFFIAny) -> i32 {
    // SAFETY: the field holds a C++ bool (one byte).
    getter_result(result, Any::bool(unsafe { *field.cast::<u8>() } != 0))
}
unsafe extern "C" fn get_ptr(field: *mut c_void, result: *mut TVMFFIAny) -> i32 {
    // SAFETY: the field holds a pointer.
    getter_result(result, Any::opaque_ptr(unsafe { *field.cast::<*mut c_void>() }))
}
unsafe extern "C" fn get_dtype(field: *mut c_void, result: *mut TVMFFIAny) -> i32 {
    // SAFETY: the field holds a DLDataType.
    getter_result(result, Any::dtype(unsafe { *field.cast::<DLDataType>() }))
}
unsafe extern "C" fn get_device(field: *mut c_void, result: *mut TVMFFIAny) -> i32 {
    // SAFETY: the field holds a DLDevice.
    getter_result(result, Any::device(unsafe { *field.cast::<DLDevice>() }))
}
/// Reads a `TVMFFIAny` cell field (also C++ `String`/`Bytes`, which are one cell).
///
/// # Safety
/// `field` holds an owned cell; `result` is writable.
pub(crate) unsafe extern "C" fn get_any(field: *mut c_void, result: *mut TVMFFIAny) -> i32 {
    safe_call(|| {
        // SAFETY: the field holds an owned cell.
        let v = unsafe { Any::from_view(&*field.cast::<TVMFFIAny>()) }?;
        getter_result(result, v);
        Ok(())
    })
}
/// Reads an object-pointer field (null reads as None).
///
/// # Safety
/// `field` holds an object pointer or null; `result` is writable.
pub(crate) unsafe extern "C" fn get_objref(field: *mut c_void, result: *mut TVMFFIAny) -> i32 {
    // SAFETY: the field holds an object pointer or null.
    let p = unsafe { *field.cast::<*mut TVMFFIObject>() };
    // SAFETY: a non-null field pointer is a live object the field owns.
    getter_result(result, Any::opt_object(unsafe { ObjectRef::from_borrowed(p) }))
}

/// Writes a `TVMFFIAny` cell field from a value (the setter of `Any` fields).
///
/// # Safety
/// `field` holds an owned cell of a live object; `value` is a valid view.
pub(crate) unsafe extern "C" fn set_any(field: *mut c_void, value: *const TVMFFIAny) -> i32 {
    safe_call(|| {
        // SAFETY: by contract.
        unsafe { write_field_value(field.cast(), ti::ANY, Any::from_view(&*value)?) }
    })
}
/// Writes an object-pointer field from a value (None writes null).
///
/// # Safety
/// `field` holds an object pointer or null of a live object; `value` is a valid view.
pub(crate) unsafe extern "C" fn set_objref(field: *mut c_void, value: *const TVMFFIAny) -> i32 {
    safe_call(|| {
        // SAFETY: by contract.
        unsafe { write_field_value(field.cast(), ti::OBJECT, Any::from_view(&*value)?) }
    })
}

/// The getter for a field stored in place with this static type index (`ffi.MakeFieldGetter`).
pub(crate) fn getter_for(type_index: i32) -> FfiResult<FieldGetter> {
    Ok(match type_index {
        ti::INT => get_i64,
        ti::FLOAT => get_f64,
        ti::BOOL => get_bool,
        ti::OPAQUE_PTR => get_ptr,
        ti::DATA_TYPE => get_dtype,
        ti::DEVICE => get_device,
        ti::ANY | ti::NONE => get_any,
        t if t >= ti::STATIC_OBJECT_BEGIN => get_objref,
        t => return Err(FfiError::value(format!("Unsupported field type index for getter: {t}"))),
    })
}

/// How a field of a Python-defined class is stored.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Storage {
    /// Raw bytes.
    Pod,
    /// A `TVMFFIAny` cell.
    Any,
    /// An object pointer (null for None).
    ObjectRef,
}

/// The storage of a field (`GetPyClassFieldStorageKind`).
pub fn storage(f: &TVMFFIFieldInfo) -> Storage {
    match f.field_static_type_index {
        ti::ANY if f.size == 8 => Storage::ObjectRef,
        ti::ANY => Storage::Any,
        t if t >= ti::STATIC_OBJECT_BEGIN => Storage::ObjectRef,
        _ => Storage::Pod,
    }
}

/// Writes a converted value into a field stored in place (`WriteFieldValue`).
///
/// # Safety
/// `addr` is the field's storage for this static type index.
pub(crate) unsafe fn write_field_value(addr: *mut u8, type_index: i32, value: Any) -> FfiResult<()> {
    let bad = |what: &str, v: &Any| {
        FfiError::type_error(format!("Cannot convert from type `{}` to `{what}`", types::type_key(v.type_index())))
    };
    // SAFETY: by contract `addr` holds a value of the field's type (all writes below).
    unsafe {
        match type_index {
            ti::INT => *addr.cast::<i64>() = value.as_i64().ok_or_else(|| bad("int", &value))?,
            ti::FLOAT => *addr.cast::<f64>() = value.as_f64().ok_or_else(|| bad("float", &value))?,
            ti::BOOL => *addr = value.as_bool().ok_or_else(|| bad("bool", &value))? as u8,
            ti::OPAQUE_PTR => {
                *addr.cast::<*mut c_void>() = match value.type_index() {
                    ti::NONE => std::ptr::null_mut(),
                    ti::OPAQUE_PTR => value.raw().obj_ptr().cast(),
                    _ => return Err(bad("void*", &value)),
                }
            }
            ti::DATA_TYPE => *addr.cast::<DLDataType>() = value.as_dtype().ok_or_else(|| bad("DataType", &value))?,
            ti::DEVICE => *addr.cast::<DLDevice>() = value.as_device().ok_or_else(|| bad("Device", &value))?,
            ti::ANY | ti::NONE => {
                let slot = addr.cast::<TVMFFIAny>();
                let old = Any::from_raw(*slot);
                *slot = value.into_raw();
                drop(old);
            }
            t if t >= ti::STATIC_OBJECT_BEGIN => {
                let new = match value.into_object() {
                    Ok(o) => o.into_raw(),
                    Err(v) if v.is_none() => std::ptr::null_mut(),
                    Err(v) => return Err(bad("Object", &v)),
                };
                let slot = addr.cast::<*mut TVMFFIObject>();
                let old = *slot;
                *slot = new;
                if !old.is_null() {
                    dec_ref(old);
                }
            }
            t => return Err(FfiError::value(format!("Unsupported field type index for setter: {t}"))),
        }
    }
    Ok(())
}

/// Copies a field of a Python-defined class into fresh storage (shallow copy).
///
/// # Safety
/// `src` holds the field initialized; `dst` is zeroed storage of the field's size.
pub(crate) unsafe fn copy_field(dst: *mut u8, src: *const u8, f: &TVMFFIFieldInfo) {
    // SAFETY: by contract.
    unsafe {
        match f.field_static_type_index {
            ti::ANY if f.size != 8 => {
                let c = *src.cast::<TVMFFIAny>();
                if c.is_object() {
                    inc_ref(c.obj_ptr());
                }
                *dst.cast::<TVMFFIAny>() = c;
            }
            t if t >= ti::STATIC_OBJECT_BEGIN || t == ti::ANY => {
                let p = *src.cast::<*mut TVMFFIObject>();
                if !p.is_null() {
                    inc_ref(p);
                }
                *dst.cast::<*mut TVMFFIObject>() = p;
            }
            _ => std::ptr::copy_nonoverlapping(src, dst, f.size.max(0) as usize),
        }
    }
}

/// Releases a field of a Python-defined class.
///
/// # Safety
/// `addr` holds the field; it is not used afterwards.
pub(crate) unsafe fn drop_field(addr: *mut u8, f: &TVMFFIFieldInfo) {
    // SAFETY: by contract.
    unsafe {
        match storage(f) {
            Storage::Any => {
                let c = *addr.cast::<TVMFFIAny>();
                *addr.cast::<TVMFFIAny>() = TVMFFIAny::NONE;
                drop(Any::from_raw(c));
            }
            Storage::ObjectRef => {
                let p = std::mem::replace(&mut *addr.cast::<*mut TVMFFIObject>(), std::ptr::null_mut());
                if !p.is_null() {
                    dec_ref(p);
                }
            }
            Storage::Pod => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn getters_read_in_place_values() {
        let mut i: i64 = 42;
        let mut out = TVMFFIAny::NONE;
        // SAFETY: a valid i64 field and result cell.
        assert_eq!(unsafe { getter_for(ti::INT).unwrap()((&mut i as *mut i64).cast(), &mut out) }, 0);
        // SAFETY: the getter wrote an owned value.
        assert_eq!(unsafe { Any::from_raw(out) }.as_i64(), Some(42));
        let mut cell = Any::string("hello world").into_raw();
        // SAFETY: a valid Any field.
        assert_eq!(unsafe { get_any((&mut cell as *mut TVMFFIAny).cast(), &mut out) }, 0);
        // SAFETY: owned values.
        unsafe {
            assert_eq!(Any::from_raw(out).as_str(), Some("hello world"));
            drop(Any::from_raw(cell));
        }
        assert!(getter_for(ti::RAW_STR).is_err());
    }

    #[test]
    fn write_field_value_converts_and_releases() {
        let mut slot: *mut TVMFFIObject = std::ptr::null_mut();
        let s = crate::string::make_bytes_object(b"a long string here", false);
        let addr = (&mut slot as *mut *mut TVMFFIObject).cast::<u8>();
        // SAFETY: an object-pointer field.
        unsafe { write_field_value(addr, ti::STR, Any::object(s.clone())).unwrap() };
        assert_eq!(s.use_count(), 2);
        // SAFETY: as above.
        unsafe { write_field_value(addr, ti::STR, Any::none()).unwrap() };
        assert_eq!(s.use_count(), 1);
        let mut x: i64 = 0;
        // SAFETY: an int field.
        let e = unsafe { write_field_value((&mut x as *mut i64).cast(), ti::INT, Any::string("x")) };
        assert!(e.is_err());
    }
}
