//! `ffi.reflection.AccessStep` and `ffi.reflection.AccessPath` (tvm-ffi's `access_path.h`):
//! a path from a root object to a nested attribute or item, a parent-pointing chain of steps.
//! The layouts are tvm-ffi's (C++ code reads them inline).

use super::cont::any_equal;
use super::reflect::{self, arg_obj};
use crate::tvmffi::any::{Any, TVMFFIAny};
use crate::tvmffi::containers::array::make_array;
use crate::tvmffi::globals::arg_any;
use crate::tvmffi::object::{make_object, ObjectRef};
use crate::tvmffi::{ti, FfiError, FfiResult};
use std::sync::OnceLock;

/// `AccessKind`.
pub mod step_kind {
    /// Attribute.
    pub const ATTR: i32 = 0;
    /// Array item.
    pub const ARRAY_ITEM: i32 = 1;
    /// Map item.
    pub const MAP_ITEM: i32 = 2;
    /// Missing attribute.
    pub const ATTR_MISSING: i32 = 3;
    /// Missing array item.
    pub const ARRAY_ITEM_MISSING: i32 = 4;
    /// Missing map item.
    pub const MAP_ITEM_MISSING: i32 = 5;
}

/// `AccessStepObj` after the header.
#[repr(C)]
pub struct StepPayload {
    /// The kind (`AccessKind`).
    pub kind: i32,
    /// The key: a string for attributes, an integer for array items, any value for map items.
    pub key: Any,
}

/// `AccessPathObj` after the header.
#[repr(C)]
pub struct PathPayload {
    /// The parent path (None for the root).
    pub parent: Option<ObjectRef>,
    /// The last step (None for the root).
    pub step: Option<ObjectRef>,
    /// How many steps (0 for the root).
    pub depth: i32,
}

/// The type index of `ffi.reflection.AccessStep`.
pub fn step_type() -> i32 {
    static T: OnceLock<i32> = OnceLock::new();
    *T.get_or_init(|| reflect::type_index_of("ffi.reflection.AccessStep"))
}

/// The type index of `ffi.reflection.AccessPath`.
pub fn path_type() -> i32 {
    static T: OnceLock<i32> = OnceLock::new();
    *T.get_or_init(|| reflect::type_index_of("ffi.reflection.AccessPath"))
}

/// A new step.
pub fn make_step(kind: i32, key: Any) -> ObjectRef {
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
pub fn root() -> ObjectRef {
    make_object(path_type(), PathPayload { parent: None, step: None, depth: 0 })
}

/// `path` extended by `step`.
pub fn extend(path: &ObjectRef, step: ObjectRef) -> ObjectRef {
    let depth = path_of(path).depth + 1;
    make_object(path_type(), PathPayload { parent: Some(path.clone()), step: Some(step), depth })
}

/// A path from its steps (root first).
pub fn from_steps(steps: impl IntoIterator<Item = ObjectRef>) -> ObjectRef {
    steps.into_iter().fold(root(), |p, s| extend(&p, s))
}

fn step_equal(a: &ObjectRef, b: &ObjectRef) -> bool {
    let (x, y) = (step_of(a), step_of(b));
    x.kind == y.kind && any_equal(&x.key, &y.key)
}

/// Whether two paths have the same steps.
pub fn path_equal(a: &ObjectRef, b: &ObjectRef) -> bool {
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
pub fn is_prefix_of(a: &ObjectRef, b: &ObjectRef) -> bool {
    let da = path_of(a).depth;
    let mut cur = b.clone();
    while path_of(&cur).depth > da {
        let Some(p) = path_of(&cur).parent.clone() else { return false };
        cur = p;
    }
    path_equal(a, &cur)
}

/// The steps of a path, root first.
pub fn to_steps(path: &ObjectRef) -> Vec<ObjectRef> {
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

/// Registers the methods of the two types. Their fields, metadata, creators and repr are
/// registered once, by `dataclass::access_path` (which runs first).
pub fn register_types() {
    let pt = path_type();
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
