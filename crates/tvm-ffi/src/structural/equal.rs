//! Structural equality (`ffi.StructuralEqual`, `ffi.GetFirstStructuralMismatch`), tvm-ffi's
//! algorithm: values by content, containers element-wise, objects field by field through their
//! reflection under their `structural_eq_hash_kind` (free variables map one to one inside
//! definition regions, DAG nodes keep their sharing, unique instances compare by identity),
//! with the `__s_equal__` hook for types that bring their own.

use super::access_path::{self, make_step, step_kind};
use super::cont;
use super::reflect::{self, kind};
use crate::any::{Any, TVMFFIAny};
use crate::object::ObjectRef;
use crate::{function, ti, types, FfiError, FfiResult};
use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use tvm_runtime_classic::abi::DLTensor;

/// `kTVMFFIDefRegionKind*`.
pub(crate) mod region {
    /// Not in a definition region.
    pub(crate) const NONE: i32 = 0;
    /// A pattern region (every free variable may be defined).
    pub(crate) const PATTERN: i32 = 1;
    /// A simple region (the variable itself is defined, not its type).
    pub(crate) const SIMPLE: i32 = 2;
}

/// The bits that mark a definition field.
pub(crate) const DEF_ANY: i64 = reflect::FIELD_SEQ_HASH_DEF_PATTERN | reflect::FIELD_SEQ_HASH_DEF_SIMPLE;

/// The region kind a definition field (or hook request) switches to.
pub(crate) fn enter_region(current: i32, flags_or_kind: i32) -> i32 {
    if current == region::PATTERN {
        region::PATTERN
    } else {
        flags_or_kind
    }
}

/// Checks that a type supports structural comparison; its kind.
pub(crate) fn seq_kind_of(type_index: i32) -> FfiResult<i32> {
    let key = types::type_key(type_index);
    let m = reflect::metadata(type_index).ok_or_else(|| {
        FfiError::type_error(format!(
            "Type metadata is not set for type `{key}`, so StructuralHash is not supported for this type"
        ))
    })?;
    if m.structural_eq_hash_kind == kind::UNSUPPORTED {
        return Err(FfiError::type_error(format!(
            "_type_s_eq_hash_kind is not set for type `{key}`, so StructuralHash is not supported for this type"
        )));
    }
    Ok(m.structural_eq_hash_kind)
}

/// The DLTensor of an `ffi.Tensor`.
pub(crate) fn tensor_of(o: &ObjectRef) -> &DLTensor {
    // SAFETY: a tensor object holds a DLTensor right after the header.
    unsafe { o.payload::<DLTensor>() }
}

/// The bytes of a CPU, contiguous tensor (an error otherwise).
pub(crate) fn tensor_bytes(t: &DLTensor) -> FfiResult<&[u8]> {
    if t.device.device_type != 1 {
        return Err(FfiError::new("InternalError", "can only compare or hash CPU tensor"));
    }
    // SAFETY: shape and strides hold ndim integers (strides may be null).
    let (shape, strides) = unsafe {
        let n = t.ndim.max(0) as usize;
        let sh = if n == 0 || t.shape.is_null() { &[][..] } else { std::slice::from_raw_parts(t.shape, n) };
        let st = if t.strides.is_null() || n == 0 { None } else { Some(std::slice::from_raw_parts(t.strides, n)) };
        (sh, st)
    };
    if let Some(st) = strides {
        let mut expect = 1i64;
        for i in (0..shape.len()).rev() {
            if shape[i] != 1 && st[i] != expect {
                return Err(FfiError::new("InternalError", "Can only compare or hash contiguous tensor"));
            }
            expect *= shape[i];
        }
    }
    let numel: i64 = shape.iter().product();
    let size = (numel.max(0) as usize) * ((t.dtype.bits as usize * t.dtype.lanes as usize).div_ceil(8));
    if size == 0 || t.data.is_null() {
        return Ok(&[]);
    }
    // SAFETY: a CPU contiguous tensor holds `size` bytes at data + byte_offset.
    Ok(unsafe { std::slice::from_raw_parts((t.data as *const u8).add(t.byte_offset as usize), size) })
}

fn shape_of(t: &DLTensor) -> &[i64] {
    if t.ndim <= 0 || t.shape.is_null() {
        return &[];
    }
    // SAFETY: shape holds ndim integers.
    unsafe { std::slice::from_raw_parts(t.shape, t.ndim as usize) }
}

