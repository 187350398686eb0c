//! `ffi.reflection.AccessStep` and `ffi.reflection.AccessPath` (tvm-ffi's
//! `reflection/access_path.h`, registered by `reflection_extra.cc`): the layouts of the C++
//! classes (C++ code builds and walks them inline), their fields, methods and `__ffi_repr__`.

use super::fields::{self, get_any, get_objref};
use crate::tvmffi::any::{Any, TVMFFIAny};
use crate::tvmffi::error::safe_call;
use crate::tvmffi::globals::arg_any;
use crate::tvmffi::object::{make_object, ObjectRef};
use crate::tvmffi::types::{self, TVMFFIFieldInfo, TVMFFITypeMetadata};
use crate::tvmffi::{function, ti, FfiError, FfiResult, TVMFFIByteArray};
use std::ffi::c_void;

/// `AccessKind`.
pub mod kind {
    /// `.name`.
    pub const ATTR: i32 = 0;
    /// `[index]`.
    pub const ARRAY_ITEM: i32 = 1;
    /// `[key]`.
    pub const MAP_ITEM: i32 = 2;
    /// A missing attribute.
    pub const ATTR_MISSING: i32 = 3;
    /// A missing array item.
    pub const ARRAY_ITEM_MISSING: i32 = 4;
    /// A missing map item.
    pub const MAP_ITEM_MISSING: i32 = 5;
}

/// `AccessStepObj` after the header.
#[repr(C)]
struct StepPayload {
    kind: i32,
    _pad: u32,
    key: Any,
}

/// `AccessPathObj` after the header.
#[repr(C)]
struct PathPayload {
    parent: Option<ObjectRef>,
    step: Option<ObjectRef>,
    depth: i32,
    _pad: u32,
}

const _: () = assert!(std::mem::size_of::<StepPayload>() == 24);
const _: () = assert!(std::mem::size_of::<PathPayload>() == 24);

fn index(key: &str) -> FfiResult<i32> {
    types::key_to_index(key).ok_or_else(|| FfiError::runtime(format!("{key} is not registered")))
}

/// A new step.
pub fn make_step(kind: i32, key: Any) -> FfiResult<ObjectRef> {
    Ok(make_object(index("ffi.reflection.AccessStep")?, StepPayload { kind, _pad: 0, key }))
}

/// The root path.
pub fn root() -> FfiResult<ObjectRef> {
    Ok(make_object(index("ffi.reflection.AccessPath")?, PathPayload { parent: None, step: None, depth: 0, _pad: 0 }))
}

fn as_path(v: &Any) -> FfiResult<ObjectRef> {
    let t = index("ffi.reflection.AccessPath")?;
    v.as_object().filter(|o| o.type_index() == t).ok_or_else(|| {
        FfiError::type_error(format!("expected ffi.reflection.AccessPath, got `{}`", types::type_key(v.type_index())))
    })
}

fn as_step(v: &Any) -> FfiResult<ObjectRef> {
    let t = index("ffi.reflection.AccessStep")?;
    v.as_object().filter(|o| o.type_index() == t).ok_or_else(|| {
        FfiError::type_error(format!("expected ffi.reflection.AccessStep, got `{}`", types::type_key(v.type_index())))
    })
}

fn path(o: &ObjectRef) -> &PathPayload {
    // SAFETY: callers checked the type (as_path) or made the object; C++-made paths share it.
    unsafe { o.payload::<PathPayload>() }
}

fn step(o: &ObjectRef) -> &StepPayload {
    // SAFETY: as above, for steps.
    unsafe { o.payload::<StepPayload>() }
}

/// `AccessPathObj::Extend`.
pub fn extend(parent: &ObjectRef, s: ObjectRef) -> FfiResult<ObjectRef> {
    let depth = path(parent).depth + 1;
    Ok(make_object(
        index("ffi.reflection.AccessPath")?,
        PathPayload { parent: Some(parent.clone()), step: Some(s), depth, _pad: 0 },
    ))
}

fn to_steps(a: &ObjectRef) -> Vec<Any> {
    let mut out = Vec::new();
    let mut cur = a.clone();
    while let (Some(p), Some(s)) = (path(&cur).parent.clone(), path(&cur).step.clone()) {
        out.push(Any::object(s));
        cur = p;
    }
    out.reverse();
    out
}

