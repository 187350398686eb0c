//! What the structural and serialization code needs of containers: sequences and shapes read in
//! place (their layouts are tvm-ffi's), maps and dicts through the containers' own `ffi.*`
//! globals (whoever implements them), and tvm-ffi's `AnyEqual`.

use crate::any::Any;
use crate::containers::array::seq_items;
use crate::globals::missing_object;
use crate::object::ObjectRef;
use crate::{function, registry, string, ti, FfiError, FfiResult};

fn call_global(name: &str, args: &[Any]) -> FfiResult<Any> {
    let f = registry::get(name).ok_or_else(|| FfiError::runtime(format!("global `{name}` is missing")))?;
    function::call_any(&f, args)
}

/// The elements of an `ffi.Array` or `ffi.List`.
pub(crate) fn seq(o: &ObjectRef) -> &[Any] {
    seq_items(o)
}

/// `TVMFFIShapeCell`.
#[repr(C)]
struct ShapeCell {
    data: *const i64,
    size: usize,
}

/// The dimensions of an `ffi.Shape`.
pub(crate) fn shape(o: &ObjectRef) -> &[i64] {
    debug_assert!(o.type_index() == ti::SHAPE);
    // SAFETY: a shape holds a TVMFFIShapeCell after the header, its data `size` integers.
    unsafe {
        let c = o.payload::<ShapeCell>();
        if c.size == 0 || c.data.is_null() {
            return &[];
        }
        std::slice::from_raw_parts(c.data, c.size)
    }
}

fn is_dict(o: &ObjectRef) -> bool {
    o.type_index() == ti::DICT
}

/// The entries of an `ffi.Map` or `ffi.Dict`, in iteration order.
pub(crate) fn map_items(o: &ObjectRef) -> FfiResult<Vec<(Any, Any)>> {
    let m = Any::object(o.clone());
    let (size_fn, iter_fn) = if is_dict(o) {
        ("ffi.DictSize", "ffi.DictForwardIterFunctor")
    } else {
        ("ffi.MapSize", "ffi.MapForwardIterFunctor")
    };
    let n = call_global(size_fn, std::slice::from_ref(&m))?.as_i64().unwrap_or(0);
    let mut out = Vec::with_capacity(n.max(0) as usize);
    if n <= 0 {
        return Ok(out);
    }
    let it = call_global(iter_fn, &[m])?.into_object().map_err(|_| FfiError::runtime("map iterator"))?;
    for i in 0..n {
        let k = function::call_any(&it, &[Any::int(0)])?;
        let v = function::call_any(&it, &[Any::int(1)])?;
        out.push((k, v));
        if i + 1 < n && !function::call_any(&it, &[Any::int(2)])?.as_bool().unwrap_or(false) {
            break;
        }
    }
    Ok(out)
}

/// The number of entries of a map or dict.
pub(crate) fn map_size(o: &ObjectRef) -> FfiResult<i64> {
    let f = if is_dict(o) { "ffi.DictSize" } else { "ffi.MapSize" };
    Ok(call_global(f, &[Any::object(o.clone())])?.as_i64().unwrap_or(0))
}

/// The value of `key` in a map or dict.
pub(crate) fn map_get(o: &ObjectRef, key: &Any) -> FfiResult<Option<Any>> {
    let f = if is_dict(o) { "ffi.DictGetItemOrMissing" } else { "ffi.MapGetItemOrMissing" };
    let v = call_global(f, &[Any::object(o.clone()), key.clone()])?;
    let missing = missing_object();
    Ok((!(v.type_index() == missing.type_index() && v.raw().bits() == missing.raw().bits())).then_some(v))
}

fn flatten(items: Vec<(Any, Any)>) -> Vec<Any> {
    items.into_iter().flat_map(|(k, v)| [k, v]).collect()
}

/// A new `ffi.Map`.
pub(crate) fn make_map(items: Vec<(Any, Any)>) -> FfiResult<Any> {
    call_global("ffi.Map", &flatten(items))
}

