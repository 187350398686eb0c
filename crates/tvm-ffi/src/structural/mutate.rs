//! Structural rewriting (`ffi.StructuralMap`, `ffi.StructuralMutate` and the
//! `ffi.StructuralMutator*` methods): `map(x) = post(D(pre(x)))` where the default descent `D`
//! rebuilds containers (values of maps, never keys) and objects (reflected fields, copied through
//! `__ffi_shallow_copy__` or a fresh object) only where something changed, mutates arrays in
//! place along uniquely owned paths, and keeps the variable remap of free variables and DAG
//! nodes so that every use of a rewritten definition sees the same replacement.

use super::cont;
use super::equal::region;
use super::error_context;
use super::reflect::{self, kind};
use super::visit::{callback_entries, type_match};
use crate::any::{Any, TVMFFIAny};
use crate::containers::array::TVMFFISeqCell;
use crate::globals::{arg_any, expect_args};
use crate::object::{make_object, ObjectRef};
use crate::registry::Builder;
use crate::{function, ti, types, FfiError, FfiResult};
use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::sync::OnceLock;

/// A rewrite's outcome: `None` when the value is unchanged.
pub(crate) type Mutated = FfiResult<Option<Any>>;

enum Mode {
    Map { pre: bool, plain: Vec<(i32, ObjectRef, bool)>, with_kind: Vec<(i32, ObjectRef, bool)> },
    Mutate { callbacks: Vec<(i32, ObjectRef, bool)> },
}

/// `StructuralMutatorObj` after the header: the C++ layout's vtable slot (null: native C++
/// hooks are refused) and region, then this library's state.
#[repr(C)]
pub(crate) struct MutatorPayload {
    vtable: *const std::ffi::c_void,
    region: Cell<i32>,
    mode: Mode,
    /// Variable (or DAG node) address -> (the variable, kept alive; its replacement, None when
    /// it stays as it is).
    remap: RefCell<HashMap<usize, (ObjectRef, Option<Any>)>>,
    active: super::cont::InProgress,
}

// SAFETY: a mutator is used by the thread that runs its rewrite (Python holds it only inside
// callbacks of that rewrite); the raw vtable pointer is always null.
unsafe impl Send for MutatorPayload {}
// SAFETY: as above.
unsafe impl Sync for MutatorPayload {}

/// The type index of `ffi.StructuralMutator`.
pub(crate) fn mutator_type() -> i32 {
    static T: OnceLock<i32> = OnceLock::new();
    *T.get_or_init(|| reflect::type_index_of("ffi.StructuralMutator"))
}

fn payload(m: &ObjectRef) -> &MutatorPayload {
    // SAFETY: callers check the type: a StructuralMutator made here holds a MutatorPayload.
    unsafe { m.payload::<MutatorPayload>() }
}

/// Whether a rewrite's result is the input itself (same object or bits; strings and bytes by
/// content, since a callback returning the same text makes a new string object).
fn same(a: &Any, b: &Any) -> bool {
    for bytes in [false, true] {
        if let (Some(x), Some(y)) = (cont::str_bytes(a, bytes), cont::str_bytes(b, bytes)) {
            return x == y;
        }
    }
    a.type_index() == b.type_index() && a.raw().bits() == b.raw().bits()
}

fn changed(old: &Any, new: Any) -> Option<Any> {
    (!same(old, &new)).then_some(new)
}

fn with_region<T>(m: &ObjectRef, kind: i32, f: impl FnOnce() -> T) -> T {
    let p = payload(m);
    if p.region.get() == region::PATTERN {
        return f();
    }
    let saved = p.region.replace(kind);
    let r = f();
    p.region.set(saved);
    r
}

fn unique(v: &Any) -> bool {
    v.as_object().map_or(true, |o| o.use_count() <= 2)
}

