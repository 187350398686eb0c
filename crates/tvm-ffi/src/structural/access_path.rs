//! `ffi.reflection.AccessStep` and `ffi.reflection.AccessPath` (tvm-ffi's
//! `reflection/access_path.h`, registered by `reflection_extra.cc`): a path from a root object to
//! a nested attribute or item, a parent-pointing chain of steps. The layouts are tvm-ffi's (C++
//! code builds and walks them inline); this module registers everything of the two types: fields,
//! metadata and creators, methods, `__ffi_repr__`, `__ffi_new__` and `__ffi_shallow_copy__`.

use super::cont::any_equal;
use super::reflect::{self, arg_obj, get_i32};
use crate::any::{Any, TVMFFIAny};
use crate::containers::array::make_array;
use crate::dataclass::fields::{self, get_any, get_objref, set_any, set_objref};
use crate::error::safe_call;
use crate::globals::arg_any;
use crate::object::{make_object, ObjectRef};
use crate::types::{self, TVMFFIFieldInfo, TVMFFITypeMetadata};
use crate::{function, ti, FfiError, FfiResult, TVMFFIByteArray};
use std::ffi::c_void;
use std::sync::OnceLock;

/// `AccessKind`.
pub(crate) mod step_kind {
    /// Attribute.
    pub(crate) const ATTR: i32 = 0;
    /// Array item.
    pub(crate) const ARRAY_ITEM: i32 = 1;
    /// Map item.
    pub(crate) const MAP_ITEM: i32 = 2;
    /// Missing attribute.
    pub(crate) const ATTR_MISSING: i32 = 3;
    /// Missing array item.
    pub(crate) const ARRAY_ITEM_MISSING: i32 = 4;
    /// Missing map item.
    pub(crate) const MAP_ITEM_MISSING: i32 = 5;
}

/// `AccessStepObj` after the header.
#[repr(C)]
pub(crate) struct StepPayload {
    /// The kind (`AccessKind`).
    pub kind: i32,
    /// The key: a string for attributes, an integer for array items, any value for map items.
    pub key: Any,
}

/// `AccessPathObj` after the header.
#[repr(C)]
pub(crate) struct PathPayload {
    /// The parent path (None for the root).
    pub parent: Option<ObjectRef>,
    /// The last step (None for the root).
    pub step: Option<ObjectRef>,
    /// How many steps (0 for the root).
    pub depth: i32,
}

const _: () = assert!(std::mem::size_of::<StepPayload>() == 24);
const _: () = assert!(std::mem::size_of::<PathPayload>() == 24);

/// The type index of `ffi.reflection.AccessStep`.
pub(crate) fn step_type() -> i32 {
    static T: OnceLock<i32> = OnceLock::new();
    *T.get_or_init(|| reflect::type_index_of("ffi.reflection.AccessStep"))
}

/// The type index of `ffi.reflection.AccessPath`.
pub(crate) fn path_type() -> i32 {
    static T: OnceLock<i32> = OnceLock::new();
    *T.get_or_init(|| reflect::type_index_of("ffi.reflection.AccessPath"))
}

/// A new step.
pub(crate) fn make_step(kind: i32, key: Any) -> ObjectRef {
    make_object(step_type(), StepPayload { kind, key })
}

fn step_of(o: &ObjectRef) -> &StepPayload {
    debug_assert!(o.type_index() == step_type());
    // SAFETY: checked by the callers: an AccessStep holds a StepPayload.
    unsafe { o.payload::<StepPayload>() }
}

fn path_of(o: &ObjectRef) -> &PathPayload {
    debug_assert!(o.type_index() == path_type());
    // SAFETY: as above.
    unsafe { o.payload::<PathPayload>() }
}

/// The root path.
pub(crate) fn root() -> ObjectRef {
    make_object(path_type(), PathPayload { parent: None, step: None, depth: 0 })
}

/// `path` extended by `step`.
pub(crate) fn extend(path: &ObjectRef, step: ObjectRef) -> ObjectRef {
    let depth = path_of(path).depth + 1;
    make_object(path_type(), PathPayload { parent: Some(path.clone()), step: Some(step), depth })
}

/// A path from its steps (root first).
pub(crate) fn from_steps(steps: impl IntoIterator<Item = ObjectRef>) -> ObjectRef {
    steps.into_iter().fold(root(), |p, s| extend(&p, s))
}

fn step_equal(a: &ObjectRef, b: &ObjectRef) -> bool {
    let (x, y) = (step_of(a), step_of(b));
    x.kind == y.kind && any_equal(&x.key, &y.key)
}

