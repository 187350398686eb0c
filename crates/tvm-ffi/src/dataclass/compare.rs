//! `ffi.RecursiveEq/Lt/Le/Gt/Ge` and `ffi.RecursiveHash`: tvm-ffi's recursive comparison and
//! hashing of values (POD values, strings, containers, reflected objects field by field,
//! `__ffi_eq__` / `__ffi_compare__` / `__ffi_hash__` hooks), with its cycle rules.

use super::access::{self, is_bytes, is_str, str_bytes};
use super::fields::{all_fields, get_field, COMPARE_OFF, HASH_OFF};
use crate::any::Any;
use crate::hash::stable_hash_bytes;
use crate::object::ObjectRef;
use crate::{function, ti, types, FfiError, FfiResult};
use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};

/// tvm-ffi's `StableHashCombine`.
pub fn hash_combine(key: u64, value: u64) -> u64 {
    key ^ (value.wrapping_add(0x9e37_79b9).wrapping_add(key << 6).wrapping_add(key >> 2))
}

fn objptr(v: &Any) -> usize {
    v.raw().obj_ptr() as usize
}

struct Comparer {
    eq_only: bool,
    on_stack: Mutex<HashSet<(usize, usize)>>,
}

fn type_err(msg: String) -> FfiError {
    FfiError::type_error(msg)
}

impl Comparer {
    /// Compares; `Ok(None)` when an object pair needs the field walk.
    #[inline(never)]
    fn immediate(self: &Arc<Self>, l: &Any, r: &Any) -> FfiResult<Option<i32>> {
        let (lt, rt) = (l.type_index(), r.type_index());
        if lt == ti::NONE && rt == ti::NONE {
            return Ok(Some(0));
        }
        if lt == ti::NONE {
            return Ok(Some(-1));
        }
        if rt == ti::NONE {
            return Ok(Some(1));
        }
        if (is_str(lt) && is_str(rt)) || (is_bytes(lt) && is_bytes(rt)) {
            return Ok(Some(str_bytes(l.raw()).cmp(str_bytes(r.raw())) as i32));
        }
        if lt != rt {
            if self.eq_only {
                return Ok(Some(1));
            }
            if matches!((lt, rt), (ti::INT, ti::BIG_INT) | (ti::BIG_INT, ti::INT)) {
                return bigint_cmp(l, r).map(Some);
            }
            return Err(type_err(format!(
                "Cannot compare values of different types: {} vs {}",
                types::type_key(lt),
                types::type_key(rt)
            )));
        }
        if lt < ti::STATIC_OBJECT_BEGIN {
            return self.compare_pod(l, r).map(Some);
        }
        if lt == ti::BIG_INT {
            let c = bigint_cmp(l, r)?;
            return Ok(Some(if self.eq_only { (c != 0) as i32 } else { c }));
        }
        if objptr(l) == objptr(r) {
            return Ok(Some(0));
        }
        if lt == ti::SHAPE {
            let (a, b) = (l.as_object().expect("shape"), r.as_object().expect("shape"));
            return Ok(Some(access::shape_dims(&a).cmp(access::shape_dims(&b)) as i32));
        }
        let pair = (objptr(l), objptr(r));
        if self.on_stack.lock().expect("compare state").contains(&pair) {
            if self.eq_only {
                return Ok(Some(0));
            }
            return Err(FfiError::value("RecursiveCompare: cyclic reference detected in ordering"));
        }
        if lt >= ti::DYN_OBJECT_BEGIN {
            return self.custom_hook(l, r);
        }
        Ok(None)
    }

    fn compare_pod(&self, l: &Any, r: &Any) -> FfiResult<i32> {
        let (a, b) = (l.raw(), r.raw());
        let ord = |x: std::cmp::Ordering| x as i32;
        Ok(match l.type_index() {
            ti::BOOL => (a.bits() != 0) as i32 - (b.bits() != 0) as i32,
            ti::INT => ord((a.bits() as i64).cmp(&(b.bits() as i64))),
            ti::FLOAT => {
                let (x, y) = (f64::from_bits(a.bits()), f64::from_bits(b.bits()));
                if x.is_nan() || y.is_nan() {
                    if self.eq_only {
                        return Ok(if x.is_nan() && y.is_nan() { 0 } else { 1 });
                    }
                    return Err(type_err("Cannot order NaN values".into()));
                }
                x.partial_cmp(&y).map_or(0, ord)
            }
            ti::DATA_TYPE => {
                let (x, y) = (l.as_dtype().expect("dtype"), r.as_dtype().expect("dtype"));
                ord((x.code, x.bits, x.lanes).cmp(&(y.code, y.bits, y.lanes)))
            }
            ti::DEVICE => {
                let (x, y) = (l.as_device().expect("device"), r.as_device().expect("device"));
                ord((x.device_type, x.device_id).cmp(&(y.device_type, y.device_id)))
            }
            _ => {
                if a.small_len == b.small_len && a.bits() == b.bits() {
                    0
                } else if self.eq_only {
                    1
                } else {
                    return Err(type_err(format!("Cannot order values of type {}", types::type_key(l.type_index()))));
                }
            }
        })
    }