/// A callback's answer as tvm-ffi's `Expected<Any>` reads it: an `ffi.Error` returned is a
/// failure, `ffi.Unchanged` keeps the value; a failure names `x` in its visit error context.
fn callback_result(r: FfiResult<Any>, x: &Any) -> FfiResult<Option<Any>> {
    match r {
        Ok(v) if v.type_index() == ti::ERROR => {
            Err(error_context::annotate(FfiError::from_object(v.as_object().expect("error object")), x))
        }
        Ok(v) if v.type_index() == ti::UNCHANGED => Ok(None),
        Ok(v) => Ok(Some(v)),
        Err(e) => Err(error_context::annotate(e, x)),
    }
}

fn map_callback(m: &ObjectRef, x: &Any) -> FfiResult<Option<Any>> {
    let Mode::Map { plain, with_kind, .. } = &payload(m).mode else { return Ok(None) };
    let t = x.type_index();
    if let Some((_, f, _)) = plain.iter().find(|e| type_match(t, e.0)) {
        return callback_result(function::call_any(f, std::slice::from_ref(x)), x);
    }
    if let Some((_, f, _)) = with_kind.iter().find(|e| type_match(t, e.0)) {
        return callback_result(function::call_any(f, &[x.clone(), Any::int(payload(m).region.get() as i64)]), x);
    }
    Ok(None)
}

/// Rewrites one value (`owned`: this is the only reference, so it may change in place).
pub(crate) fn mutate(m: &ObjectRef, x: Any, owned: bool) -> Mutated {
    match &payload(m).mode {
        Mode::Map { pre, .. } => {
            let pre = *pre;
            let mut cur = x.clone();
            let mut cur_owned = owned;
            if pre {
                if let Some(r) = map_callback(m, &x)? {
                    cur_owned = false;
                    cur = r;
                }
            }
            if let Some(d) = default_mutate(m, cur.clone(), cur_owned)? {
                cur = d;
            }
            if !pre {
                if let Some(r) = map_callback(m, &cur)? {
                    cur = r;
                }
            }
            Ok(changed(&x, cur))
        }
        Mode::Mutate { callbacks } => {
            let t = x.type_index();
            match callbacks.iter().find(|e| type_match(t, e.0)) {
                Some((_, f, with_mode)) => {
                    let mut args = vec![x.clone(), Any::object(m.clone())];
                    if *with_mode {
                        args.push(Any::int(owned as i64));
                    }
                    let r = callback_result(function::call_any(f, &args), &x)?.unwrap_or_else(|| x.clone());
                    Ok(changed(&x, r))
                }
                None => default_mutate(m, x, owned),
            }
        }
    }
}

/// A copy of an object to write changed fields into.
fn shallow_copy(o: &ObjectRef) -> FfiResult<ObjectRef> {
    let t = o.type_index();
    if let Some(f) = types::attr_value("__ffi_shallow_copy__", t).and_then(|f| f.as_object()) {
        let r = function::call_any(&f, &[Any::object(o.clone())])?;
        return r.into_object().map_err(|_| FfiError::type_error("__ffi_shallow_copy__ did not return an object"));
    }
    let n = reflect::create_empty(t)?;
    for f in reflect::all_fields(t) {
        reflect::set_field(&n, &f, &reflect::get_field(o, &f)?)?;
    }
    Ok(n)
}

