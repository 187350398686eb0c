//! Structural hashing (`ffi.StructuralHash`), tvm-ffi's algorithm and constants: values hash by
//! type and bits, strings by `StableHashBytes`, containers by their type key hash, size and
//! elements (maps order-independently), objects by their fields under their
//! `structural_eq_hash_kind`, with the `__s_hash__` hook.

use super::cont;
use super::equal::{enter_region, region, seq_kind_of, tensor_bytes, tensor_of, DEF_ANY};
use super::reflect::{self, kind};
use crate::any::{Any, TVMFFIAny};
use crate::hash::stable_hash_bytes;
use crate::object::ObjectRef;
use crate::{function, ti, types, FfiError, FfiResult};
use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};

/// tvm-ffi's `StableHashCombine`.
pub(crate) fn combine(key: u64, value: u64) -> u64 {
    key ^ (value.wrapping_add(0x9e37_79b9).wrapping_add(key << 6).wrapping_add(key >> 2))
}

/// The 64-bit words of an `ffi.BigInt` (header, `size_`, then the words).
pub(crate) fn bigint_words(o: &ObjectRef) -> &[i64] {
    // SAFETY: a BigInt object holds its word count after the header and the words after that.
    unsafe {
        let n = *o.payload::<usize>();
        std::slice::from_raw_parts((o.as_ptr() as *const u8).add(32).cast::<i64>(), n)
    }
}

fn words_hash(w: &[i64]) -> u64 {
    let bytes: Vec<u8> = w.iter().flat_map(|x| x.to_le_bytes()).collect();
    stable_hash_bytes(&bytes)
}

/// One hashing's state.
pub(crate) struct Hasher {
    region: Cell<i32>,
    skip_tensor_content: bool,
    free_vars: Cell<u32>,
    graph_nodes: Cell<u32>,
    memo: RefCell<HashMap<usize, (u64, ObjectRef)>>,
    active: cont::InProgress,
}

impl Hasher {
    /// A hashing (`map_free_vars` starts in a pattern region).
    pub(crate) fn new(map_free_vars: bool, skip_tensor_content: bool) -> Self {
        Hasher {
            region: Cell::new(if map_free_vars { region::PATTERN } else { region::NONE }),
            skip_tensor_content,
            free_vars: Cell::new(0),
            graph_nodes: Cell::new(0),
            memo: RefCell::new(HashMap::new()),
            active: cont::InProgress::default(),
        }
    }

    /// Hashes a value.
    pub(crate) fn any(&self, v: &Any) -> FfiResult<u64> {
        let t = v.type_index();
        let bits = v.raw().bits();
        if t < ti::STATIC_OBJECT_BEGIN {
            if t == ti::FLOAT && f64::from_bits(bits).is_nan() {
                return Ok(combine(t as u64, f64::NAN.to_bits()));
            }
            if t == ti::SMALL_STR {
                return Ok(combine(ti::STR as u64, bits % 2_147_483_647));
            }
            return Ok(combine(t as i64 as u64, bits));
        }
        let o = v.as_object().expect("object");
        Ok(match t {
            ti::BIG_INT => combine(t as u64, words_hash(bigint_words(&o))),
            ti::STR | ti::BYTES => {
                combine(t as u64, stable_hash_bytes(cont::str_bytes(v, t == ti::BYTES).unwrap_or_default()))
            }
            ti::ARRAY | ti::LIST => self.active.run(o.as_ptr() as usize, "StructuralHash", || {
                let items = cont::seq(&o);
                let mut h = combine(reflect::type_key_hash(t), items.len() as u64);
                for it in items {
                    h = combine(h, self.any(it)?);
                }
                Ok(h)
            })?,
            ti::MAP | ti::DICT => self.active.run(o.as_ptr() as usize, "StructuralHash", || self.map(&o))?,
            ti::SHAPE => {
                let dims = cont::shape(&o);
                dims.iter().fold(combine(reflect::type_key_hash(t), dims.len() as u64), |h, &d| combine(h, d as u64))
            }
            ti::TENSOR => {
                let tn = tensor_of(&o);
                let nd = tn.ndim.max(0) as usize;
                let mut h = combine(reflect::type_key_hash(t), tn.ndim as i64 as u64);
                for i in 0..nd {
                    // SAFETY: shape holds ndim integers.
                    h = combine(h, unsafe { *tn.shape.add(i) } as u64);
                }
                let dt = tn.dtype;
                h = combine(h, dt.code as u64 | (dt.bits as u64) << 8 | (dt.lanes as u64) << 16);
                if !self.skip_tensor_content {
                    h = combine(h, stable_hash_bytes(tensor_bytes(tn)?));
                }
                h
            }
            _ => self.active.run(o.as_ptr() as usize, "StructuralHash", || self.object(&o))?,
        })
    }

    fn key_hash(&self, k: &Any) -> Option<u64> {
        let t = k.type_index();
        if t < ti::STATIC_OBJECT_BEGIN {
            if t == ti::SMALL_STR {
                return Some(combine(ti::STR as u64, stable_hash_bytes(cont::str_bytes(k, false).unwrap_or_default())));
            }
            return Some(combine(t as i64 as u64, k.raw().bits()));
        }
        if t == ti::STR || t == ti::BYTES {
            return Some(combine(t as u64, stable_hash_bytes(cont::str_bytes(k, t == ti::BYTES).unwrap_or_default())));
        }
        let o = k.as_object()?;
        if t == ti::BIG_INT {
            return Some(combine(t as u64, words_hash(bigint_words(&o))));
        }
        self.memo.borrow().get(&(o.as_ptr() as usize)).map(|x| x.0)
    }

