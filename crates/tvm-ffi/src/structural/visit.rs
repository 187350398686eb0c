//! Structural visiting (`ffi.StructuralWalk`, `ffi.StructuralVisit` and the
//! `ffi.StructuralVisitor*` methods): a walk over containers' elements (map values, not keys)
//! and objects' reflected fields, tracking the definition region the way structural equality
//! does, dispatching on the first callback whose type matches, stopping at a `VisitInterrupt`.

use super::cont;
use super::equal::region;
use super::error_context;
use super::reflect::{self, kind};
use crate::any::{Any, TVMFFIAny};
use crate::globals::{arg_any, expect_args};
use crate::object::{make_object, ObjectRef};
use crate::registry::Builder;
use crate::{function, ti, types, FfiError, FfiResult};
use std::cell::Cell;
use std::sync::OnceLock;

/// A visit's outcome: `Some(interrupt)` stops it.
pub(crate) type Visit = FfiResult<Option<ObjectRef>>;

/// `RuntimeTypeIndexMatch`: does a callback registered for `target` take a value of `actual`?
pub(crate) fn type_match(actual: i32, target: i32) -> bool {
    actual == target
        || target == ti::ANY
        || (target == ti::STR && actual == ti::SMALL_STR)
        || (target == ti::BYTES && actual == ti::SMALL_BYTES)
        || (target == ti::OBJECT && actual >= ti::STATIC_OBJECT_BEGIN)
        || (actual >= ti::STATIC_OBJECT_BEGIN
            && target >= ti::STATIC_OBJECT_BEGIN
            && types::is_instance(actual, target))
}

/// Callback entries `[(type_index, function, ...)]` from an array of tuples.
pub(crate) fn callback_entries(name: &str, a: &Any) -> FfiResult<Vec<(i32, ObjectRef, bool)>> {
    let bad =
        || FfiError::type_error(format!("`{name}`: callbacks must be a sequence of (type_index, function) tuples"));
    if a.is_none() {
        return Ok(Vec::new());
    }
    let o = a.as_object().filter(|o| o.type_index() == ti::ARRAY || o.type_index() == ti::LIST).ok_or_else(bad)?;
    let mut out = Vec::new();
    for e in cont::seq(&o) {
        let t = e.as_object().filter(|o| o.type_index() == ti::ARRAY || o.type_index() == ti::LIST).ok_or_else(bad)?;
        let items = cont::seq(&t);
        let (Some(idx), Some(f)) = (items.first().and_then(Any::as_i64), items.get(1).and_then(Any::as_object)) else {
            return Err(bad());
        };
        if f.type_index() != ti::FUNCTION {
            return Err(bad());
        }
        let flag = items.get(2).and_then(Any::as_bool).unwrap_or(false);
        out.push((idx as i32, f, flag));
    }
    Ok(out)
}

enum Mode {
    Walk { pre: bool, plain: Vec<(i32, ObjectRef, bool)>, with_kind: Vec<(i32, ObjectRef, bool)> },
    Visit { callbacks: Vec<(i32, ObjectRef, bool)> },
}

/// `StructuralVisitorObj` after the header: the C++ layout's vtable slot (null: C++ hooks of
/// the native kind are refused) and region, then this library's state.
#[repr(C)]
pub(crate) struct VisitorPayload {
    vtable: *const std::ffi::c_void,
    region: Cell<i32>,
    mode: Mode,
    active: cont::InProgress,
}

// SAFETY: a visitor is used by the thread that runs its visit (Python holds it only inside
// callbacks of that visit); the raw vtable pointer is always null.
unsafe impl Send for VisitorPayload {}
// SAFETY: as above.
unsafe impl Sync for VisitorPayload {}

/// The type index of `ffi.StructuralVisitor`.
pub(crate) fn visitor_type() -> i32 {
    static T: OnceLock<i32> = OnceLock::new();
    *T.get_or_init(|| reflect::type_index_of("ffi.StructuralVisitor"))
}