/// The registered (`__s_mutate__`) or default rewrite of a value's children.
pub(crate) fn default_mutate(m: &ObjectRef, x: Any, owned: bool) -> Mutated {
    let t = x.type_index();
    if let Some(hook) = types::attr_value("__s_mutate__", t).filter(|h| {
        // The native hooks of containers and leaves (cxx/structural_hooks.cc) serve C++
        // engines; this traversal handles those types itself.
        h.type_index() == ti::FUNCTION || !super::native_builtin(t)
    }) {
        let f = hook
            .as_object()
            .filter(|f| f.type_index() == ti::FUNCTION)
            .ok_or_else(|| FfiError::type_error("__s_mutate__ must be an ffi.Function for this library"))?;
        let r = callback_result(function::call_any(&f, &[Any::object(m.clone()), x.clone()]), &x)?;
        return Ok(r.and_then(|r| changed(&x, r)));
    }
    if t < ti::STATIC_OBJECT_BEGIN {
        return Ok(None);
    }
    let o = x.as_object().expect("object");
    let addr = o.as_ptr() as usize;
    payload(m)
        .active
        .run(addr, "structural mutate", || default_mutate_object(m, x.clone(), t, &o, owned))
        .map_err(|e| error_context::annotate(e, &x))
}

fn default_mutate_object(m: &ObjectRef, x: Any, t: i32, o: &ObjectRef, owned: bool) -> Mutated {
    let o = o.clone();
    match t {
        ti::ARRAY if owned => {
            // In place: the elements are ours to replace.
            // SAFETY: an ffi.Array holds a TVMFFISeqCell whose data has `size` owned cells; we
            // hold the only other reference, and write each slot back before anyone reads it.
            let cell = unsafe { &*(o.payload::<TVMFFISeqCell>() as *const TVMFFISeqCell) };
            let mut any_changed = false;
            for i in 0..cell.size.max(0) as usize {
                // SAFETY: as above; `i < size`.
                let slot = unsafe { &mut *cell.data.cast::<Any>().add(i) };
                let item = std::mem::take(slot);
                let child_owned = unique(&item);
                let r = mutate(m, item.clone(), child_owned);
                match r {
                    Ok(Some(v)) => {
                        *slot = v;
                        any_changed = true;
                    }
                    Ok(None) => *slot = item,
                    Err(e) => {
                        *slot = item;
                        return Err(e);
                    }
                }
            }
            Ok(any_changed.then_some(x))
        }
        ti::ARRAY | ti::LIST => {
            let items = cont::seq(&o).to_vec();
            let mut out = Vec::with_capacity(items.len());
            let mut any_changed = false;
            for it in items {
                match mutate(m, it.clone(), false)? {
                    Some(v) => {
                        any_changed = true;
                        out.push(v);
                    }
                    None => out.push(it),
                }
            }
            if !any_changed {
                return Ok(None);
            }
            Ok(Some(if t == ti::LIST { cont::make_list(out)? } else { cont::make_array(out) }))
        }
        ti::MAP | ti::DICT => {
            let mut any_changed = false;
            let mut out = Vec::new();
            for (k, v) in cont::map_items(&o)? {
                match mutate(m, v.clone(), false)? {
                    Some(nv) => {
                        any_changed = true;
                        out.push((k, nv));
                    }
                    None => out.push((k, v)),
                }
            }
            if !any_changed {
                return Ok(None);
            }
            Ok(Some(if t == ti::DICT { cont::make_dict(out)? } else { cont::make_map(out)? }))
        }
        _ => object_mutate(m, &o, owned),
    }
}