/// One comparison's state.
pub(crate) struct Equal {
    region: Cell<i32>,
    skip_tensor_content: bool,
    paths: RefCell<Option<(Vec<ObjectRef>, Vec<ObjectRef>)>>,
    lhs_to_rhs: RefCell<HashMap<usize, ObjectRef>>,
    rhs_to_lhs: RefCell<HashMap<usize, ObjectRef>>,
    keep: RefCell<Vec<ObjectRef>>,
    active: cont::InProgress,
}

impl Equal {
    /// A comparison (`map_free_vars` starts in a pattern region).
    pub(crate) fn new(map_free_vars: bool, skip_tensor_content: bool, record_path: bool) -> Self {
        Equal {
            region: Cell::new(if map_free_vars { region::PATTERN } else { region::NONE }),
            skip_tensor_content,
            paths: RefCell::new(record_path.then(|| (Vec::new(), Vec::new()))),
            lhs_to_rhs: RefCell::new(HashMap::new()),
            rhs_to_lhs: RefCell::new(HashMap::new()),
            keep: RefCell::new(Vec::new()),
            active: cont::InProgress::default(),
        }
    }

    fn recording(&self) -> bool {
        self.paths.borrow().is_some()
    }

    fn push(&self, l: ObjectRef, r: ObjectRef) {
        if let Some((a, b)) = self.paths.borrow_mut().as_mut() {
            a.push(l);
            b.push(r);
        }
    }

    /// The mismatch paths found (after a failed compare with recording on).
    pub(crate) fn take_paths(&self) -> Option<(ObjectRef, ObjectRef)> {
        let (l, r) = self.paths.borrow_mut().take()?;
        Some((access_path::from_steps(l.into_iter().rev()), access_path::from_steps(r.into_iter().rev())))
    }

    /// Compares two values.
    pub(crate) fn any(&self, lhs: &Any, rhs: &Any) -> FfiResult<bool> {
        let (lt, rt) = (lhs.type_index(), rhs.type_index());
        if lt != rt {
            for bytes in [false, true] {
                if let (Some(a), Some(b)) = (cont::str_bytes(lhs, bytes), cont::str_bytes(rhs, bytes)) {
                    return Ok(a == b);
                }
            }
            return Ok(false);
        }
        if lt < ti::STATIC_OBJECT_BEGIN {
            if lt == ti::FLOAT {
                let (a, b) = (lhs.as_f64().unwrap_or(0.0), rhs.as_f64().unwrap_or(0.0));
                if a.is_nan() {
                    return Ok(b.is_nan());
                }
            }
            return Ok(lhs.raw().small_len == rhs.raw().small_len && lhs.raw().bits() == rhs.raw().bits());
        }
        let (l, r) = (lhs.as_object().expect("object"), rhs.as_object().expect("object"));
        match lt {
            ti::STR | ti::BYTES => Ok(cont::str_bytes(lhs, lt == ti::BYTES) == cont::str_bytes(rhs, lt == ti::BYTES)),
            ti::BIG_INT => Ok(l.same_as(&r) || super::hash::bigint_words(&l) == super::hash::bigint_words(&r)),
            ti::ARRAY => self.seq(cont::seq(&l), cont::seq(&r)),
            ti::MAP => self.map(&l, &r),
            ti::SHAPE => Ok(cont::shape(&l) == cont::shape(&r)),
            ti::TENSOR => self.tensor(&l, &r),
            ti::LIST | ti::DICT => self.active.run(l.as_ptr() as usize, "StructuralEqual", || {
                if lt == ti::LIST {
                    self.seq(cont::seq(&l), cont::seq(&r))
                } else {
                    self.map(&l, &r)
                }
            }),
            _ => self.active.run(l.as_ptr() as usize, "StructuralEqual", || self.object(&l, &r)),
        }
    }

    fn tensor(&self, l: &ObjectRef, r: &ObjectRef) -> FfiResult<bool> {
        if l.same_as(r) {
            return Ok(true);
        }
        let (a, b) = (tensor_of(l), tensor_of(r));
        if shape_of(a) != shape_of(b) || a.dtype != b.dtype {
            return Ok(false);
        }
        if self.skip_tensor_content {
            return Ok(true);
        }
        Ok(tensor_bytes(a)? == tensor_bytes(b)?)
    }

    fn seq(&self, l: &[Any], r: &[Any]) -> FfiResult<bool> {
        if l.len() != r.len() && !self.recording() {
            return Ok(false);
        }
        for (i, (a, b)) in l.iter().zip(r).enumerate() {
            if !self.any(a, b)? {
                let k = Any::int(i as i64);
                self.push(make_step(step_kind::ARRAY_ITEM, k.clone()), make_step(step_kind::ARRAY_ITEM, k));
                return Ok(false);
            }
        }
        if l.len() == r.len() {
            return Ok(true);
        }
        let n = Any::int(l.len().min(r.len()) as i64);
        let (item, missing) =
            (make_step(step_kind::ARRAY_ITEM, n.clone()), make_step(step_kind::ARRAY_ITEM_MISSING, n));
        if l.len() > r.len() {
            self.push(item, missing);
        } else {
            self.push(missing, item);
        }
        Ok(false)
    }

