//! `ffi.DeepCopy`: copies the object graph under a value. Mutable containers and reflected
//! objects (through their `__ffi_shallow_copy__`) are registered before their children are
//! copied so that cycles resolve to the copies; immutable containers that are reached again
//! while being built keep the original and are fixed up afterwards.

use super::access;
use super::fields::{all_fields, get_field, set_field};
use crate::any::Any;
use crate::containers::{list, map};
use crate::{function, ti, types, FfiError, FfiResult};
use std::collections::{HashMap, HashSet};

#[derive(Default)]
struct Copier {
    map: HashMap<usize, Any>,
    order: Vec<usize>,
    in_progress: HashSet<usize>,
    deferred: bool,
}

fn ptr(v: &Any) -> usize {
    v.raw().obj_ptr() as usize
}

impl Copier {
    fn remember(&mut self, k: usize, v: Any) {
        if self.map.insert(k, v).is_none() {
            self.order.push(k);
        }
    }

    #[inline(never)]
    fn copy(&mut self, v: &Any) -> FfiResult<Any> {
        access::check_stack("DeepCopy")?;
        if v.type_index() < ti::STATIC_OBJECT_BEGIN {
            return Ok(v.clone());
        }
        let key = ptr(v);
        if let Some(c) = self.map.get(&key) {
            return Ok(c.clone());
        }
        if self.in_progress.contains(&key) {
            self.deferred = true;
            return Ok(v.clone());
        }
        let o = v.as_object().expect("object");
        let t = o.type_index();
        if matches!(t, ti::STR | ti::BYTES | ti::SHAPE | ti::BIG_INT) || access::is_enum(t) {
            return Ok(v.clone());
        }
        match t {
            ti::ARRAY | ti::MAP => {
                self.in_progress.insert(key);
                let items = if t == ti::ARRAY {
                    access::seq(&o)
                } else {
                    access::map_items(&o)?.into_iter().flat_map(|(k, x)| [k, x]).collect()
                };
                let mut out = Vec::with_capacity(items.len());
                for x in &items {
                    out.push(self.copy(x)?);
                }
                self.in_progress.remove(&key);
                let c = access::make(if t == ti::ARRAY { "ffi.Array" } else { "ffi.Map" }, out)?;
                self.remember(key, c.clone());
                Ok(c)
            }
            ti::LIST => {
                let c = access::make("ffi.List", Vec::new())?;
                self.remember(key, c.clone());
                for x in access::seq(&o) {
                    let y = self.copy(&x)?;
                    list::list_append(&c.as_object().expect("list"), y)?;
                }
                Ok(c)
            }
            ti::DICT => {
                let c = access::make("ffi.Dict", Vec::new())?;
                self.remember(key, c.clone());
                for (k, x) in access::map_items(&o)? {
                    let k2 = self.copy(&k)?;
                    let x2 = self.copy(&x)?;
                    map::dict_set(&c.as_object().expect("dict"), k2, x2)?;
                }
                Ok(c)
            }
            _ => {
                let f = access::attr_fn("__ffi_shallow_copy__", t).ok_or_else(|| {
                    FfiError::runtime(format!(
                        "Cannot deep copy object of type \"{}\" because it is not copy-constructible",
                        types::type_key(t)
                    ))
                })?;
                let c = function::call_any(&f, std::slice::from_ref(v))?;
                let co = c.as_object().ok_or_else(|| FfiError::runtime("__ffi_shallow_copy__ returned no object"))?;
                self.remember(key, c.clone());
                for fi in all_fields(t) {
                    // SAFETY: the source and its copy are of type `t`.
                    unsafe {
                        let orig = get_field(o.as_ptr(), &fi)?;
                        let new = self.copy(&orig)?;
                        if !(orig.raw().type_index == new.raw().type_index && orig.raw().bits() == new.raw().bits()) {
                            set_field(co.as_ptr(), &fi, new.raw())?;
                        }
                    }
                }
                Ok(c)
            }
        }
    }

    fn lookup(&self, v: &Any) -> Option<Any> {
        if v.type_index() < ti::STATIC_OBJECT_BEGIN {
            return None;
        }
        self.map.get(&ptr(v)).filter(|c| ptr(c) != ptr(v)).cloned()
    }

    fn fixup(&self) -> FfiResult<()> {
        for k in &self.order {
            let c = &self.map[k];
            let Some(o) = c.as_object() else { continue };
            match o.type_index() {
                ti::LIST => {
                    for (i, x) in access::seq(&o).iter().enumerate() {
                        if let Some(n) = self.lookup(x) {
                            list::list_set(&o, i as i64, n)?;
                        }
                    }
                }
                ti::DICT => {
                    let mut fix = Vec::new();
                    for (k, x) in access::map_items(&o)? {
                        let (nk, nx) = (self.lookup(&k), self.lookup(&x));
                        if nk.is_some() || nx.is_some() {
                            fix.push((k.clone(), nk.unwrap_or(k), nx.unwrap_or(x)));
                        }
                    }
                    for (old, nk, nx) in fix {
                        map::map_erase(&o, &old)?;
                        map::dict_set(&o, nk, nx)?;
                    }
                }
                t if t >= ti::DYN_OBJECT_BEGIN => {
                    for fi in all_fields(t) {
                        // SAFETY: the copy is of type `t`.
                        unsafe {
                            let x = get_field(o.as_ptr(), &fi)?;
                            if let Some(n) = self.lookup(&x) {
                                set_field(o.as_ptr(), &fi, n.raw())?;
                            }
                        }
                    }
                }
                _ => {}
            }
        }
        Ok(())
    }
}

/// `ffi.DeepCopy(value)`.
pub(crate) fn deep_copy(v: &Any) -> FfiResult<Any> {
    let mut c = Copier::default();
    let out = c.copy(v)?;
    if c.deferred {
        c.fixup()?;
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::containers::array::make_array;

    #[test]
    fn copies_arrays_and_keeps_strings() {
        let s = Any::string("a string longer than seven");
        let inner = Any::object(make_array(vec![Any::int(1)]));
        let a = Any::object(make_array(vec![inner.clone(), s.clone(), inner]));
        let c = deep_copy(&a).unwrap();
        assert_ne!(ptr(&c), ptr(&a));
        let items = access::seq(&c.as_object().unwrap());
        assert_eq!(ptr(&items[0]), ptr(&items[2]));
        assert_eq!(ptr(&items[1]), ptr(&s));
        assert_eq!(deep_copy(&Any::int(5)).unwrap().as_i64(), Some(5));
    }
}