    fn custom_hook(self: &Arc<Self>, l: &Any, r: &Any) -> FfiResult<Option<i32>> {
        let (lt, rt) = (l.type_index(), r.type_index());
        if lt != rt {
            if self.eq_only {
                return Ok(Some(1));
            }
            return Err(type_err(format!(
                "Cannot compare objects of different types: {} vs {}",
                types::type_key(lt),
                types::type_key(rt)
            )));
        }
        let pair = (objptr(l), objptr(r));
        let run = |hook: ObjectRef, eq: bool| -> FfiResult<i32> {
            self.on_stack.lock().expect("compare state").insert(pair);
            let f = self.callback(eq);
            let res = function::call_any(&hook, &[l.clone(), r.clone(), Any::object(f)]);
            self.on_stack.lock().expect("compare state").remove(&pair);
            let res = res?;
            Ok(if eq { (!res.as_bool().unwrap_or(false)) as i32 } else { res.as_i64().unwrap_or(0).signum() as i32 })
        };
        if self.eq_only {
            if let Some(h) = access::attr_fn("__ffi_eq__", lt) {
                return run(h, true).map(Some);
            }
        }
        if let Some(h) = access::attr_fn("__ffi_compare__", lt) {
            return run(h, false).map(Some);
        }
        Ok(None)
    }

    fn callback(self: &Arc<Self>, eq: bool) -> ObjectRef {
        let weak = Arc::downgrade(self);
        function::from_fn(move |args| {
            let me = weak.upgrade().ok_or_else(|| FfiError::runtime("comparer is gone"))?;
            let l = crate::globals::arg_any("fn_cmp", args, 0)?;
            let r = crate::globals::arg_any("fn_cmp", args, 1)?;
            let c = me.compare(&l, &r)?;
            Ok(if eq { Any::bool(c == 0) } else { Any::int(c as i64) })
        })
    }

    fn compare(self: &Arc<Self>, l: &Any, r: &Any) -> FfiResult<i32> {
        access::check_stack("RecursiveCompare")?;
        if let Some(c) = self.immediate(l, r)? {
            return Ok(c);
        }
        let pair = (objptr(l), objptr(r));
        self.on_stack.lock().expect("compare state").insert(pair);
        let res = self.walk(l, r);
        self.on_stack.lock().expect("compare state").remove(&pair);
        res
    }

    fn walk(self: &Arc<Self>, l: &Any, r: &Any) -> FfiResult<i32> {
        let (lo, ro) = (l.as_object().expect("object"), r.as_object().expect("object"));
        match lo.type_index() {
            ti::ARRAY | ti::LIST => {
                let (a, b) = (access::seq(&lo), access::seq(&ro));
                for (x, y) in a.iter().zip(b.iter()) {
                    let c = self.compare(x, y)?;
                    if c != 0 {
                        return Ok(c);
                    }
                }
                Ok(a.len().cmp(&b.len()) as i32)
            }
            ti::MAP | ti::DICT => {
                let a = access::map_items(&lo)?;
                let bsize = access::map_items(&ro)?.len();
                let fail = || if self.eq_only { Ok(1) } else { Err(type_err("Cannot order Map/Dict values".into())) };
                if a.len() != bsize {
                    return fail();
                }
                for (k, v) in a {
                    let Some(w) = access::map_get(&ro, &k)? else { return fail() };
                    let c = self.compare(&v, &w)?;
                    if c != 0 {
                        return if self.eq_only { Ok(c) } else { fail() };
                    }
                }
                Ok(0)
            }
            t => {
                if t != ro.type_index() {
                    if self.eq_only {
                        return Ok(1);
                    }
                    return Err(type_err(format!(
                        "Cannot compare objects of different types: {} vs {}",
                        types::type_key(t),
                        types::type_key(ro.type_index())
                    )));
                }
                for f in all_fields(t) {
                    if f.flags & COMPARE_OFF != 0 {
                        continue;
                    }
                    // SAFETY: both objects are of type `t`.
                    let (x, y) = unsafe { (get_field(lo.as_ptr(), &f)?, get_field(ro.as_ptr(), &f)?) };
                    let c = self.compare(&x, &y)?;
                    if c != 0 {
                        return Ok(c);
                    }
                }
                Ok(0)
            }
        }
    }
}