    fn mapped(&self, k: &Any, lhs_side: bool) -> Any {
        let Some(o) = k.as_object() else { return k.clone() };
        let m = if lhs_side { self.lhs_to_rhs.borrow() } else { self.rhs_to_lhs.borrow() };
        m.get(&(o.as_ptr() as usize)).map(|x| Any::object(x.clone())).unwrap_or_else(|| k.clone())
    }

    fn map(&self, l: &ObjectRef, r: &ObjectRef) -> FfiResult<bool> {
        let (ln, rn) = (cont::map_size(l)?, cont::map_size(r)?);
        if ln != rn && !self.recording() {
            return Ok(false);
        }
        for (k, v) in cont::map_items(l)? {
            let rk = self.mapped(&k, true);
            match cont::map_get(r, &rk)? {
                None => {
                    self.push(make_step(step_kind::MAP_ITEM, k), make_step(step_kind::MAP_ITEM_MISSING, rk));
                    return Ok(false);
                }
                Some(rv) => {
                    if !self.any(&v, &rv)? {
                        self.push(make_step(step_kind::MAP_ITEM, k), make_step(step_kind::MAP_ITEM, rk));
                        return Ok(false);
                    }
                }
            }
        }
        if ln == rn {
            return Ok(true);
        }
        for (k, _) in cont::map_items(r)? {
            let lk = self.mapped(&k, false);
            if cont::map_get(l, &lk)?.is_none() {
                self.push(make_step(step_kind::MAP_ITEM_MISSING, lk), make_step(step_kind::MAP_ITEM, k));
                return Ok(false);
            }
        }
        Ok(false)
    }

    fn record_pair(&self, l: &ObjectRef, r: &ObjectRef) {
        self.lhs_to_rhs.borrow_mut().insert(l.as_ptr() as usize, r.clone());
        self.rhs_to_lhs.borrow_mut().insert(r.as_ptr() as usize, l.clone());
        let mut keep = self.keep.borrow_mut();
        keep.push(l.clone());
        keep.push(r.clone());
    }

    fn object(&self, l: &ObjectRef, r: &ObjectRef) -> FfiResult<bool> {
        let k = seq_kind_of(l.type_index())?;
        if k == kind::UNIQUE_INSTANCE {
            return Ok(l.same_as(r));
        }
        if k == kind::CONST_TREE_NODE && l.same_as(r) {
            return Ok(true);
        }
        if k == kind::DAG_NODE || k == kind::FREE_VAR {
            let found = self.lhs_to_rhs.borrow().get(&(l.as_ptr() as usize)).cloned();
            if let Some(m) = found {
                return Ok(m.same_as(r));
            }
            if self.rhs_to_lhs.borrow().contains_key(&(r.as_ptr() as usize)) {
                return Ok(false);
            }
        }
        if l.type_index() != r.type_index() {
            return Ok(false);
        }
        if k != kind::FREE_VAR {
            let ok = self.fields(l, r)?;
            if ok && k == kind::DAG_NODE {
                self.record_pair(l, r);
            }
            return Ok(ok);
        }
        let saved = self.region.get();
        if saved == region::SIMPLE {
            self.region.set(region::NONE);
        }
        let ok = self.fields(l, r);
        self.region.set(saved);
        if !ok? {
            return Ok(false);
        }
        if l.same_as(r) || saved != region::NONE {
            self.record_pair(l, r);
            return Ok(true);
        }
        Ok(false)
    }

    fn with_region<T>(&self, kind: i32, f: impl FnOnce() -> T) -> T {
        let saved = self.region.replace(enter_region(self.region.get(), kind));
        let r = f();
        self.region.set(saved);
        r
    }

    fn fields(&self, l: &ObjectRef, r: &ObjectRef) -> FfiResult<bool> {
        let t = l.type_index();
        if let Some(hook) = types::attr_value("__s_equal__", t) {
            return self.hook(&hook, l, r);
        }
        for f in reflect::all_fields(t) {
            if f.flags & reflect::FIELD_SEQ_HASH_IGNORE != 0 {
                continue;
            }
            let (a, b) = (reflect::get_field(l, &f)?, reflect::get_field(r, &f)?);
            let ok = if f.flags & DEF_ANY != 0 {
                let k =
                    if f.flags & reflect::FIELD_SEQ_HASH_DEF_SIMPLE != 0 { region::SIMPLE } else { region::PATTERN };
                self.with_region(k, || self.any(&a, &b))?
            } else {
                self.any(&a, &b)?
            };
            if !ok {
                let name = Any::string(&reflect::field_name(&f));
                self.push(make_step(step_kind::ATTR, name.clone()), make_step(step_kind::ATTR, name));
                return Ok(false);
            }
        }
        Ok(true)
    }