fn object_mutate(m: &ObjectRef, o: &ObjectRef, owned: bool) -> Mutated {
    let t = o.type_index();
    let k = reflect::metadata(t).map_or(kind::UNSUPPORTED, |md| md.structural_eq_hash_kind);
    let (free_var, dag) = (k == kind::FREE_VAR, k == kind::DAG_NODE);
    let addr = o.as_ptr() as usize;
    if free_var || dag {
        if let Some((_, r)) = payload(m).remap.borrow().get(&addr) {
            return Ok(r.clone());
        }
    }
    let reg = payload(m).region.get();
    if free_var && reg == region::NONE {
        return Ok(None);
    }
    let fields = reflect::all_fields(t);
    let descend = || -> FfiResult<Vec<(usize, Any)>> {
        let mut out = Vec::new();
        for (i, f) in fields.iter().enumerate() {
            if f.flags & reflect::FIELD_SEQ_HASH_IGNORE != 0 {
                continue;
            }
            let v = reflect::get_field(o, f)?;
            let r = if f.flags & reflect::FIELD_SEQ_HASH_DEF_SIMPLE != 0 {
                with_region(m, region::SIMPLE, || mutate(m, v, false))?
            } else if f.flags & reflect::FIELD_SEQ_HASH_DEF_PATTERN != 0 {
                with_region(m, region::PATTERN, || mutate(m, v, false))?
            } else {
                mutate(m, v, false)?
            };
            if let Some(nv) = r {
                out.push((i, nv));
            }
        }
        Ok(out)
    };
    let updates = if free_var && reg == region::SIMPLE { with_region(m, region::NONE, descend)? } else { descend()? };
    let result = if updates.is_empty() {
        None
    } else {
        let in_place = owned && updates.iter().all(|(i, _)| !fields[*i].setter.is_null());
        let target = if in_place { o.clone() } else { shallow_copy(o)? };
        for (i, v) in &updates {
            reflect::set_field(&target, &fields[*i], v)?;
        }
        Some(Any::object(target))
    };
    if (free_var || dag) && (dag || payload(m).region.get() == region::PATTERN || result.is_some()) {
        payload(m).remap.borrow_mut().insert(addr, (o.clone(), result.clone()));
    }
    Ok(result)
}

fn new_mutator(mode: Mode) -> ObjectRef {
    make_object(
        mutator_type(),
        MutatorPayload {
            vtable: std::ptr::null(),
            region: Cell::new(region::NONE),
            mode,
            remap: RefCell::new(HashMap::new()),
            active: super::cont::InProgress::default(),
        },
    )
}

fn mutator_arg(name: &str, a: &[TVMFFIAny]) -> FfiResult<ObjectRef> {
    reflect::arg_obj(name, a, 0, mutator_type())
}

/// Runs a rewrite from the root: the result, or the root itself when nothing changed.
fn run(m: &ObjectRef, root: Any) -> FfiResult<Any> {
    let owned = unique(&root);
    let r = mutate(m, root.clone(), owned)?;
    Ok(r.unwrap_or(root))
}