/// Whether two paths have the same steps.
pub(crate) fn path_equal(a: &ObjectRef, b: &ObjectRef) -> bool {
    let (mut l, mut r) = (a.clone(), b.clone());
    if path_of(&l).depth != path_of(&r).depth {
        return false;
    }
    loop {
        if l.same_as(&r) {
            return true;
        }
        let (pl, pr) = (path_of(&l), path_of(&r));
        match (&pl.step, &pr.step, &pl.parent, &pr.parent) {
            (Some(sl), Some(sr), Some(ql), Some(qr)) => {
                if !step_equal(sl, sr) {
                    return false;
                }
                let (nl, nr) = (ql.clone(), qr.clone());
                l = nl;
                r = nr;
            }
            _ => return pl.parent.is_none() && pr.parent.is_none(),
        }
    }
}

/// Whether `a` is a prefix of `b`.
pub(crate) fn is_prefix_of(a: &ObjectRef, b: &ObjectRef) -> bool {
    let da = path_of(a).depth;
    let mut cur = b.clone();
    while path_of(&cur).depth > da {
        let Some(p) = path_of(&cur).parent.clone() else { return false };
        cur = p;
    }
    path_equal(a, &cur)
}

/// The steps of a path, root first.
pub(crate) fn to_steps(path: &ObjectRef) -> Vec<ObjectRef> {
    let mut out = Vec::new();
    let mut cur = path.clone();
    loop {
        let p = path_of(&cur);
        let (Some(s), Some(parent)) = (p.step.clone(), p.parent.clone()) else { break };
        out.push(s);
        cur = parent;
    }
    out.reverse();
    out
}

fn ext(name: &'static str, kind: i32, key_ti: Option<i32>) -> impl Fn(&[TVMFFIAny]) -> FfiResult<Any> {
    move |a| {
        let p = arg_obj(name, a, 0, path_type())?;
        let key = arg_any(name, a, 1)?;
        match key_ti {
            Some(ti::INT) if key.type_index() != ti::INT && key.type_index() != ti::BOOL => {
                return Err(FfiError::type_error(format!("`{name}`: expects an int key")));
            }
            Some(ti::STR) if key.as_str().is_none() => {
                return Err(FfiError::type_error(format!("`{name}`: expects a str key")));
            }
            _ => {}
        }
        let key = if key_ti == Some(ti::INT) { Any::int(key.as_i64().unwrap_or(0)) } else { key };
        Ok(Any::object(extend(&p, make_step(kind, key))))
    }
}

fn step_repr(s: &ObjectRef, fn_repr: &ObjectRef) -> FfiResult<String> {
    let st = step_of(s);
    let key_repr = || -> FfiResult<String> {
        let r = function::call_any(fn_repr, std::slice::from_ref(&st.key))?;
        Ok(r.as_str().unwrap_or("").to_owned())
    };
    let int = || st.key.as_i64().unwrap_or(0);
    Ok(match st.kind {
        step_kind::ATTR => format!(".{}", st.key.as_str().unwrap_or("")),
        step_kind::ARRAY_ITEM => format!("[{}]", int()),
        step_kind::MAP_ITEM => format!("[{}]", key_repr()?),
        step_kind::ATTR_MISSING | step_kind::MAP_ITEM_MISSING => format!("[<missing:{}>]", key_repr()?),
        step_kind::ARRAY_ITEM_MISSING => format!("[<missing:{}>]", int()),
        k => return Err(FfiError::value(format!("unknown access kind {k}"))),
    })
}

unsafe extern "C" fn set_i32(field: *mut c_void, value: *const TVMFFIAny) -> i32 {
    safe_call(|| {
        // SAFETY: the value is a valid view.
        let v = unsafe { crate::any::view_as_i64(&*value) }.ok_or_else(|| FfiError::type_error("expected an int"))?;
        let v = i32::try_from(v).map_err(|_| FfiError::value(format!("{v} is out of the int32 range")))?;
        // SAFETY: the field holds an i32.
        unsafe { *field.cast::<i32>() = v };
        Ok(())
    })
}

unsafe extern "C" fn create_step(out: *mut *mut c_void) -> i32 {
    safe_call(|| {
        // SAFETY: the caller passes a writable slot.
        unsafe { *out = make_step(0, Any::none()).into_raw().cast() };
        Ok(())
    })
}

unsafe extern "C" fn create_path(out: *mut *mut c_void) -> i32 {
    safe_call(|| {
        // SAFETY: the caller passes a writable slot.
        unsafe { *out = root().into_raw().cast() };
        Ok(())
    })
}

