//! Reading and writing objects through their reflection (the type table's field infos), and
//! registering the fields and methods of the types this subsystem defines in Rust.

use crate::any::{Any, TVMFFIAny};
use crate::object::ObjectRef;
use crate::types::{self, TVMFFIFieldInfo, TVMFFIMethodInfo, TVMFFITypeMetadata};
use crate::{ti, FfiError, FfiResult, TVMFFIByteArray, FIELD_SETTER_IS_FUNCTION_OBJ};
use std::ffi::c_void;

/// `kTVMFFIFieldFlagBitMaskIsStaticMethod`.
pub(crate) const METHOD_STATIC: i64 = 1 << 2;
/// `kTVMFFIFieldFlagBitMaskSEqHashIgnore`.
pub(crate) const FIELD_SEQ_HASH_IGNORE: i64 = 1 << 3;
/// `kTVMFFIFieldFlagBitMaskSEqHashDefPattern`.
pub(crate) const FIELD_SEQ_HASH_DEF_PATTERN: i64 = 1 << 4;
/// `kTVMFFIFieldFlagBitMaskDefaultFromFactory`.
pub(crate) const FIELD_DEFAULT_FROM_FACTORY: i64 = 1 << 5;
/// `kTVMFFIFieldFlagBitMaskSEqHashDefSimple`.
pub(crate) const FIELD_SEQ_HASH_DEF_SIMPLE: i64 = 1 << 12;

/// `TVMFFISEqHashKind` values.
pub(crate) mod kind {
    /// Unsupported.
    pub(crate) const UNSUPPORTED: i32 = 0;
    /// Tree node.
    pub(crate) const TREE_NODE: i32 = 1;
    /// Free variable.
    pub(crate) const FREE_VAR: i32 = 2;
    /// DAG node.
    pub(crate) const DAG_NODE: i32 = 3;
    /// Constant tree node.
    pub(crate) const CONST_TREE_NODE: i32 = 4;
    /// Unique instance.
    pub(crate) const UNIQUE_INSTANCE: i32 = 5;
}

/// The metadata of a type, if registered.
pub(crate) fn metadata(type_index: i32) -> Option<TVMFFITypeMetadata> {
    let info = types::type_info(type_index)?;
    // SAFETY: type infos and their metadata live for the process.
    unsafe { (*info).metadata.as_ref().copied() }
}

/// The type key hash of a type (0 when unknown).
pub(crate) fn type_key_hash(type_index: i32) -> u64 {
    // SAFETY: type infos live for the process.
    types::type_info(type_index).map_or(0, |i| unsafe { (*i).type_key_hash })
}

/// Every field of a type, ancestors' first (skipping `ffi.Object`), as tvm-ffi's
/// `ForEachFieldInfo` walks them.
pub(crate) fn all_fields(type_index: i32) -> Vec<TVMFFIFieldInfo> {
    let Some(info) = types::type_info(type_index) else { return Vec::new() };
    let mut out = Vec::new();
    // SAFETY: infos, their ancestors and field arrays live for the process.
    unsafe {
        let info = &*info;
        let push = |out: &mut Vec<TVMFFIFieldInfo>, ti: &crate::types::TVMFFITypeInfo| {
            if ti.num_fields > 0 && !ti.fields.is_null() {
                out.extend_from_slice(std::slice::from_raw_parts(ti.fields, ti.num_fields as usize));
            }
        };
        for i in 1..info.type_depth.max(0) as usize {
            let anc = *info.type_ancestors.add(i);
            if let Some(a) = anc.as_ref() {
                push(&mut out, a);
            }
        }
        push(&mut out, info);
    }
    out
}

/// A field's name.
pub(crate) fn field_name(f: &TVMFFIFieldInfo) -> String {
    // SAFETY: registered names live for the process.
    String::from_utf8_lossy(unsafe { f.name.as_slice() }).into_owned()
}

/// Reads a field of an object.
pub(crate) fn get_field(obj: &ObjectRef, f: &TVMFFIFieldInfo) -> FfiResult<Any> {
    let getter = f.getter.ok_or_else(|| FfiError::type_error(format!("field `{}` has no getter", field_name(f))))?;
    let mut out = TVMFFIAny::NONE;
    // SAFETY: the field info belongs to the object's type (or an ancestor): the offset is inside it.
    let rc = unsafe { getter((obj.as_ptr() as *mut u8).add(f.offset as usize).cast(), &mut out) };
    if rc != 0 {
        return Err(FfiError::take_raised(rc));
    }
    // SAFETY: on success the getter wrote an owned value.
    Ok(unsafe { Any::from_raw(out) })
}

/// `TVMFFIFieldSetter`.
type FieldSetter = unsafe extern "C" fn(field: *mut c_void, value: *const TVMFFIAny) -> i32;