/// Adds the rewriting globals.
pub(crate) fn register(b: &mut Builder) {
    reflect::def_metadata(mutator_type(), 24 + std::mem::size_of::<MutatorPayload>(), kind::UNSUPPORTED);
    b.add("ffi.StructuralMap", |a| {
        let n = "ffi.StructuralMap";
        expect_args(n, a, 4)?;
        let root = arg_any(n, a, 0)?;
        let plain = callback_entries(n, &arg_any(n, a, 1)?)?;
        let with_kind = callback_entries(n, &arg_any(n, a, 2)?)?;
        let order = arg_any(n, a, 3)?.as_i64().unwrap_or(1);
        run(&new_mutator(Mode::Map { pre: order == 0, plain, with_kind }), root)
    });
    b.add("ffi.StructuralMutate", |a| {
        let n = "ffi.StructuralMutate";
        expect_args(n, a, 2)?;
        let root = arg_any(n, a, 0)?;
        let callbacks = callback_entries(n, &arg_any(n, a, 1)?)?;
        run(&new_mutator(Mode::Mutate { callbacks }), root)
    });
    b.add("ffi.StructuralMutatorMutate", |a| {
        let n = "ffi.StructuralMutatorMutate";
        expect_args(n, a, 2)?;
        let x = arg_any(n, a, 1)?;
        Ok(mutate(&mutator_arg(n, a)?, x.clone(), false)?.unwrap_or(x))
    });
    b.add("ffi.StructuralMutatorDefaultMutate", |a| {
        let n = "ffi.StructuralMutatorDefaultMutate";
        expect_args(n, a, 2)?;
        let x = arg_any(n, a, 1)?;
        Ok(default_mutate(&mutator_arg(n, a)?, x.clone(), false)?.unwrap_or(x))
    });
    b.add("ffi.StructuralMutatorDefRegionKind", |a| {
        let n = "ffi.StructuralMutatorDefRegionKind";
        expect_args(n, a, 1)?;
        Ok(Any::int(payload(&mutator_arg(n, a)?).region.get() as i64))
    });
    b.add("ffi.StructuralMutatorWithDefRegionKind", |a| {
        let n = "ffi.StructuralMutatorWithDefRegionKind";
        expect_args(n, a, 3)?;
        let m = mutator_arg(n, a)?;
        let k =
            arg_any(n, a, 1)?.as_i64().ok_or_else(|| FfiError::type_error(format!("`{n}`: kind must be an int")))?;
        let f = arg_any(n, a, 2)?.as_object().filter(|f| f.type_index() == ti::FUNCTION);
        let f = f.ok_or_else(|| FfiError::type_error(format!("`{n}`: callback must be a function")))?;
        with_region(&m, k as i32, || function::call_any(&f, &[]))
    });
    b.add("ffi.StructuralMutatorVarRemapGet", |a| {
        let n = "ffi.StructuralMutatorVarRemapGet";
        expect_args(n, a, 2)?;
        let m = mutator_arg(n, a)?;
        let v = arg_any(n, a, 1)?;
        let Some(o) = v.as_object() else { return Ok(Any::none()) };
        let r = payload(&m)
            .remap
            .borrow()
            .get(&(o.as_ptr() as usize))
            .map(|(k, r)| r.clone().unwrap_or(Any::object(k.clone())));
        Ok(r.unwrap_or_default())
    });
    b.add("ffi.StructuralMutatorVarRemapSet", |a| {
        let n = "ffi.StructuralMutatorVarRemapSet";
        expect_args(n, a, 3)?;
        let m = mutator_arg(n, a)?;
        let v = arg_any(n, a, 1)?;
        let o = v.as_object().ok_or_else(|| FfiError::type_error(format!("`{n}`: the variable must be an object")))?;
        let k = reflect::metadata(o.type_index()).map_or(kind::UNSUPPORTED, |md| md.structural_eq_hash_kind);
        if k != kind::FREE_VAR && k != kind::DAG_NODE {
            return Err(FfiError::type_error(format!(
                "`{n}`: `{}` is neither a free variable nor a DAG node",
                types::type_key(o.type_index())
            )));
        }
        let mapped = arg_any(n, a, 2)?;
        payload(&m).remap.borrow_mut().insert(o.as_ptr() as usize, (o, Some(mapped)));
        Ok(Any::none())
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    fn add_one() -> Vec<(i32, ObjectRef, bool)> {
        let f = function::from_fn(|a| Ok(Any::int(crate::any::view_as_i64(&a[0]).unwrap_or(0) + 1)));
        vec![(ti::INT, f, false)]
    }

    #[test]
    fn map_copies_shared_arrays_and_reuses_unchanged() {
        let root = cont::make_array(vec![Any::int(1), cont::make_array(vec![Any::int(2)])]);
        let keep = root.clone();
        let m = new_mutator(Mode::Map { pre: false, plain: add_one(), with_kind: Vec::new() });
        let out = run(&m, root.clone()).unwrap();
        assert!(!same(&out, &keep));
        let o = out.as_object().unwrap();
        assert_eq!(cont::seq(&o)[0].as_i64(), Some(2));
        let inner = cont::seq(&o)[1].as_object().unwrap();
        assert_eq!(cont::seq(&inner)[0].as_i64(), Some(3));
        // the original is untouched
        assert_eq!(cont::seq(&keep.as_object().unwrap())[0].as_i64(), Some(1));
        // nothing matched: the same root comes back
        let m = new_mutator(Mode::Map { pre: true, plain: Vec::new(), with_kind: Vec::new() });
        assert!(same(&run(&m, keep.clone()).unwrap(), &keep));
    }

    #[test]
    fn callbacks_answer_as_expected_does() {
        // ffi.Unchanged from an array callback keeps the array, and (pre-order) its descent.
        let unchanged = function::from_fn(|_| {
            // SAFETY: a POD cell of ffi.Unchanged (no payload).
            Ok(unsafe { Any::from_raw(TVMFFIAny::with_bits(ti::UNCHANGED, 0)) })
        });
        let mut cbs = vec![(ti::ARRAY, unchanged, false)];
        cbs.extend(add_one());
        let root = cont::make_array(vec![Any::int(1)]);
        let keep = root.clone();
        for pre in [true, false] {
            let m = new_mutator(Mode::Map { pre, plain: cbs.clone(), with_kind: Vec::new() });
            let out = run(&m, root.clone()).unwrap();
            assert_eq!(cont::seq(&out.as_object().unwrap())[0].as_i64(), Some(2));
        }
        assert_eq!(cont::seq(&keep.as_object().unwrap())[0].as_i64(), Some(1));
        // An ffi.Error returned by a callback fails the map, naming the node it ran on (the
        // array as descended: post-order) and then nothing above it.
        let fail = function::from_fn(|_| Ok(Any::object(FfiError::value("returned failure").into_object())));
        let mut cbs = vec![(ti::ARRAY, fail, false)];
        cbs.extend(add_one());
        let m = new_mutator(Mode::Map { pre: false, plain: cbs, with_kind: Vec::new() });
        let err = run(&m, root.clone()).unwrap_err();
        assert_eq!(err.message(), "returned failure");
        let ctx = crate::error::extra_context(&err.into_object()).expect("a visit error context");
        assert_eq!(ctx.type_index(), error_context::context_type());
        // SAFETY: an ffi.VisitErrorContext.
        let nodes = unsafe { ctx.payload::<error_context::ContextPayload>() }.reverse_visit_pattern.clone().unwrap();
        let nodes = cont::seq(&nodes).to_vec();
        assert_eq!(nodes.len(), 1);
        let descended = nodes[0].as_object().unwrap();
        assert_eq!(cont::seq(&descended)[0].as_i64(), Some(2));
    }

    #[test]
    fn errors_name_the_failing_node_and_its_ancestors() {
        let boom = function::from_fn(|_| Err(FfiError::value("boom")));
        let inner = cont::make_array(vec![Any::string("x")]);
        let root = cont::make_array(vec![inner.clone()]);
        let m = new_mutator(Mode::Map { pre: true, plain: vec![(ti::STR, boom, false)], with_kind: Vec::new() });
        let err = run(&m, root.clone()).unwrap_err();
        let ctx = crate::error::extra_context(&err.into_object()).unwrap();
        // SAFETY: an ffi.VisitErrorContext.
        let nodes = unsafe { ctx.payload::<error_context::ContextPayload>() }.reverse_visit_pattern.clone().unwrap();
        let nodes = cont::seq(&nodes).to_vec();
        // Innermost first; the failing "x" is a small string in its cell, not an object, so
        // (as in tvm-ffi) the arrays around it are what the context names.
        assert_eq!(nodes.len(), 2);
        assert!(nodes[0].as_object().unwrap().same_as(&inner.as_object().unwrap()));
        assert!(nodes[1].as_object().unwrap().same_as(&root.as_object().unwrap()));
    }

    #[test]
    fn owned_arrays_change_in_place() {
        let root = cont::make_array(vec![Any::int(1)]);
        let ptr = root.raw().bits();
        let m = new_mutator(Mode::Map { pre: false, plain: add_one(), with_kind: Vec::new() });
        let out = run(&m, root).unwrap();
        assert_eq!(out.raw().bits(), ptr);
        assert_eq!(cont::seq(&out.as_object().unwrap())[0].as_i64(), Some(2));
    }
}