fn payload(v: &ObjectRef) -> &VisitorPayload {
    // SAFETY: callers check the type: a StructuralVisitor made here holds a VisitorPayload.
    unsafe { v.payload::<VisitorPayload>() }
}

fn interrupt_of(r: Any, what: &str) -> Visit {
    if r.is_none() {
        return Ok(None);
    }
    match r.into_object() {
        Ok(o) if o.type_index() == ti::VISIT_INTERRUPT => Ok(Some(o)),
        Ok(o) => Err(FfiError::type_error(format!(
            "{what} must return None or a VisitInterrupt, got `{}`",
            types::type_key(o.type_index())
        ))),
        Err(a) => Err(FfiError::type_error(format!(
            "{what} must return None or a VisitInterrupt, got `{}`",
            types::type_key(a.type_index())
        ))),
    }
}

/// Runs `f` in definition region `kind` (a pattern region stays a pattern region).
pub(crate) fn with_region<T>(v: &ObjectRef, kind: i32, f: impl FnOnce() -> T) -> T {
    let p = payload(v);
    if p.region.get() == region::PATTERN {
        return f();
    }
    let saved = p.region.replace(kind);
    let r = f();
    p.region.set(saved);
    r
}

enum Step {
    Advance,
    Skip,
    Stop(ObjectRef),
}

/// A callback's answer as tvm-ffi's `Expected` reads it (an `ffi.Error` returned is a failure);
/// a failure names `value` in its visit error context.
fn called(r: FfiResult<Any>, value: &Any) -> FfiResult<Any> {
    match r {
        Ok(v) if v.type_index() == ti::ERROR => {
            Err(error_context::annotate(FfiError::from_object(v.as_object().expect("error object")), value))
        }
        Ok(v) => Ok(v),
        Err(e) => Err(error_context::annotate(e, value)),
    }
}

fn walk_callback(v: &ObjectRef, value: &Any) -> FfiResult<Step> {
    let Mode::Walk { plain, with_kind, .. } = &payload(v).mode else { return Ok(Step::Advance) };
    let t = value.type_index();
    let r = if let Some((_, f, _)) = plain.iter().find(|e| type_match(t, e.0)) {
        called(function::call_any(f, std::slice::from_ref(value)), value)?
    } else if let Some((_, f, _)) = with_kind.iter().find(|e| type_match(t, e.0)) {
        called(function::call_any(f, &[value.clone(), Any::int(payload(v).region.get() as i64)]), value)?
    } else {
        return Ok(Step::Advance);
    };
    match r.type_index() {
        ti::NONE => Ok(Step::Advance),
        ti::INT | ti::BOOL => match r.as_i64() {
            Some(0) => Ok(Step::Advance),
            Some(1) => Ok(Step::Skip),
            other => Err(FfiError::value(format!("invalid WalkResult {other:?}"))),
        },
        ti::VISIT_INTERRUPT => Ok(Step::Stop(r.as_object().expect("object"))),
        other => Err(FfiError::type_error(format!(
            "structural walk callback must return None, a WalkResult or a VisitInterrupt, got `{}`",
            types::type_key(other)
        ))),
    }
}

/// `StructuralVisitorObj::Visit`: the engine's dispatch for one value.
pub(crate) fn visit(v: &ObjectRef, value: &Any) -> Visit {
    if value.is_none() {
        return Ok(None);
    }
    match &payload(v).mode {
        Mode::Walk { pre, .. } => {
            let pre = *pre;
            if pre {
                match walk_callback(v, value)? {
                    Step::Stop(i) => return Ok(Some(i)),
                    Step::Skip => return Ok(None),
                    Step::Advance => {}
                }
            }
            if let Some(i) = default_visit(v, value)? {
                return Ok(Some(i));
            }
            if !pre {
                if let Step::Stop(i) = walk_callback(v, value)? {
                    return Ok(Some(i));
                }
            }
            Ok(None)
        }
        Mode::Visit { callbacks } => {
            let t = value.type_index();
            match callbacks.iter().find(|e| type_match(t, e.0)) {
                Some((_, f, _)) => interrupt_of(
                    called(function::call_any(f, &[value.clone(), Any::object(v.clone())]), value)?,
                    "structural visit callback",
                ),
                None => default_visit(v, value),
            }
        }
    }
}