fn step_repr(s: &ObjectRef, fn_repr: &ObjectRef) -> FfiResult<String> {
    let st = step(s);
    let key_repr = || -> FfiResult<String> {
        let r = function::call_any(fn_repr, std::slice::from_ref(&st.key))?;
        Ok(r.as_str().unwrap_or("").to_owned())
    };
    let int = || st.key.as_i64().unwrap_or(0);
    Ok(match st.kind {
        kind::ATTR => format!(".{}", st.key.as_str().unwrap_or("")),
        kind::ARRAY_ITEM => format!("[{}]", int()),
        kind::MAP_ITEM => format!("[{}]", key_repr()?),
        kind::ATTR_MISSING | kind::MAP_ITEM_MISSING => format!("[<missing:{}>]", key_repr()?),
        kind::ARRAY_ITEM_MISSING => format!("[<missing:{}>]", int()),
        k => return Err(FfiError::value(format!("unknown access kind {k}"))),
    })
}

unsafe extern "C" fn get_i32(field: *mut c_void, result: *mut TVMFFIAny) -> i32 {
    // SAFETY: the field holds an i32; the caller passes a writable cell.
    unsafe { *result = Any::int(*field.cast::<i32>() as i64).into_raw() };
    0
}

unsafe extern "C" fn set_i32(field: *mut c_void, value: *const TVMFFIAny) -> i32 {
    safe_call(|| {
        // SAFETY: the value is a valid view.
        let v = unsafe { crate::tvmffi::any::view_as_i64(&*value) }
            .ok_or_else(|| FfiError::type_error("expected an int"))?;
        let v = i32::try_from(v).map_err(|_| FfiError::value(format!("{v} is out of the int32 range")))?;
        // SAFETY: the field holds an i32.
        unsafe { *field.cast::<i32>() = v };
        Ok(())
    })
}

unsafe extern "C" fn set_any(field: *mut c_void, value: *const TVMFFIAny) -> i32 {
    safe_call(|| {
        // SAFETY: the field is a cell; the value a valid view.
        unsafe { fields::write_field_value(field.cast(), ti::ANY, Any::from_view(&*value)?) }
    })
}

unsafe extern "C" fn set_obj(field: *mut c_void, value: *const TVMFFIAny) -> i32 {
    safe_call(|| {
        // SAFETY: the field is an object pointer; the value a valid view.
        unsafe { fields::write_field_value(field.cast(), ti::OBJECT, Any::from_view(&*value)?) }
    })
}

unsafe extern "C" fn create_step(out: *mut *mut c_void) -> i32 {
    safe_call(|| {
        let o = make_step(0, Any::none())?;
        // SAFETY: the caller passes a writable slot.
        unsafe { *out = o.into_raw().cast() };
        Ok(())
    })
}

unsafe extern "C" fn create_path(out: *mut *mut c_void) -> i32 {
    safe_call(|| {
        let o = root()?;
        // SAFETY: the caller passes a writable slot.
        unsafe { *out = o.into_raw().cast() };
        Ok(())
    })
}

fn field(name: &'static str, schema: &'static str, size: i64, offset: i64, sti: i32) -> TVMFFIFieldInfo {
    let (getter, setter): (types::FieldGetter, fields::FieldSetter) = match (sti, size) {
        (ti::INT, _) => (get_i32, set_i32),
        (_, 16) => (get_any, set_any),
        _ => (get_objref, set_obj),
    };
    TVMFFIFieldInfo {
        name: TVMFFIByteArray::of(name.as_bytes()),
        doc: TVMFFIByteArray::EMPTY,
        metadata: TVMFFIByteArray::of(schema.as_bytes()),
        flags: 0,
        size,
        alignment: if size == 4 { 4 } else { 8 },
        offset,
        getter: Some(getter),
        setter: setter as *mut c_void,
        default_value_or_factory: TVMFFIAny::NONE,
        field_static_type_index: sti,
    }
}

