//! `ffi.VisitErrorContext` (the C++ layout: the visited nodes innermost first, and the error's
//! earlier context) and `ffi.VisitErrorContext.FindAccessPaths`: the access paths from a root to
//! the nodes an error was raised under, found by walking the root's fields and containers.

use super::access_path::{self, make_step, step_kind};
use super::{cont, reflect};
use crate::any::Any;
use crate::globals::{arg_any, expect_args};
use crate::object::{make_object, ObjectRef};
use crate::registry::Builder;
use crate::types::{self, TVMFFITypeMetadata};
use crate::{ti, FfiError, FfiResult, TVMFFIByteArray};
use std::sync::OnceLock;

/// `VisitErrorContextObj` after the header.
#[repr(C)]
pub(crate) struct ContextPayload {
    /// `List<ObjectRef>`: the nodes, innermost first.
    pub reverse_visit_pattern: Option<ObjectRef>,
    /// The context the error had before.
    pub prev_error_context: Option<ObjectRef>,
}

/// The type index of `ffi.VisitErrorContext`.
pub(crate) fn context_type() -> i32 {
    static T: OnceLock<i32> = OnceLock::new();
    *T.get_or_init(|| reflect::type_index_of("ffi.VisitErrorContext"))
}

/// A context naming `nodes` (innermost first).
#[cfg(test)]
pub(crate) fn make_context(nodes: Vec<Any>) -> FfiResult<ObjectRef> {
    let list = cont::make_list(nodes)?.into_object().map_err(|_| FfiError::runtime("ffi.List"))?;
    Ok(make_object(context_type(), ContextPayload { reverse_visit_pattern: Some(list), prev_error_context: None }))
}

/// `UpdateVisitErrorContext`: names `node` (an object; other values add nothing) in the
/// error's `ffi.VisitErrorContext`: appended to the one it has, or in a new one that keeps the
/// error's earlier context. The error object is changed in place, as tvm-ffi does while an
/// error travels up a traversal.
pub(crate) fn annotate(err: FfiError, node: &Any) -> FfiError {
    let Some(node) = node.as_object() else { return err };
    if err.is_env_signal() {
        return err;
    }
    let obj = err.into_object();
    let ctx = crate::error::extra_context(&obj);
    if let Some(c) = ctx.as_ref().filter(|c| c.type_index() == context_type()) {
        // SAFETY: an ffi.VisitErrorContext made here or by C++ has this layout.
        let p = unsafe { c.payload::<ContextPayload>() };
        if let Some(list) = &p.reverse_visit_pattern {
            if crate::containers::list::list_append(list, Any::object(node.clone())).is_ok() {
                return FfiError::from_object(obj);
            }
        }
    }
    if let Ok(list) = cont::make_list(vec![Any::object(node)])
        .and_then(|l| l.into_object().map_err(|_| FfiError::runtime("ffi.List")))
    {
        let c =
            make_object(context_type(), ContextPayload { reverse_visit_pattern: Some(list), prev_error_context: ctx });
        // The old context moved into the new one (`ctx` above is its own reference).
        drop(crate::error::swap_extra_context(&obj, Some(c)));
    }
    FfiError::from_object(obj)
}

struct Finder {
    records: Vec<ObjectRef>,
    allow_prefix: bool,
    matched: usize,
    steps: Vec<ObjectRef>,
    results: Vec<ObjectRef>,
}

impl Finder {
    fn path(&self) -> ObjectRef {
        access_path::from_steps(self.steps.iter().cloned())
    }

    fn any(&mut self, v: &Any) -> FfiResult<()> {
        let t = v.type_index();
        if t < ti::STATIC_OBJECT_BEGIN {
            return Ok(());
        }
        let o = v.as_object().expect("object");
        match t {
            ti::ARRAY | ti::LIST => {
                for (i, it) in cont::seq(&o).to_vec().iter().enumerate() {
                    if it.is_none() {
                        continue;
                    }
                    self.steps.push(make_step(step_kind::ARRAY_ITEM, Any::int(i as i64)));
                    let r = self.any(it);
                    self.steps.pop();
                    r?;
                }
                Ok(())
            }
            ti::MAP | ti::DICT => {
                for (k, it) in cont::map_items(&o)? {
                    if k.is_none() || it.is_none() {
                        continue;
                    }
                    self.steps.push(make_step(step_kind::MAP_ITEM, k));
                    let r = self.any(&it);
                    self.steps.pop();
                    r?;
                }
                Ok(())
            }
            _ => self.object(&o),
        }
    }