/// The registered (`__s_visit__`) or default descent into a value's children.
pub(crate) fn default_visit(v: &ObjectRef, value: &Any) -> Visit {
    let t = value.type_index();
    if let Some(hook) = types::attr_value("__s_visit__", t) {
        match hook.type_index() {
            ti::FUNCTION => {
                return interrupt_of(
                    called(
                        function::call_any(
                            &hook.as_object().expect("function"),
                            &[Any::object(v.clone()), value.clone()],
                        ),
                        value,
                    )?,
                    "__s_visit__",
                )
            }
            // The containers' native hooks (cxx/structural_hooks.cc) serve C++ engines; this
            // traversal descends into containers itself.
            _ if super::native_builtin(t) => {}
            _ => return Err(FfiError::type_error("__s_visit__ must be an ffi.Function for this library")),
        }
    }
    if t < ti::STATIC_OBJECT_BEGIN {
        return Ok(None);
    }
    let o = value.as_object().expect("object");
    payload(v)
        .active
        .run(o.as_ptr() as usize, "structural visit", || default_visit_object(v, t, &o))
        .map_err(|e| error_context::annotate(e, value))
}

fn default_visit_object(v: &ObjectRef, t: i32, o: &ObjectRef) -> Visit {
    let o = o.clone();
    match t {
        ti::ARRAY | ti::LIST => {
            for it in cont::seq(&o).to_vec() {
                if let Some(i) = visit(v, &it)? {
                    return Ok(Some(i));
                }
            }
            Ok(None)
        }
        ti::MAP | ti::DICT => {
            for (_, it) in cont::map_items(&o)? {
                if let Some(i) = visit(v, &it)? {
                    return Ok(Some(i));
                }
            }
            Ok(None)
        }
        _ => {
            let fields = || -> Visit {
                for f in reflect::all_fields(t) {
                    if f.flags & reflect::FIELD_SEQ_HASH_IGNORE != 0 {
                        continue;
                    }
                    let fv = reflect::get_field(&o, &f)?;
                    let r = if f.flags & reflect::FIELD_SEQ_HASH_DEF_SIMPLE != 0 {
                        with_region(v, region::SIMPLE, || visit(v, &fv))?
                    } else if f.flags & reflect::FIELD_SEQ_HASH_DEF_PATTERN != 0 {
                        with_region(v, region::PATTERN, || visit(v, &fv))?
                    } else {
                        visit(v, &fv)?
                    };
                    if r.is_some() {
                        return Ok(r);
                    }
                }
                Ok(None)
            };
            let free_var = reflect::metadata(t).is_some_and(|m| m.structural_eq_hash_kind == kind::FREE_VAR);
            if payload(v).region.get() == region::SIMPLE && free_var {
                with_region(v, region::NONE, fields)
            } else {
                fields()
            }
        }
    }
}

fn new_visitor(mode: Mode) -> ObjectRef {
    make_object(
        visitor_type(),
        VisitorPayload {
            vtable: std::ptr::null(),
            region: Cell::new(region::NONE),
            mode,
            active: cont::InProgress::default(),
        },
    )
}

fn visitor_arg(name: &str, a: &[TVMFFIAny]) -> FfiResult<ObjectRef> {
    reflect::arg_obj(name, a, 0, visitor_type())
}

fn result(r: Option<ObjectRef>) -> Any {
    Any::opt_object(r)
}