/// Writes a field of an object (tvm-ffi's `CallFieldSetter`).
pub(crate) fn set_field(obj: &ObjectRef, f: &TVMFFIFieldInfo, value: &Any) -> FfiResult<()> {
    if f.setter.is_null() {
        return Err(FfiError::type_error(format!("field `{}` is not writable", field_name(f))));
    }
    // SAFETY: the offset lies inside the object (its type's field).
    let addr = unsafe { (obj.as_ptr() as *mut u8).add(f.offset as usize) };
    if f.flags & FIELD_SETTER_IS_FUNCTION_OBJ != 0 {
        let args = [TVMFFIAny::with_bits(ti::OPAQUE_PTR, addr as u64), *value.raw()];
        // SAFETY: the setter is a live function object kept by the type table.
        unsafe { crate::function::call_raw(f.setter.cast(), &args) }?;
        return Ok(());
    }
    // SAFETY: a non-function setter is a C function of this signature.
    let setter: FieldSetter = unsafe { std::mem::transmute::<*mut c_void, FieldSetter>(f.setter) };
    // SAFETY: address and value are valid for the call.
    let rc = unsafe { setter(addr.cast(), value.raw()) };
    if rc != 0 {
        return Err(FfiError::take_raised(rc));
    }
    Ok(())
}

/// Sets a field to its default (value or factory's result).
pub(crate) fn set_field_default(obj: &ObjectRef, f: &TVMFFIFieldInfo) -> FfiResult<()> {
    // SAFETY: the registered default is a valid value kept by the type table.
    let d = unsafe { Any::from_view(&f.default_value_or_factory) }?;
    if f.flags & FIELD_DEFAULT_FROM_FACTORY != 0 {
        let func = d.as_object().ok_or_else(|| FfiError::type_error("default factory is not a function"))?;
        let v = crate::function::call(&func, &[])?;
        return set_field(obj, f, &v);
    }
    set_field(obj, f, &d)
}

/// Whether objects of a type can be made empty by reflection (tvm-ffi's `HasCreator`).
pub(crate) fn has_creator(type_index: i32) -> bool {
    metadata(type_index).is_some_and(|m| m.creator.is_some())
        || types::attr_value("__ffi_new__", type_index).is_some_and(|v| v.type_index() == ti::FUNCTION)
}

/// Makes an empty object of a type (tvm-ffi's `CreateEmptyObject`).
pub(crate) fn create_empty(type_index: i32) -> FfiResult<ObjectRef> {
    if let Some(c) = metadata(type_index).and_then(|m| m.creator) {
        let mut h: *mut c_void = std::ptr::null_mut();
        // SAFETY: the creator writes an owned object handle.
        let rc = unsafe { c(&mut h) };
        if rc != 0 {
            return Err(FfiError::take_raised(rc));
        }
        // SAFETY: the handle carries one strong reference for us.
        return unsafe { ObjectRef::from_raw(h.cast()) }.ok_or_else(|| FfiError::runtime("creator returned NULL"));
    }
    if let Some(f) = types::attr_value("__ffi_new__", type_index).and_then(|v| v.as_object()) {
        let v = crate::function::call(&f, &[])?;
        return v.into_object().map_err(|_| FfiError::type_error("__ffi_new__ did not return an object"));
    }
    Err(FfiError::runtime(format!(
        "Type `{}` does not support reflection creation (no native creator or __ffi_new__ type attr)",
        types::type_key(type_index)
    )))
}

/// Allocates (or finds) the index of one of this subsystem's types under `ffi.Object`.
pub(crate) fn type_index_of(key: &str) -> i32 {
    types::get_or_alloc_index(key, -1, 1, 0, true, ti::OBJECT).unwrap_or(-1)
}

/// Registers a type's metadata (`structural_eq_hash_kind` and size), ignoring a repeat.
pub(crate) fn def_metadata(type_index: i32, total_size: usize, seq_kind: i32) {
    let _ = types::register_metadata(
        type_index,
        &TVMFFITypeMetadata {
            doc: TVMFFIByteArray::EMPTY,
            creator: None,
            total_size: total_size as i32,
            structural_eq_hash_kind: seq_kind,
        },
    );
}

/// The metadata JSON of a field or method: `{"type_schema": "<schema JSON>"}`.
pub(crate) fn schema_metadata(schema: &str) -> String {
    let mut out = b"{\"type_schema\":".to_vec();
    crate::serialization::json::escape_string(schema.as_bytes(), &mut out);
    out.push(b'}');
    String::from_utf8(out).unwrap_or_default()
}