    fn object(&mut self, o: &ObjectRef) -> FfiResult<()> {
        if reflect::metadata(o.type_index()).is_none() {
            return Ok(());
        }
        let n = self.records.len();
        let hit = self.matched < n && o.same_as(&self.records[n - 1 - self.matched]);
        if hit {
            self.matched += 1;
            if self.matched == n {
                self.results.push(self.path());
                self.matched -= 1;
                return Ok(());
            }
        }
        let before = self.results.len();
        let mut r = Ok(());
        for f in reflect::all_fields(o.type_index()) {
            let v = match reflect::get_field(o, &f) {
                Ok(v) => v,
                Err(e) => {
                    r = Err(e);
                    break;
                }
            };
            self.steps.push(make_step(step_kind::ATTR, Any::string(&reflect::field_name(&f))));
            r = self.any(&v);
            self.steps.pop();
            if r.is_err() {
                break;
            }
        }
        if r.is_ok()
            && self.allow_prefix
            && self.matched > 0
            && self.matched < n
            && !self.steps.is_empty()
            && self.results.len() == before
        {
            self.results.push(self.path());
        }
        if hit {
            self.matched -= 1;
        }
        r
    }
}

/// `VisitErrorContext::FindAccessPaths`.
pub(crate) fn find_access_paths(
    root: &ObjectRef,
    context: &ObjectRef,
    allow_prefix: bool,
) -> FfiResult<Vec<ObjectRef>> {
    if context.type_index() != context_type() {
        return Err(FfiError::type_error("expected an ffi.VisitErrorContext"));
    }
    // SAFETY: checked: a VisitErrorContext (ours or C++'s) holds a ContextPayload.
    let p = unsafe { context.payload::<ContextPayload>() };
    let mut records: Vec<ObjectRef> = Vec::new();
    if let Some(list) = &p.reverse_visit_pattern {
        for e in cont::seq(list) {
            let Some(o) = e.as_object() else { continue };
            if records.last().is_some_and(|l| l.same_as(&o)) {
                continue;
            }
            records.push(o);
        }
    }
    let mut f = Finder { records, allow_prefix, matched: 0, steps: Vec::new(), results: Vec::new() };
    f.object(root)?;
    Ok(f.results)
}

/// The type's creator: an empty context (no nodes, no earlier context).
unsafe extern "C" fn create_context(out: *mut *mut std::ffi::c_void) -> i32 {
    crate::error::safe_call(|| {
        let o = make_object(context_type(), ContextPayload { reverse_visit_pattern: None, prev_error_context: None });
        // SAFETY: the caller passes a writable slot.
        unsafe { *out = o.into_raw().cast() };
        Ok(())
    })
}

/// Registers the type and `ffi.VisitErrorContext.FindAccessPaths`.
pub(crate) fn register(b: &mut Builder) {
    let t = context_type();
    // As C++'s ObjectDef registers it: an empty context can be made by reflection (creator),
    // and its fields set (`ffi.MakeObjectFromPackedArgs`).
    let _ = types::register_metadata(
        t,
        &TVMFFITypeMetadata {
            doc: TVMFFIByteArray::EMPTY,
            creator: Some(create_context),
            total_size: (24 + std::mem::size_of::<ContextPayload>()) as i32,
            structural_eq_hash_kind: reflect::kind::UNSUPPORTED,
        },
    );
    let off = |o: usize| 24 + o;
    reflect::def_object_field(
        t,
        "reverse_visit_pattern",
        off(std::mem::offset_of!(ContextPayload, reverse_visit_pattern)),
        ti::LIST,
        r#"{"type":"ffi.List","args":[{"type":"ffi.Object"}]}"#,
    );
    reflect::def_object_field(
        t,
        "prev_error_context",
        off(std::mem::offset_of!(ContextPayload, prev_error_context)),
        ti::ANY,
        r#"{"type":"Optional","args":[{"type":"ffi.Object"}]}"#,
    );
    b.add("ffi.VisitErrorContext.FindAccessPaths", |a| {
        let n = "ffi.VisitErrorContext.FindAccessPaths";
        expect_args(n, a, 3)?;
        let root = arg_any(n, a, 0)?
            .as_object()
            .ok_or_else(|| FfiError::type_error(format!("`{n}`: root must be an object")))?;
        let ctx = reflect::arg_obj(n, a, 1, context_type())?;
        let allow = arg_any(n, a, 2)?.as_bool().unwrap_or(false);
        let paths = find_access_paths(&root, &ctx, allow)?;
        Ok(cont::make_array(paths.into_iter().map(Any::object).collect()))
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_the_path_to_a_node() {
        // root: Array[ path_obj ] where path_obj is an AccessPath (an object with fields)
        let inner = access_path::root();
        let outer = access_path::extend(&inner, make_step(step_kind::ATTR, Any::string("x")));
        let ctx = make_context(vec![Any::object(inner.clone())]).unwrap();
        let paths = find_access_paths(&outer, &ctx, false).unwrap();
        assert_eq!(paths.len(), 1);
        let steps = access_path::to_steps(&paths[0]);
        assert_eq!(steps.len(), 1);
        let ctx = make_context(vec![Any::object(outer.clone())]).unwrap();
        let paths = find_access_paths(&outer, &ctx, false).unwrap();
        assert_eq!(access_path::to_steps(&paths[0]).len(), 0);
    }
}