fn bigint_words(v: &Any) -> Vec<i64> {
    match v.as_object() {
        Some(o) => crate::bigint::object_words(&o).unwrap_or_default(),
        None => vec![v.as_i64().unwrap_or(0)],
    }
}

fn bigint_cmp(l: &Any, r: &Any) -> FfiResult<i32> {
    Ok(crate::bigint::compare(&bigint_words(l), &bigint_words(r)) as i32)
}

/// Compares two values: `eq_only` gives 0 for equal, non-zero otherwise; else an ordering.
pub(crate) fn recursive_compare(l: &Any, r: &Any, eq_only: bool) -> FfiResult<i32> {
    let c = Arc::new(Comparer { eq_only, on_stack: Mutex::new(HashSet::new()) });
    c.compare(l, r)
}

struct Hasher {
    on_stack: Mutex<HashSet<usize>>,
    memo: Mutex<HashMap<usize, u64>>,
}

impl Hasher {
    #[inline(never)]
    fn immediate(self: &Arc<Self>, v: &Any) -> FfiResult<Option<u64>> {
        let t = v.type_index();
        let raw = v.raw();
        if t == ti::NONE {
            return Ok(Some(hash_combine(0, 0)));
        }
        if is_str(t) {
            return Ok(Some(hash_combine(ti::STR as u64, stable_hash_bytes(str_bytes(raw)))));
        }
        if is_bytes(t) {
            return Ok(Some(hash_combine(ti::BYTES as u64, stable_hash_bytes(str_bytes(raw)))));
        }
        if t < ti::STATIC_OBJECT_BEGIN {
            return Ok(Some(hash_pod(v)));
        }
        let key = objptr(v);
        if let Some(&h) = self.memo.lock().expect("hash state").get(&key) {
            return Ok(Some(h));
        }
        if self.on_stack.lock().expect("hash state").contains(&key) {
            return Ok(Some(access::type_key_hash(t)));
        }
        let o = v.as_object().expect("object");
        if t == ti::SHAPE {
            let dims = access::shape_dims(&o);
            let mut h = hash_combine(access::type_key_hash(ti::SHAPE), dims.len() as u64);
            for &d in dims {
                h = hash_combine(h, d as u64);
            }
            self.memo.lock().expect("hash state").insert(key, h);
            return Ok(Some(h));
        }
        if let Some(hook) = access::attr_fn("__ffi_hash__", t) {
            self.on_stack.lock().expect("hash state").insert(key);
            let f = self.callback();
            let r = function::call_any(&hook, &[v.clone(), Any::object(f)]);
            self.on_stack.lock().expect("hash state").remove(&key);
            let h = r?.as_i64().unwrap_or(0) as u64;
            self.memo.lock().expect("hash state").insert(key, h);
            return Ok(Some(h));
        }
        if t >= ti::DYN_OBJECT_BEGIN
            && (access::attr_fn("__ffi_eq__", t).is_some() || access::attr_fn("__ffi_compare__", t).is_some())
        {
            return Err(FfiError::value(format!(
                "RecursiveHash: type '{}' defines __ffi_eq__ or __ffi_compare__ but not __ffi_hash__. Add a \
                 __ffi_hash__ hook to maintain the invariant RecursiveEq(a,b) => RecursiveHash(a)==RecursiveHash(b).",
                types::type_key(t)
            )));
        }
        Ok(None)
    }

    fn callback(self: &Arc<Self>) -> ObjectRef {
        let weak = Arc::downgrade(self);
        function::from_fn(move |args| {
            let me = weak.upgrade().ok_or_else(|| FfiError::runtime("hasher is gone"))?;
            let v = crate::globals::arg_any("fn_hash", args, 0)?;
            Ok(Any::int(me.hash(&v)? as i64))
        })
    }

    fn hash(self: &Arc<Self>, v: &Any) -> FfiResult<u64> {
        access::check_stack("RecursiveHash")?;
        if let Some(h) = self.immediate(v)? {
            return Ok(h);
        }
        let key = objptr(v);
        self.on_stack.lock().expect("hash state").insert(key);
        let res = self.walk(v);
        self.on_stack.lock().expect("hash state").remove(&key);
        let h = res?;
        self.memo.lock().expect("hash state").insert(key, h);
        Ok(h)
    }