/// Registers the two types' fields, methods, metadata and attributes (once, at start-up).
pub fn register_types() -> FfiResult<()> {
    let st = index("ffi.reflection.AccessStep")?;
    let pt = index("ffi.reflection.AccessPath")?;
    // SAFETY: type infos live for the process.
    if types::type_info(st).is_some_and(|i| unsafe { (*i).num_fields > 0 }) {
        return Ok(());
    }
    let int = r#"{"type_schema":"{\"type\":\"int\"}"}"#;
    types::register_field(st, &field("kind", int, 4, 24, ti::INT))?;
    types::register_field(st, &field("key", r#"{"type_schema":"{\"type\":\"Any\"}"}"#, 16, 32, ti::ANY))?;
    let md = |c: types::ObjectCreator| TVMFFITypeMetadata {
        doc: TVMFFIByteArray::EMPTY,
        creator: Some(c),
        total_size: 48,
        structural_eq_hash_kind: 4,
    };
    types::register_metadata(st, &md(create_step))?;
    types::register_field(
        pt,
        &field(
            "parent",
            r#"{"type_schema":"{\"type\":\"Optional\",\"args\":[{\"type\":\"ffi.Object\"}]}"}"#,
            8,
            24,
            ti::ANY,
        ),
    )?;
    types::register_field(
        pt,
        &field(
            "step",
            r#"{"type_schema":"{\"type\":\"Optional\",\"args\":[{\"type\":\"ffi.reflection.AccessStep\"}]}"}"#,
            8,
            32,
            ti::ANY,
        ),
    )?;
    types::register_field(pt, &field("depth", int, 4, 40, ti::INT))?;
    types::register_metadata(pt, &md(create_path))?;
    // The methods (`_root`, `_extend`, `_attr`, ... `_path_equal`) are registered by
    // `structural::access_path`, which builds paths for the structural visitors.
    let step_repr_fn = Any::object(function::from_fn(|a| {
        let s = as_step(&arg_any("__ffi_repr__", a, 0)?)?;
        let f = arg_any("__ffi_repr__", a, 1)?.into_object().map_err(|_| FfiError::type_error("fn_repr"))?;
        Ok(Any::string(&step_repr(&s, &f)?))
    }));
    types::register_attr(st, "__ffi_repr__", step_repr_fn.raw())?;
    let path_repr_fn = Any::object(function::from_fn(|a| {
        let p = as_path(&arg_any("__ffi_repr__", a, 0)?)?;
        let f = arg_any("__ffi_repr__", a, 1)?.into_object().map_err(|_| FfiError::type_error("fn_repr"))?;
        let mut s = String::from("<root>");
        for x in to_steps(&p) {
            let r = function::call_any(&f, &[x])?;
            s.push_str(r.as_str().unwrap_or(""));
        }
        Ok(Any::string(&s))
    }));
    types::register_attr(pt, "__ffi_repr__", path_repr_fn.raw())?;
    let step_new = Any::object(function::from_fn(|_| Ok(Any::object(make_step(0, Any::none())?))));
    types::register_attr(st, "__ffi_new__", step_new.raw())?;
    let path_new = Any::object(function::from_fn(|_| Ok(Any::object(root()?))));
    types::register_attr(pt, "__ffi_new__", path_new.raw())?;
    let step_copy = Any::object(function::from_fn(|a| {
        let s = as_step(&arg_any("__ffi_shallow_copy__", a, 0)?)?;
        let p = step(&s);
        Ok(Any::object(make_step(p.kind, p.key.clone())?))
    }));
    types::register_attr(st, "__ffi_shallow_copy__", step_copy.raw())?;
    let path_copy = Any::object(function::from_fn(move |a| {
        let s = as_path(&arg_any("__ffi_shallow_copy__", a, 0)?)?;
        let p = path(&s);
        Ok(Any::object(make_object(
            pt,
            PathPayload { parent: p.parent.clone(), step: p.step.clone(), depth: p.depth, _pad: 0 },
        )))
    }));
    types::register_attr(pt, "__ffi_shallow_copy__", path_copy.raw())?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_extend_and_print() {
        let _ = crate::tvmffi::registry::get("ffi.ReprPrint");
        let r = root().unwrap();
        let a = extend(&r, make_step(kind::ATTR, Any::string("foo")).unwrap()).unwrap();
        let b = extend(&a, make_step(kind::ARRAY_ITEM, Any::int(2)).unwrap()).unwrap();
        let c = extend(&b, make_step(kind::MAP_ITEM_MISSING, Any::string("k")).unwrap()).unwrap();
        assert_eq!(to_steps(&c).len(), 3);
        assert_eq!(path(&c).depth, 3);
        assert_eq!(super::super::repr::repr_print(&Any::object(c)).unwrap(), "<root>.foo[2][<missing:\"k\">]");
    }
}