/// A new `ffi.Dict`.
pub(crate) fn make_dict(items: Vec<(Any, Any)>) -> FfiResult<Any> {
    call_global("ffi.Dict", &flatten(items))
}

/// A new `ffi.List`.
pub(crate) fn make_list(items: Vec<Any>) -> FfiResult<Any> {
    call_global("ffi.List", &items)
}

/// A new `ffi.Shape`.
pub(crate) fn make_shape(dims: &[i64]) -> FfiResult<Any> {
    let args: Vec<Any> = dims.iter().map(|&d| Any::int(d)).collect();
    call_global("ffi.Shape", &args)
}

/// A new `ffi.Array`.
pub(crate) fn make_array(items: Vec<Any>) -> Any {
    Any::object(crate::containers::array::make_array(items))
}

/// The bytes of a string (small or object) value, or of bytes when `bytes` is set.
pub(crate) fn str_bytes(a: &Any, bytes: bool) -> Option<&[u8]> {
    let t = a.type_index();
    let ok = if bytes { t == ti::SMALL_BYTES || t == ti::BYTES } else { t == ti::SMALL_STR || t == ti::STR };
    // SAFETY: an owned Any holds a valid cell.
    ok.then(|| unsafe { string::view_str_bytes(a.raw()) }).flatten()
}

/// tvm-ffi's `AnyEqual`: strings and bytes by content (small or not), objects by identity,
/// everything else by type and bits.
pub(crate) fn any_equal(a: &Any, b: &Any) -> bool {
    for bytes in [false, true] {
        if let (Some(x), Some(y)) = (str_bytes(a, bytes), str_bytes(b, bytes)) {
            return x == y;
        }
    }
    a.type_index() == b.type_index() && a.raw().bits() == b.raw().bits() && a.raw().small_len == b.raw().small_len
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn any_equal_compares_strings_by_content() {
        assert!(any_equal(&Any::string("a long string here"), &Any::string("a long string here")));
        assert!(any_equal(&Any::string("abc"), &Any::string("abc")));
        assert!(!any_equal(&Any::string("abc"), &Any::bytes(b"abc")));
        assert!(any_equal(&Any::int(3), &Any::int(3)));
        assert!(!any_equal(&Any::int(3), &Any::bool(true)));
        let arr = make_array(vec![]);
        assert!(any_equal(&arr, &arr.clone()));
        assert!(!any_equal(&arr, &make_array(vec![])));
    }
}

/// The objects a recursive walk is inside of: entering one twice is a cycle, reported as an
/// error instead of recursing without end.
#[derive(Default)]
pub(crate) struct InProgress(std::cell::RefCell<std::collections::HashSet<usize>>);

impl InProgress {
    /// Runs `f` inside object `addr`; a `ValueError` naming `what` if `addr` is already entered.
    pub(crate) fn run<T>(&self, addr: usize, what: &str, f: impl FnOnce() -> FfiResult<T>) -> FfiResult<T> {
        if !self.0.borrow_mut().insert(addr) {
            return Err(FfiError::value(format!("{what}: the value contains itself (a reference cycle)")));
        }
        let r = f();
        self.0.borrow_mut().remove(&addr);
        r
    }
}

#[cfg(test)]
mod cycle_tests {
    use super::*;
    use crate::containers::list;

    #[test]
    fn cycles_are_errors_not_crashes() {
        let l = list::make_list(vec![Any::int(1)]);
        list::list_append(&l, Any::object(l.clone())).unwrap();
        let v = Any::object(l.clone());
        let e = super::super::hash::structural_hash(&v, false, false).unwrap_err();
        assert!(e.message().contains("cycle"), "{}", e.message());
        let e = super::super::equal::structural_equal(&v, &v.clone(), false, false).unwrap_err();
        assert!(e.message().contains("cycle"));
        let e = crate::serialization::graph::to_json_graph(&v, &Any::none()).unwrap_err();
        assert!(e.message().contains("Cycle"));
        // break the cycle so the list can be freed
        list::list_clear(&l).unwrap();
    }
}