/// Adds the visiting globals.
pub(crate) fn register(b: &mut Builder) {
    reflect::def_metadata(visitor_type(), 24 + std::mem::size_of::<VisitorPayload>(), kind::UNSUPPORTED);
    b.add("ffi.StructuralWalk", |a| {
        let n = "ffi.StructuralWalk";
        expect_args(n, a, 4)?;
        let root = arg_any(n, a, 0)?;
        let plain = callback_entries(n, &arg_any(n, a, 1)?)?;
        let with_kind = callback_entries(n, &arg_any(n, a, 2)?)?;
        let order = arg_any(n, a, 3)?.as_i64().unwrap_or(1);
        let v = new_visitor(Mode::Walk { pre: order == 0, plain, with_kind });
        Ok(result(visit(&v, &root)?))
    });
    b.add("ffi.StructuralVisit", |a| {
        let n = "ffi.StructuralVisit";
        expect_args(n, a, 2)?;
        let root = arg_any(n, a, 0)?;
        let callbacks = callback_entries(n, &arg_any(n, a, 1)?)?;
        let v = new_visitor(Mode::Visit { callbacks });
        Ok(result(visit(&v, &root)?))
    });
    b.add("ffi.StructuralVisitorVisit", |a| {
        let n = "ffi.StructuralVisitorVisit";
        expect_args(n, a, 2)?;
        Ok(result(visit(&visitor_arg(n, a)?, &arg_any(n, a, 1)?)?))
    });
    b.add("ffi.StructuralVisitorDefaultVisit", |a| {
        let n = "ffi.StructuralVisitorDefaultVisit";
        expect_args(n, a, 2)?;
        Ok(result(default_visit(&visitor_arg(n, a)?, &arg_any(n, a, 1)?)?))
    });
    b.add("ffi.StructuralVisitorDefRegionKind", |a| {
        let n = "ffi.StructuralVisitorDefRegionKind";
        expect_args(n, a, 1)?;
        Ok(Any::int(payload(&visitor_arg(n, a)?).region.get() as i64))
    });
    b.add("ffi.StructuralVisitorWithDefRegionKind", |a| {
        let n = "ffi.StructuralVisitorWithDefRegionKind";
        expect_args(n, a, 3)?;
        let v = visitor_arg(n, a)?;
        let k =
            arg_any(n, a, 1)?.as_i64().ok_or_else(|| FfiError::type_error(format!("`{n}`: kind must be an int")))?;
        let f = arg_any(n, a, 2)?.as_object().filter(|f| f.type_index() == ti::FUNCTION);
        let f = f.ok_or_else(|| FfiError::type_error(format!("`{n}`: callback must be a function")))?;
        with_region(&v, k as i32, || function::call_any(&f, &[]))
    });
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::{Arc, Mutex};

    #[test]
    fn walks_in_order_and_stops_at_an_interrupt() {
        let seen = Arc::new(Mutex::new(Vec::new()));
        let s2 = seen.clone();
        let f = function::from_fn(move |a| {
            let v = crate::any::view_as_i64(&a[0]).unwrap_or(0);
            s2.lock().unwrap().push(v);
            Ok(if v == 2 { Any::object(super::super::make_interrupt(Any::int(v))) } else { Any::none() })
        });
        let root = cont::make_array(vec![Any::int(1), cont::make_array(vec![Any::int(2), Any::int(3)])]);
        let v = new_visitor(Mode::Walk { pre: true, plain: vec![(ti::INT, f, false)], with_kind: Vec::new() });
        let r = visit(&v, &root).unwrap().expect("interrupted");
        assert_eq!(r.type_index(), ti::VISIT_INTERRUPT);
        assert_eq!(*seen.lock().unwrap(), vec![1, 2]);
        assert!(type_match(ti::SMALL_STR, ti::STR));
        assert!(type_match(ti::ARRAY, ti::OBJECT));
        assert!(!type_match(ti::INT, ti::FLOAT));
    }
}