    fn hook(&self, hook: &Any, l: &ObjectRef, r: &ObjectRef) -> FfiResult<bool> {
        let hook = hook.as_object().ok_or_else(|| FfiError::type_error("__s_equal__ is not a function"))?;
        // The callback reaches this comparison only while the hook runs: the slot is cleared after.
        let slot: Arc<Mutex<usize>> = Arc::new(Mutex::new(self as *const Equal as usize));
        let s2 = slot.clone();
        let cb = function::from_fn(move |a: &[TVMFFIAny]| {
            let p = *s2.lock().unwrap_or_else(|e| e.into_inner());
            if p == 0 {
                return Err(FfiError::runtime("the __s_equal__ callback was called after its comparison ended"));
            }
            // SAFETY: `p` is the Equal that is running the hook (it outlives the hook call; the
            // slot is zeroed before it returns); Equal is only used through shared references.
            let me = unsafe { &*(p as *const Equal) };
            me.callback(a)
        });
        let args = [Any::object(l.clone()), Any::object(r.clone()), Any::object(cb)];
        let res = function::call_any(&hook, &args);
        *slot.lock().unwrap_or_else(|e| e.into_inner()) = 0;
        Ok(res?.as_bool().unwrap_or(false))
    }

    fn callback(&self, a: &[TVMFFIAny]) -> FfiResult<Any> {
        let n = "s_equal callback";
        crate::globals::expect_args(n, a, 4)?;
        let (l, r) = (crate::globals::arg_any(n, a, 0)?, crate::globals::arg_any(n, a, 1)?);
        let k = crate::any::view_as_i64(&a[2]).unwrap_or(0) as i32;
        let field = crate::globals::arg_any(n, a, 3)?;
        let k = if k == region::NONE { self.region.get() } else { k };
        let ok = self.with_region(k, || self.any(&l, &r))?;
        if !ok && self.recording() {
            self.push(make_step(step_kind::ATTR, field.clone()), make_step(step_kind::ATTR, field));
        }
        Ok(Any::bool(ok))
    }
}

/// `StructuralEqual::Equal`.
pub(crate) fn structural_equal(l: &Any, r: &Any, map_free_vars: bool, skip_tensor_content: bool) -> FfiResult<bool> {
    Equal::new(map_free_vars, skip_tensor_content, false).any(l, r)
}

/// `StructuralEqual::GetFirstMismatch`: None when equal, else the two paths.
pub(crate) fn first_mismatch(
    l: &Any,
    r: &Any,
    map_free_vars: bool,
    skip_tensor_content: bool,
) -> FfiResult<Option<(ObjectRef, ObjectRef)>> {
    let e = Equal::new(map_free_vars, skip_tensor_content, true);
    if e.any(l, r)? {
        return Ok(None);
    }
    Ok(e.take_paths())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_and_arrays() {
        let eq = |a: &Any, b: &Any| structural_equal(a, b, false, false).unwrap();
        assert!(eq(&Any::int(1), &Any::int(1)));
        assert!(!eq(&Any::int(1), &Any::float(1.0)));
        assert!(eq(&Any::float(f64::NAN), &Any::float(f64::NAN)));
        assert!(eq(&Any::string("a long string value"), &Any::string("a long string value")));
        let a = cont::make_array(vec![Any::int(1), Any::string("x")]);
        let b = cont::make_array(vec![Any::int(1), Any::string("x")]);
        let c = cont::make_array(vec![Any::int(1), Any::string("y"), Any::int(3)]);
        assert!(eq(&a, &b));
        assert!(!eq(&a, &c));
        let (lp, rp) = first_mismatch(&a, &c, false, false).unwrap().unwrap();
        assert_eq!(access_path::to_steps(&lp).len(), 1);
        assert!(access_path::path_equal(&lp, &rp));
        assert!(first_mismatch(&a, &b, false, false).unwrap().is_none());
        let short = cont::make_array(vec![Any::int(1)]);
        let (lp, rp) = first_mismatch(&a, &short, false, false).unwrap().unwrap();
        assert!(!access_path::path_equal(&lp, &rp));
    }
}