/// The schema of a function: `(params) -> ret`, each a schema JSON text.
pub(crate) fn fn_schema(ret: &str, params: &[&str]) -> String {
    format!(r#"{{"type":"ffi.Function","named_args":{{"return":[{ret}],"params":[{}]}}}}"#, params.join(","))
}

/// Registers a read-only field at `offset` (from the object's start) with `getter`; `schema`
/// is its type schema JSON (`{"type":"int"}`).
pub(crate) fn def_field(
    type_index: i32,
    name: &str,
    offset: usize,
    size: usize,
    getter: crate::types::FieldGetter,
    static_type_index: i32,
    schema: &str,
) {
    def_field_flags(type_index, name, (offset, size), getter, static_type_index, schema, 0);
}

/// [`def_field`] with field flags (`FIELD_HAS_DEFAULT` gives it a default of None).
pub(crate) fn def_field_flags(
    type_index: i32,
    name: &str,
    (offset, size): (usize, usize),
    getter: crate::types::FieldGetter,
    static_type_index: i32,
    schema: &str,
    flags: i64,
) {
    def_field_full(type_index, name, (offset, size), (getter, None), static_type_index, schema, flags);
}

/// A field of an object pointer (or null) with a setter, so that reflection can fill it in
/// (`ffi.MakeObjectFromPackedArgs`, `__ffi_init__`).
pub(crate) fn def_object_field(type_index: i32, name: &str, offset: usize, static_type_index: i32, schema: &str) {
    def_field_full(
        type_index,
        name,
        (offset, 8),
        (get_opt_object, Some(crate::dataclass::fields::set_objref)),
        static_type_index,
        schema,
        0,
    );
}

fn def_field_full(
    type_index: i32,
    name: &str,
    (offset, size): (usize, usize),
    (getter, setter): (crate::types::FieldGetter, Option<crate::dataclass::fields::FieldSetter>),
    static_type_index: i32,
    schema: &str,
    flags: i64,
) {
    let md = schema_metadata(schema);
    let info = TVMFFIFieldInfo {
        name: TVMFFIByteArray::of(name.as_bytes()),
        doc: TVMFFIByteArray::EMPTY,
        metadata: TVMFFIByteArray::of(md.as_bytes()),
        flags,
        size: size as i64,
        alignment: size.min(8) as i64,
        offset: offset as i64,
        getter: Some(getter),
        setter: setter.map_or(std::ptr::null_mut(), |f| f as *mut c_void),
        default_value_or_factory: TVMFFIAny::NONE,
        field_static_type_index: static_type_index,
    };
    let _ = types::register_field(type_index, &info);
}

/// Registers a method (a Rust closure; instance methods get `self` as argument 0); `schema`
/// is its function schema JSON (see [`fn_schema`]).
pub(crate) fn def_method(
    type_index: i32,
    name: &str,
    is_static: bool,
    schema: &str,
    f: impl Fn(&[TVMFFIAny]) -> FfiResult<Any> + Send + Sync + 'static,
) {
    let func = Any::object(crate::function::from_fn(f));
    let md = schema_metadata(schema);
    let info = TVMFFIMethodInfo {
        name: TVMFFIByteArray::of(name.as_bytes()),
        doc: TVMFFIByteArray::EMPTY,
        metadata: TVMFFIByteArray::of(md.as_bytes()),
        flags: if is_static { METHOD_STATIC } else { 0 },
        method: *func.raw(),
    };
    let _ = types::register_method(type_index, &info);
}

/// Field getter: an `Any` stored in place.
///
/// # Safety
/// `field` points to a live `Any`; `result` to a writable cell.
pub(crate) unsafe extern "C" fn get_any(field: *mut c_void, result: *mut TVMFFIAny) -> i32 {
    // SAFETY: by contract.
    unsafe { *result = (*field.cast::<Any>()).clone().into_raw() };
    0
}

/// Field getter: an optional object pointer stored in place (None when null).
///
/// # Safety
/// `field` points to a live `Option<ObjectRef>`; `result` to a writable cell.
pub(crate) unsafe extern "C" fn get_opt_object(field: *mut c_void, result: *mut TVMFFIAny) -> i32 {
    // SAFETY: by contract.
    unsafe { *result = Any::opt_object((*field.cast::<Option<ObjectRef>>()).clone()).into_raw() };
    0
}

/// Field getter: an `i32`.
///
/// # Safety
/// `field` points to an `i32`; `result` to a writable cell.
pub(crate) unsafe extern "C" fn get_i32(field: *mut c_void, result: *mut TVMFFIAny) -> i32 {
    // SAFETY: by contract.
    unsafe { *result = Any::int(*field.cast::<i32>() as i64).into_raw() };
    0
}

/// Field getter: an `i64`.
///
/// # Safety
/// `field` points to an `i64`; `result` to a writable cell.
pub(crate) unsafe extern "C" fn get_i64(field: *mut c_void, result: *mut TVMFFIAny) -> i32 {
    // SAFETY: by contract.
    unsafe { *result = Any::int(*field.cast::<i64>()).into_raw() };
    0
}

/// The object of argument `i` when it is an instance of `type_index`.
pub(crate) fn arg_obj(name: &str, args: &[TVMFFIAny], i: usize, type_index: i32) -> FfiResult<ObjectRef> {
    let a = crate::globals::arg_any(name, args, i)?;
    match a.as_object() {
        Some(o) if o.is_instance(type_index) => Ok(o),
        _ => Err(FfiError::type_error(format!(
            "Mismatched type on argument #{i} when calling: `{name}`. Expected `{}` but got `{}`",
            types::type_key(type_index),
            types::type_key(a.type_index())
        ))),
    }
}