    fn map(&self, o: &ObjectRef) -> FfiResult<u64> {
        let items = cont::map_items(o)?;
        let mut h = combine(reflect::type_key_hash(o.type_index()), items.len() as u64);
        let mut keyed: Vec<(u64, Any)> =
            items.into_iter().filter_map(|(k, v)| self.key_hash(&k).map(|hk| (hk, v))).collect();
        keyed.sort_by_key(|x| x.0);
        let mut i = 0;
        while i < keyed.len() {
            let mut k = i + 1;
            while k < keyed.len() && keyed[k].0 == keyed[i].0 {
                k += 1;
            }
            h = combine(h, keyed[i].0);
            if k == i + 1 {
                h = combine(h, self.any(&keyed[i].1)?);
            }
            i = k;
        }
        Ok(h)
    }

    fn object(&self, o: &ObjectRef) -> FfiResult<u64> {
        let k = seq_kind_of(o.type_index())?;
        let addr = o.as_ptr() as usize;
        if let Some((h, _)) = self.memo.borrow().get(&addr) {
            return Ok(*h);
        }
        let init = reflect::type_key_hash(o.type_index());
        let mut h = if k != kind::FREE_VAR {
            self.fields(o, init)?
        } else {
            let saved = self.region.get();
            if saved == region::SIMPLE {
                self.region.set(region::NONE);
            }
            let r = self.fields(o, init);
            self.region.set(saved);
            let r = r?;
            if saved != region::NONE {
                let n = self.free_vars.get();
                self.free_vars.set(n + 1);
                combine(r, n as u64)
            } else {
                addr as u64
            }
        };
        if k == kind::DAG_NODE {
            let n = self.graph_nodes.get();
            self.graph_nodes.set(n + 1);
            h = combine(h, n as u64);
        }
        self.memo.borrow_mut().insert(addr, (h, o.clone()));
        Ok(h)
    }

    fn with_region<T>(&self, kind: i32, f: impl FnOnce() -> T) -> T {
        let saved = self.region.replace(enter_region(self.region.get(), kind));
        let r = f();
        self.region.set(saved);
        r
    }

    fn fields(&self, o: &ObjectRef, mut h: u64) -> FfiResult<u64> {
        let t = o.type_index();
        if let Some(hook) = types::attr_value("__s_hash__", t) {
            return self.hook(&hook, o, h);
        }
        for f in reflect::all_fields(t) {
            if f.flags & reflect::FIELD_SEQ_HASH_IGNORE != 0 {
                continue;
            }
            let v = reflect::get_field(o, &f)?;
            let fh = if f.flags & DEF_ANY != 0 {
                let k =
                    if f.flags & reflect::FIELD_SEQ_HASH_DEF_SIMPLE != 0 { region::SIMPLE } else { region::PATTERN };
                self.with_region(k, || self.any(&v))?
            } else {
                self.any(&v)?
            };
            h = combine(h, fh);
        }
        Ok(h)
    }

    fn hook(&self, hook: &Any, o: &ObjectRef, init: u64) -> FfiResult<u64> {
        let hook = hook.as_object().ok_or_else(|| FfiError::type_error("__s_hash__ is not a function"))?;
        let slot: Arc<Mutex<usize>> = Arc::new(Mutex::new(self as *const Hasher as usize));
        let s2 = slot.clone();
        let cb = function::from_fn(move |a: &[TVMFFIAny]| {
            let p = *s2.lock().unwrap_or_else(|e| e.into_inner());
            if p == 0 {
                return Err(FfiError::runtime("the __s_hash__ callback was called after its hashing ended"));
            }
            // SAFETY: `p` is the Hasher running the hook (zeroed before the hook call returns);
            // Hasher is only used through shared references.
            let me = unsafe { &*(p as *const Hasher) };
            let n = "s_hash callback";
            crate::globals::expect_args(n, a, 3)?;
            let v = crate::globals::arg_any(n, a, 0)?;
            let init = crate::any::view_as_i64(&a[1]).unwrap_or(0) as u64;
            let k = crate::any::view_as_i64(&a[2]).unwrap_or(0) as i32;
            let k = if k == region::NONE { me.region.get() } else { k };
            let hv = me.with_region(k, || me.any(&v))?;
            Ok(Any::int(combine(init, hv) as i64))
        });
        let args = [Any::object(o.clone()), Any::int(init as i64), Any::object(cb)];
        let res = function::call_any(&hook, &args);
        *slot.lock().unwrap_or_else(|e| e.into_inner()) = 0;
        Ok(res?.as_i64().unwrap_or(0) as u64)
    }
}

/// `StructuralHash::Hash`.
pub(crate) fn structural_hash(v: &Any, map_free_vars: bool, skip_tensor_content: bool) -> FfiResult<u64> {
    Hasher::new(map_free_vars, skip_tensor_content).any(v)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hashes_follow_tvm_ffi() {
        let h = |v: &Any| structural_hash(v, false, false).unwrap();
        assert_eq!(h(&Any::int(1)), combine(1, 1));
        // small and heap strings of the same text hash alike
        assert_eq!(h(&Any::string("abc")), combine(ti::STR as u64, stable_hash_bytes(b"abc")));
        let a = cont::make_array(vec![Any::int(1), Any::int(2)]);
        let b = cont::make_array(vec![Any::int(1), Any::int(2)]);
        let c = cont::make_array(vec![Any::int(2), Any::int(1)]);
        assert_eq!(h(&a), h(&b));
        assert_ne!(h(&a), h(&c));
        assert_eq!(h(&Any::float(f64::NAN)), h(&Any::float(-f64::NAN)));
    }
}