fn field(name: &'static str, schema: &'static str, size: i64, offset: i64, sti: i32) -> TVMFFIFieldInfo {
    let (getter, setter): (types::FieldGetter, fields::FieldSetter) = match (sti, size) {
        (ti::INT, _) => (get_i32, set_i32),
        (_, 16) => (get_any, set_any),
        _ => (get_objref, set_objref),
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

/// The fields (at tvm-ffi's offsets), metadata and creators, and the repr, new and shallow-copy
/// attributes of the two types.
fn register_layout(st: i32, pt: i32) -> FfiResult<()> {
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
    let step_repr_fn = Any::object(function::from_fn(|a| {
        let s = arg_obj("__ffi_repr__", a, 0, step_type())?;
        let f = arg_any("__ffi_repr__", a, 1)?.into_object().map_err(|_| FfiError::type_error("fn_repr"))?;
        Ok(Any::string(&step_repr(&s, &f)?))
    }));
    types::register_attr(st, "__ffi_repr__", step_repr_fn.raw())?;
    let path_repr_fn = Any::object(function::from_fn(|a| {
        let p = arg_obj("__ffi_repr__", a, 0, path_type())?;
        let f = arg_any("__ffi_repr__", a, 1)?.into_object().map_err(|_| FfiError::type_error("fn_repr"))?;
        let mut s = String::from("<root>");
        for x in to_steps(&p) {
            let r = function::call_any(&f, &[Any::object(x)])?;
            s.push_str(r.as_str().unwrap_or(""));
        }
        Ok(Any::string(&s))
    }));
    types::register_attr(pt, "__ffi_repr__", path_repr_fn.raw())?;
    let step_new = Any::object(function::from_fn(|_| Ok(Any::object(make_step(0, Any::none())))));
    types::register_attr(st, "__ffi_new__", step_new.raw())?;
    let path_new = Any::object(function::from_fn(|_| Ok(Any::object(root()))));
    types::register_attr(pt, "__ffi_new__", path_new.raw())?;
    let step_copy = Any::object(function::from_fn(|a| {
        let s = arg_obj("__ffi_shallow_copy__", a, 0, step_type())?;
        let p = step_of(&s);
        Ok(Any::object(make_step(p.kind, p.key.clone())))
    }));
    types::register_attr(st, "__ffi_shallow_copy__", step_copy.raw())?;
    let path_copy = Any::object(function::from_fn(|a| {
        let s = arg_obj("__ffi_shallow_copy__", a, 0, path_type())?;
        let p = path_of(&s);
        Ok(Any::object(make_object(
            path_type(),
            PathPayload { parent: p.parent.clone(), step: p.step.clone(), depth: p.depth },
        )))
    }));
    types::register_attr(pt, "__ffi_shallow_copy__", path_copy.raw())?;
    Ok(())
}

/// Registers everything of the two types (once): the layout, then the methods.
pub(crate) fn register_types() -> FfiResult<()> {
    let (st, pt) = (step_type(), path_type());
    if st < 0 || pt < 0 {
        return Err(FfiError::runtime("the access path types are not registered"));
    }
    // SAFETY: type infos live for the process.
    if types::type_info(st).is_some_and(|i| unsafe { (*i).num_fields > 0 }) {
        return Ok(());
    }
    register_layout(st, pt)?;
    register_methods(pt);
    Ok(())
}

fn register_methods(pt: i32) {
    reflect::def_method(pt, "_root", true, &reflect::fn_schema(r#"{"type":"ffi.reflection.AccessPath"}"#, &[]), |_| {
        Ok(Any::object(root()))
    });
    reflect::def_method(
        pt,
        "_extend",
        false,
        &reflect::fn_schema(
            r#"{"type":"ffi.reflection.AccessPath"}"#,
            &[r#"{"type":"ffi.reflection.AccessPath"}"#, r#"{"type":"ffi.reflection.AccessStep"}"#],
        ),
        |a| {
            let p = arg_obj("_extend", a, 0, path_type())?;
            let s = arg_obj("_extend", a, 1, step_type())?;
            Ok(Any::object(extend(&p, s)))
        },
    );
    reflect::def_method(
        pt,
        "_attr",
        false,
        &reflect::fn_schema(
            r#"{"type":"ffi.reflection.AccessPath"}"#,
            &[r#"{"type":"ffi.reflection.AccessPath"}"#, r#"{"type":"ffi.String"}"#],
        ),
        ext("_attr", step_kind::ATTR, Some(ti::STR)),
    );
    reflect::def_method(
        pt,
        "_array_item",
        false,
        &reflect::fn_schema(
            r#"{"type":"ffi.reflection.AccessPath"}"#,
            &[r#"{"type":"ffi.reflection.AccessPath"}"#, r#"{"type":"int"}"#],
        ),
        ext("_array_item", step_kind::ARRAY_ITEM, Some(ti::INT)),
    );
    reflect::def_method(
        pt,
        "_map_item",
        false,
        &reflect::fn_schema(
            r#"{"type":"ffi.reflection.AccessPath"}"#,
            &[r#"{"type":"ffi.reflection.AccessPath"}"#, r#"{"type":"Any"}"#],
        ),
        ext("_map_item", step_kind::MAP_ITEM, None),
    );
    reflect::def_method(
        pt,
        "_attr_missing",
        false,
        &reflect::fn_schema(
            r#"{"type":"ffi.reflection.AccessPath"}"#,
            &[r#"{"type":"ffi.reflection.AccessPath"}"#, r#"{"type":"ffi.String"}"#],
        ),
        ext("_attr_missing", step_kind::ATTR_MISSING, Some(ti::STR)),
    );
    reflect::def_method(
        pt,
        "_array_item_missing",
        false,
        &reflect::fn_schema(
            r#"{"type":"ffi.reflection.AccessPath"}"#,
            &[r#"{"type":"ffi.reflection.AccessPath"}"#, r#"{"type":"int"}"#],
        ),
        ext("_array_item_missing", step_kind::ARRAY_ITEM_MISSING, Some(ti::INT)),
    );
    reflect::def_method(
        pt,
        "_map_item_missing",
        false,
        &reflect::fn_schema(
            r#"{"type":"ffi.reflection.AccessPath"}"#,
            &[r#"{"type":"ffi.reflection.AccessPath"}"#, r#"{"type":"Any"}"#],
        ),
        ext("_map_item_missing", step_kind::MAP_ITEM_MISSING, None),
    );
    reflect::def_method(
        pt,
        "_is_prefix_of",
        false,
        &reflect::fn_schema(
            r#"{"type":"bool"}"#,
            &[r#"{"type":"ffi.reflection.AccessPath"}"#, r#"{"type":"ffi.reflection.AccessPath"}"#],
        ),
        |a| {
            let p = arg_obj("_is_prefix_of", a, 0, path_type())?;
            let q = arg_obj("_is_prefix_of", a, 1, path_type())?;
            Ok(Any::bool(is_prefix_of(&p, &q)))
        },
    );
    reflect::def_method(
        pt,
        "_to_steps",
        false,
        &reflect::fn_schema(
            r#"{"type":"ffi.Array","args":[{"type":"ffi.reflection.AccessStep"}]}"#,
            &[r#"{"type":"ffi.reflection.AccessPath"}"#],
        ),
        |a| {
            let p = arg_obj("_to_steps", a, 0, path_type())?;
            Ok(Any::object(make_array(to_steps(&p).into_iter().map(Any::object).collect())))
        },
    );
    reflect::def_method(
        pt,
        "_path_equal",
        false,
        &reflect::fn_schema(
            r#"{"type":"bool"}"#,
            &[r#"{"type":"ffi.reflection.AccessPath"}"#, r#"{"type":"ffi.reflection.AccessPath"}"#],
        ),
        |a| {
            let p = arg_obj("_path_equal", a, 0, path_type())?;
            let q = arg_obj("_path_equal", a, 1, path_type())?;
            Ok(Any::bool(path_equal(&p, &q)))
        },
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    fn attr(p: &ObjectRef, k: &str) -> ObjectRef {
        extend(p, make_step(step_kind::ATTR, Any::string(k)))
    }

    #[test]
    fn paths_extend_and_print() {
        let _ = crate::registry::get("ffi.ReprPrint");
        let r = root();
        let a = extend(&r, make_step(step_kind::ATTR, Any::string("foo")));
        let b = extend(&a, make_step(step_kind::ARRAY_ITEM, Any::int(2)));
        let c = extend(&b, make_step(step_kind::MAP_ITEM_MISSING, Any::string("k")));
        assert_eq!(to_steps(&c).len(), 3);
        assert_eq!(path_of(&c).depth, 3);
        let repr = crate::dataclass::repr::repr_print(&Any::object(c)).unwrap();
        assert_eq!(repr, "<root>.foo[2][<missing:\"k\">]");
        // Registered once: a second call changes nothing and succeeds.
        assert!(register_types().is_ok());
    }

    #[test]
    fn paths_compare_by_steps() {
        let r = root();
        let a = attr(&r, "foo");
        let a2 = attr(&root(), "foo");
        let b = attr(&r, "a_longer_name_than_seven");
        assert!(path_equal(&a, &a2));
        assert!(!path_equal(&a, &b));
        assert!(!path_equal(&a, &r));
        assert!(path_equal(&r, &root()));
        let deep = extend(&a, make_step(step_kind::ARRAY_ITEM, Any::int(2)));
        assert!(is_prefix_of(&a2, &deep));
        assert!(is_prefix_of(&root(), &deep));
        assert!(!is_prefix_of(&deep, &a));
        assert!(!is_prefix_of(&b, &deep));
        let steps = to_steps(&deep);
        assert_eq!(steps.len(), 2);
        assert_eq!(step_of(&steps[1]).kind, step_kind::ARRAY_ITEM);
        assert_eq!(step_of(&steps[1]).key.as_i64(), Some(2));
        assert!(path_equal(&from_steps(steps), &deep));
        assert_eq!(path_of(&deep).depth, 2);
    }
}