    fn walk(self: &Arc<Self>, v: &Any) -> FfiResult<u64> {
        let o = v.as_object().expect("object");
        let t = o.type_index();
        let tkh = access::type_key_hash(t);
        match t {
            ti::ARRAY | ti::LIST => {
                let items = access::seq(&o);
                let mut h = hash_combine(tkh, items.len() as u64);
                for (i, x) in items.iter().enumerate() {
                    h = hash_combine(h, hash_combine(self.hash(x)?, i as u64));
                }
                Ok(h)
            }
            ti::MAP | ti::DICT => {
                let items = access::map_items(&o)?;
                let mut h = hash_combine(tkh, items.len() as u64);
                let mut entries = Vec::with_capacity(items.len());
                for (k, x) in &items {
                    let kh = self.hash(k)?;
                    entries.push(hash_combine(kh, self.hash(x)?));
                }
                entries.sort_unstable();
                for e in entries {
                    h = hash_combine(h, e);
                }
                Ok(h)
            }
            _ => {
                let mut h = tkh;
                for f in all_fields(t) {
                    if f.flags & (HASH_OFF | COMPARE_OFF) != 0 {
                        continue;
                    }
                    // SAFETY: the object is of type `t`.
                    let x = unsafe { get_field(o.as_ptr(), &f) }?;
                    h = hash_combine(h, self.hash(&x)?);
                }
                Ok(h)
            }
        }
    }
}

fn hash_pod(v: &Any) -> u64 {
    let t = v.type_index();
    let raw = v.raw();
    match t {
        ti::BOOL => hash_combine(t as u64, (raw.bits() != 0) as u64),
        ti::FLOAT => {
            let x = f64::from_bits(raw.bits());
            let bits = if x.is_nan() {
                f64::NAN.to_bits()
            } else if x == 0.0 {
                0
            } else {
                x.to_bits()
            };
            hash_combine(t as u64, bits)
        }
        ti::DATA_TYPE => {
            let d = v.as_dtype().expect("dtype");
            let h = hash_combine(t as u64, d.code as u64);
            hash_combine(hash_combine(h, d.bits as u64), d.lanes as u64)
        }
        ti::DEVICE => {
            let d = v.as_device().expect("device");
            hash_combine(hash_combine(t as u64, d.device_type as u32 as u64), d.device_id as u32 as u64)
        }
        _ => hash_combine(t as u64, raw.bits()),
    }
}

/// `ffi.RecursiveHash(value)`.
pub(crate) fn recursive_hash(v: &Any) -> FfiResult<i64> {
    let h = Arc::new(Hasher { on_stack: Mutex::new(HashSet::new()), memo: Mutex::new(HashMap::new()) });
    Ok(h.hash(v)? as i64)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::containers::array::make_array;

    #[test]
    fn compares_pod_strings_arrays() {
        assert_eq!(recursive_compare(&Any::int(1), &Any::int(2), false).unwrap(), -1);
        assert_eq!(recursive_compare(&Any::string("b"), &Any::string("a long string"), false).unwrap(), 1);
        assert!(recursive_compare(&Any::int(1), &Any::string("a"), false).is_err());
        assert_eq!(recursive_compare(&Any::int(1), &Any::string("a"), true).unwrap(), 1);
        let a = Any::object(make_array(vec![Any::int(1), Any::int(2)]));
        let b = Any::object(make_array(vec![Any::int(1), Any::int(2), Any::int(0)]));
        assert_eq!(recursive_compare(&a, &b, false).unwrap(), -1);
        assert_eq!(recursive_compare(&a, &a.clone(), true).unwrap(), 0);
        assert!(recursive_compare(&Any::float(f64::NAN), &Any::float(1.0), false).is_err());
    }

    #[test]
    fn hashes_equal_values_equally() {
        let a = Any::object(make_array(vec![Any::int(1), Any::string("xyz long string")]));
        let b = Any::object(make_array(vec![Any::int(1), Any::string("xyz long string")]));
        assert_eq!(recursive_hash(&a).unwrap(), recursive_hash(&b).unwrap());
        assert_eq!(recursive_hash(&Any::float(0.0)).unwrap(), recursive_hash(&Any::float(-0.0)).unwrap());
        assert_eq!(recursive_hash(&Any::none()).unwrap(), hash_combine(0, 0) as i64);
    }
}
