//! The container globals of tvm-ffi's `src/ffi/container.cc` (and `ffi.Shape` of `tensor.cc`), with the
//! argument checks and messages of tvm-ffi's typed functions.

use super::array::{make_array, seq_items};
use super::{list, map, shape};
use crate::any::{view_as_i64, Any, TVMFFIAny};
use crate::globals::missing_object;
use crate::registry::Builder;
use crate::{function, ti, types, FfiError, FfiResult, ObjectRef};
use std::sync::atomic::{AtomicU64, Ordering};

/// A typed global's name and signature, for tvm-ffi's argument errors.
#[derive(Clone, Copy)]
struct Sig {
    sig: &'static str,
    nargs: usize,
}

impl Sig {
    fn check(self, a: &[TVMFFIAny]) -> FfiResult<()> {
        if a.len() != self.nargs {
            return Err(FfiError::type_error(format!(
                "Mismatched number of arguments when calling: `{}`. Expected {} but got {} arguments",
                self.sig,
                self.nargs,
                a.len()
            )));
        }
        Ok(())
    }
    fn mismatch(self, i: usize, expected: &str, got: &TVMFFIAny) -> FfiError {
        FfiError::type_error(format!(
            "Mismatched type on argument #{i} when calling: `{}`. Expected `{expected}` but got `{}`",
            self.sig,
            types::type_key(got.type_index)
        ))
    }
    /// An object argument of exactly `type_index` (`const XObj*`).
    fn obj(self, a: &[TVMFFIAny], i: usize, type_index: i32, expected: &str) -> FfiResult<ObjectRef> {
        let v = &a[i];
        if v.type_index == type_index {
            // SAFETY: an object cell of an argument is a live object.
            if let Some(o) = unsafe { ObjectRef::from_borrowed(v.obj_ptr()) } {
                return Ok(o);
            }
        }
        Err(self.mismatch(i, expected, v))
    }
    /// An object argument of exactly `type_index`, borrowed for the call (`const XObj*`: no
    /// reference is taken, as tvm-ffi's typed getters take none).
    fn obj_ref<'a>(self, a: &'a [TVMFFIAny], i: usize, type_index: i32, expected: &str) -> FfiResult<Borrowed<'a>> {
        let v = &a[i];
        if v.type_index == type_index {
            // SAFETY: an object cell of an argument is a live object the caller holds for the
            // call; the reference made here is never dropped (ManuallyDrop), so no count changes.
            if let Some(o) = unsafe { ObjectRef::from_raw(v.obj_ptr()) } {
                return Ok(Borrowed(std::mem::ManuallyDrop::new(o), std::marker::PhantomData));
            }
        }
        Err(self.mismatch(i, expected, v))
    }
    /// A value argument as a lookup key: the argument cell itself, unless it needs converting
    /// (a raw string, a byte array, a moved object).
    fn key<'a>(self, a: &'a [TVMFFIAny], i: usize) -> FfiResult<Key<'a>> {
        let v = &a[i];
        let convert = matches!(v.type_index, ti::RAW_STR | ti::BYTE_ARRAY_PTR | ti::OBJECT_RVALUE_REF)
            || (v.type_index >= ti::STATIC_OBJECT_BEGIN && v.obj_ptr().is_null());
        if convert {
            // SAFETY: argument cells are valid views for the call.
            return Ok(Key::Owned(unsafe { Any::from_view(v) }?));
        }
        Ok(Key::View(v))
    }
    fn int(self, a: &[TVMFFIAny], i: usize) -> FfiResult<i64> {
        view_as_i64(&a[i]).ok_or_else(|| self.mismatch(i, "int", &a[i]))
    }
    fn any(self, a: &[TVMFFIAny], i: usize) -> FfiResult<Any> {
        // SAFETY: argument cells are valid views for the call.
        unsafe { Any::from_view(&a[i]) }
    }
    /// A `List<Any>` argument: a list, or an array converted to a new list.
    fn list(self, a: &[TVMFFIAny], i: usize) -> FfiResult<ObjectRef> {
        match a[i].type_index {
            ti::LIST => self.obj(a, i, ti::LIST, "List<Any>"),
            ti::ARRAY => Ok(list::make_list(seq_items(&self.obj(a, i, ti::ARRAY, "List<Any>")?).to_vec())),
            _ => Err(self.mismatch(i, "List<Any>", &a[i])),
        }
    }
    /// A `Dict<Any, Any>` argument: a dict, or a map converted to a new dict.
    fn dict(self, a: &[TVMFFIAny], i: usize) -> FfiResult<ObjectRef> {
        match a[i].type_index {
            ti::DICT => self.obj(a, i, ti::DICT, "Dict<Any, Any>"),
            ti::MAP => map::make_dict(map::map_items(&self.obj(a, i, ti::MAP, "Dict<Any, Any>")?)?),
            _ => Err(self.mismatch(i, "Dict<Any, Any>", &a[i])),
        }
    }
}

const fn sig(sig: &'static str, nargs: usize) -> Sig {
    Sig { sig, nargs }
}

fn name_of(s: Sig) -> &'static str {
    s.sig.split('(').next().unwrap_or(s.sig)
}

fn add(b: &mut Builder, s: Sig, f: impl Fn(Sig, &[TVMFFIAny]) -> FfiResult<Any> + Send + Sync + 'static) {
    b.add(name_of(s), move |a| {
        s.check(a)?;
        f(s, a)
    });
}

/// An object argument borrowed for the call: an [`ObjectRef`] that is never dropped (the
/// caller's reference keeps the object alive until the call returns, which `'a` stands for).
struct Borrowed<'a>(std::mem::ManuallyDrop<ObjectRef>, std::marker::PhantomData<&'a TVMFFIAny>);

impl std::ops::Deref for Borrowed<'_> {
    type Target = ObjectRef;
    fn deref(&self) -> &ObjectRef {
        &self.0
    }
}

/// A lookup key: an argument cell as it is, or converted.
enum Key<'a> {
    View(&'a TVMFFIAny),
    Owned(Any),
}

impl Key<'_> {
    fn raw(&self) -> &TVMFFIAny {
        match self {
            Key::View(v) => v,
            Key::Owned(a) => a.raw(),
        }
    }
}

fn key_pairs(a: &[TVMFFIAny]) -> FfiResult<Vec<(Any, Any)>> {
    if a.len() % 2 != 0 {
        return Err(FfiError::runtime(format!("Check failed: args.size() % 2 == 0 ({} vs. 0) : ", a.len() % 2)));
    }
    a.chunks(2)
        .map(|kv| {
            // SAFETY: argument cells are valid views for the call.
            unsafe { Ok((Any::from_view(&kv[0])?, Any::from_view(&kv[1])?)) }
        })
        .collect()
}

fn views_to_any(a: &[TVMFFIAny]) -> FfiResult<Vec<Any>> {
    let mut out = Vec::with_capacity(a.len());
    for v in a {
        // SAFETY: argument cells are valid views for the call.
        out.push(unsafe { Any::from_view(v) }?);
    }
    Ok(out)
}

fn contains(items: &[Any], v: &Any) -> FfiResult<bool> {
    for it in items {
        if super::hash::any_equal(it, v)? {
            return Ok(true);
        }
    }
    Ok(false)
}

/// The iteration functor of `MapForwardIterFunctor`: 0 the key, 1 the value, 2 advance (false at
/// the end).
fn iter_functor(m: ObjectRef) -> FfiResult<Any> {
    let raw = map::raw_view(&m)?;
    let pos = AtomicU64::new(map::begin(raw));
    Ok(Any::object(function::from_fn(move |a| {
        let cmd = a.first().and_then(view_as_i64).ok_or_else(|| FfiError::type_error("expects an int command"))?;
        let raw = map::raw_view(&m)?;
        let i = pos.load(Ordering::Relaxed);
        match cmd {
            0 | 1 => {
                if !map::valid(raw, i) {
                    return Err(FfiError::index("map iterator out of range"));
                }
                let (k, v) = map::entry(raw, i);
                // SAFETY: owned cells of the map; copies.
                unsafe { Any::from_view(if cmd == 0 { k } else { v }) }
            }
            _ => {
                if !map::valid(raw, i) {
                    return Ok(Any::bool(false));
                }
                let n = map::advance(raw, i);
                pos.store(n, Ordering::Relaxed);
                Ok(Any::bool(n != map::end(raw)))
            }
        }
    })))
}

fn get_or_missing(m: &ObjectRef, k: &TVMFFIAny) -> FfiResult<Any> {
    Ok(map::map_get_raw(m, k)?.unwrap_or_else(missing_object))
}

fn get_or_key_error(m: &ObjectRef, k: &TVMFFIAny) -> FfiResult<Any> {
    map::map_get_raw(m, k)?.ok_or_else(|| FfiError::key("key is not in Map"))
}

/// The device of the first tensor not on the CPU inside nested containers.
fn first_non_cpu(v: &TVMFFIAny, depth: usize) -> FfiResult<Option<tvm_runtime_classic::abi::DLDevice>> {
    if depth > 1000 {
        return Err(FfiError::value("containers nested too deeply"));
    }
    // SAFETY: an object cell of an owned value or argument is a live object.
    let Some(o) = (if v.is_object() { unsafe { ObjectRef::from_borrowed(v.obj_ptr()) } } else { None }) else {
        return Ok(None);
    };
    match o.type_index() {
        ti::TENSOR => {
            // SAFETY: a tensor is the header followed by a DLTensor, whose device follows `data`.
            let dev = unsafe { *(o.as_ptr() as *const u8).add(24 + 8).cast::<tvm_runtime_classic::abi::DLDevice>() };
            Ok((dev.device_type != 1).then_some(dev))
        }
        ti::ARRAY | ti::LIST => {
            for it in seq_items(&o) {
                if let Some(d) = first_non_cpu(it.raw(), depth + 1)? {
                    return Ok(Some(d));
                }
            }
            Ok(None)
        }
        ti::MAP | ti::DICT => {
            for (_, val) in map::map_items(&o)? {
                if let Some(d) = first_non_cpu(val.raw(), depth + 1)? {
                    return Ok(Some(d));
                }
            }
            Ok(None)
        }
        _ => Ok(None),
    }
}

fn cannot_cast(v: &TVMFFIAny, to: &str) -> FfiError {
    FfiError::type_error(format!("Cannot cast from `{}` to `{to}`", types::type_key(v.type_index)))
}

fn seq_arg(v: &TVMFFIAny) -> Option<Vec<Any>> {
    if !matches!(v.type_index, ti::ARRAY | ti::LIST) {
        return None;
    }
    // SAFETY: an object cell of an argument is a live object.
    unsafe { ObjectRef::from_borrowed(v.obj_ptr()) }.map(|o| seq_items(&o).to_vec())
}

fn map_arg(v: &TVMFFIAny) -> FfiResult<Option<Vec<(Any, Any)>>> {
    if !matches!(v.type_index, ti::MAP | ti::DICT) {
        return Ok(None);
    }
    // SAFETY: an object cell of an argument is a live object.
    match unsafe { ObjectRef::from_borrowed(v.obj_ptr()) } {
        Some(o) => Ok(Some(map::map_items(&o)?)),
        None => Ok(None),
    }
}

/// The `__ffi_convert__` of a container type (`def_convert<TSelf>()`): the value itself when it
/// has the type, else tvm-ffi's conversion (array <-> list, map <-> dict, ints -> shape).
fn convert(target: i32, v: &TVMFFIAny) -> FfiResult<Any> {
    if v.type_index == target {
        // SAFETY: a valid argument view.
        return unsafe { Any::from_view(v) };
    }
    match target {
        ti::ARRAY => seq_arg(v).map(|items| Any::object(make_array(items))).ok_or_else(|| cannot_cast(v, "Array<Any>")),
        ti::LIST => {
            seq_arg(v).map(|items| Any::object(list::make_list(items))).ok_or_else(|| cannot_cast(v, "List<Any>"))
        }
        ti::MAP => match map_arg(v)? {
            Some(items) => Ok(Any::object(map::make_map(items)?)),
            None => Err(cannot_cast(v, "Map<Any, Any>")),
        },
        ti::DICT => match map_arg(v)? {
            Some(items) => Ok(Any::object(map::make_dict(items)?)),
            None => Err(cannot_cast(v, "Dict<Any, Any>")),
        },
        _ => {
            let dims = seq_arg(v)
                .and_then(|items| items.iter().map(|a| view_as_i64(a.raw())).collect::<Option<Vec<i64>>>())
                .ok_or_else(|| cannot_cast(v, "ffi.Shape"))?;
            Ok(Any::object(shape::make_shape(&dims)))
        }
    }
}

fn register_converts() {
    for target in [ti::ARRAY, ti::LIST, ti::MAP, ti::DICT, ti::SHAPE] {
        let f = function::from_fn(move |a| {
            let v = a.first().ok_or_else(|| FfiError::type_error("__ffi_convert__ expects one argument"))?;
            convert(target, v)
        });
        let f = Any::object(f);
        // Start-up registration: the columns are new, a failure only means someone else
        // registered the attribute first.
        let _ = types::register_attr(target, "__ffi_convert__", f.raw());
    }
}

/// Adds the container globals.
pub fn register(b: &mut Builder) {
    register_converts();
    register_array(b);
    register_list(b);
    register_maps(b);
    b.add("ffi.Shape", |a| {
        let dims = a
            .iter()
            .map(|v| view_as_i64(v).ok_or_else(|| FfiError::value("Expect shape to take list of int arguments")))
            .collect::<FfiResult<Vec<i64>>>()?;
        Ok(Any::object(shape::make_shape(&dims)))
    });
    add(b, sig("ffi.ContainerFindFirstNonCPUDevice(0: Any) -> Device", 1), |_, a| {
        let v = arg(a, 0)?;
        let d =
            first_non_cpu(v.raw(), 0)?.unwrap_or(tvm_runtime_classic::abi::DLDevice { device_type: 1, device_id: 0 });
        Ok(Any::device(d))
    });
}

fn arg(a: &[TVMFFIAny], i: usize) -> FfiResult<Any> {
    // SAFETY: argument cells are valid views for the call.
    unsafe { Any::from_view(&a[i]) }
}

fn register_array(b: &mut Builder) {
    // SAFETY: argument cells are valid views for the call.
    b.add("ffi.Array", |a| Ok(Any::object(unsafe { super::array::make_array_from_views(a) }?)));
    add(b, sig("ffi.ArrayGetItem(0: ffi.Array, 1: int) -> Any", 2), |s, a| {
        let o = s.obj_ref(a, 0, ti::ARRAY, "ffi.Array")?;
        let i = s.int(a, 1)?;
        let items = seq_items(&o);
        usize::try_from(i)
            .ok()
            .and_then(|u| items.get(u))
            .cloned()
            .ok_or_else(|| FfiError::index(format!("Index {i} out of bounds {}", items.len())))
    });
    add(b, sig("ffi.ArraySize(0: ffi.Array) -> int", 1), |s, a| {
        Ok(Any::int(seq_items(&*s.obj_ref(a, 0, ti::ARRAY, "ffi.Array")?).len() as i64))
    });
    add(b, sig("ffi.ArrayContains(0: ffi.Array, 1: Any) -> bool", 2), |s, a| {
        let o = s.obj_ref(a, 0, ti::ARRAY, "ffi.Array")?;
        Ok(Any::bool(contains(seq_items(&o), &s.any(a, 1)?)?))
    });
}

fn register_list(b: &mut Builder) {
    b.add("ffi.List", |a| Ok(Any::object(list::make_list(views_to_any(a)?))));
    add(b, sig("ffi.ListGetItem(0: ffi.List, 1: int) -> Any", 2), |s, a| {
        list::list_get(&s.obj(a, 0, ti::LIST, "ffi.List")?, s.int(a, 1)?)
    });
    add(b, sig("ffi.ListSetItem(0: List<Any>, 1: int, 2: Any) -> void", 3), |s, a| {
        list::list_set(&s.list(a, 0)?, s.int(a, 1)?, s.any(a, 2)?).map(|_| Any::none())
    });
    add(b, sig("ffi.ListSize(0: ffi.List) -> int", 1), |s, a| {
        Ok(Any::int(list::list_size(&*s.obj_ref(a, 0, ti::LIST, "ffi.List")?)? as i64))
    });
    add(b, sig("ffi.ListContains(0: ffi.List, 1: Any) -> bool", 2), |s, a| {
        let items = list::list_items(&s.obj(a, 0, ti::LIST, "ffi.List")?)?;
        Ok(Any::bool(contains(&items, &s.any(a, 1)?)?))
    });
    add(b, sig("ffi.ListAppend(0: List<Any>, 1: Any) -> void", 2), |s, a| {
        list::list_append(&s.list(a, 0)?, s.any(a, 1)?).map(|_| Any::none())
    });
    add(b, sig("ffi.ListInsert(0: List<Any>, 1: int, 2: Any) -> void", 3), |s, a| {
        list::list_insert(&s.list(a, 0)?, s.int(a, 1)?, vec![s.any(a, 2)?]).map(|_| Any::none())
    });
    add(b, sig("ffi.ListPop(0: List<Any>, 1: int) -> Any", 2), |s, a| {
        let l = s.list(a, 0)?;
        let i = s.int(a, 1)?;
        let v = list::list_get(&l, i)?;
        list::list_erase(&l, i)?;
        Ok(v)
    });
    add(b, sig("ffi.ListErase(0: List<Any>, 1: int) -> void", 2), |s, a| {
        list::list_erase(&s.list(a, 0)?, s.int(a, 1)?).map(|_| Any::none())
    });
    add(b, sig("ffi.ListEraseRange(0: List<Any>, 1: int, 2: int) -> void", 3), |s, a| {
        list::list_erase_range(&s.list(a, 0)?, s.int(a, 1)?, s.int(a, 2)?).map(|_| Any::none())
    });
    add(b, sig("ffi.ListReplaceSlice(0: List<Any>, 1: int, 2: int, 3: List<Any>) -> void", 4), |s, a| {
        let l = s.list(a, 0)?;
        let (start, stop) = (s.int(a, 1)?, s.int(a, 2)?);
        // A snapshot first: the replacement may be the list itself.
        let rep = list::list_items(&s.list(a, 3)?)?;
        list::list_erase_range(&l, start, stop)?;
        list::list_insert(&l, start, rep).map(|_| Any::none())
    });
    add(b, sig("ffi.ListReverse(0: List<Any>) -> void", 1), |s, a| {
        list::list_reverse(&s.list(a, 0)?).map(|_| Any::none())
    });
    add(b, sig("ffi.ListClear(0: List<Any>) -> void", 1), |s, a| list::list_clear(&s.list(a, 0)?).map(|_| Any::none()));
    add(b, sig("ffi.ListReserve(0: List<Any>, 1: int) -> void", 2), |s, a| {
        list::list_reserve(&s.list(a, 0)?, s.int(a, 1)?).map(|_| Any::none())
    });
}

fn register_maps(b: &mut Builder) {
    b.add("ffi.Map", |a| Ok(Any::object(map::make_map(key_pairs(a)?)?)));
    add(b, sig("ffi.MapSize(0: ffi.Map) -> int", 1), |s, a| {
        Ok(Any::int(map::map_size(&*s.obj_ref(a, 0, ti::MAP, "ffi.Map")?)? as i64))
    });
    add(b, sig("ffi.MapGetItem(0: ffi.Map, 1: Any) -> Any", 2), |s, a| {
        get_or_key_error(&*s.obj_ref(a, 0, ti::MAP, "ffi.Map")?, s.key(a, 1)?.raw())
    });
    add(b, sig("ffi.MapCount(0: ffi.Map, 1: Any) -> int", 2), |s, a| {
        Ok(Any::int(map::map_get_raw(&*s.obj_ref(a, 0, ti::MAP, "ffi.Map")?, s.key(a, 1)?.raw())?.is_some() as i64))
    });
    add(b, sig("ffi.MapForwardIterFunctor(0: ffi.Map) -> ffi.Function", 1), |s, a| {
        iter_functor(s.obj(a, 0, ti::MAP, "ffi.Map")?)
    });
    add(b, sig("ffi.MapGetItemOrMissing(0: ffi.Map, 1: Any) -> Any", 2), |s, a| {
        get_or_missing(&*s.obj_ref(a, 0, ti::MAP, "ffi.Map")?, s.key(a, 1)?.raw())
    });
    b.add("ffi.Dict", |a| Ok(Any::object(map::make_dict(key_pairs(a)?)?)));
    add(b, sig("ffi.DictSize(0: ffi.Dict) -> int", 1), |s, a| {
        Ok(Any::int(map::map_size(&*s.obj_ref(a, 0, ti::DICT, "ffi.Dict")?)? as i64))
    });
    add(b, sig("ffi.DictGetItem(0: ffi.Dict, 1: Any) -> Any", 2), |s, a| {
        get_or_key_error(&*s.obj_ref(a, 0, ti::DICT, "ffi.Dict")?, s.key(a, 1)?.raw())
    });
    add(b, sig("ffi.DictSetItem(0: Dict<Any, Any>, 1: Any, 2: Any) -> void", 3), |s, a| {
        map::dict_set(&s.dict(a, 0)?, s.any(a, 1)?, s.any(a, 2)?).map(|_| Any::none())
    });
    add(b, sig("ffi.DictCount(0: ffi.Dict, 1: Any) -> int", 2), |s, a| {
        Ok(Any::int(map::map_get_raw(&*s.obj_ref(a, 0, ti::DICT, "ffi.Dict")?, s.key(a, 1)?.raw())?.is_some() as i64))
    });
    add(b, sig("ffi.DictErase(0: Dict<Any, Any>, 1: Any) -> void", 2), |s, a| {
        map::map_erase(&s.dict(a, 0)?, &s.any(a, 1)?).map(|_| Any::none())
    });
    add(b, sig("ffi.DictClear(0: Dict<Any, Any>) -> void", 1), |s, a| {
        map::map_clear(&s.dict(a, 0)?).map(|_| Any::none())
    });
    add(b, sig("ffi.DictForwardIterFunctor(0: ffi.Dict) -> ffi.Function", 1), |s, a| {
        iter_functor(s.obj(a, 0, ti::DICT, "ffi.Dict")?)
    });
    add(b, sig("ffi.DictGetItemOrMissing(0: ffi.Dict, 1: Any) -> Any", 2), |s, a| {
        get_or_missing(&*s.obj_ref(a, 0, ti::DICT, "ffi.Dict")?, s.key(a, 1)?.raw())
    });
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::registry;

    fn call(name: &str, args: &[Any]) -> FfiResult<Any> {
        function::call_any(&registry::get(name).expect(name), args)
    }

    #[test]
    fn globals_check_arguments_like_tvm_ffi() {
        let arr = call("ffi.Array", &[Any::int(1), Any::string("x")]).unwrap();
        assert_eq!(call("ffi.ArraySize", std::slice::from_ref(&arr)).unwrap().as_i64(), Some(2));
        let e = call("ffi.ArrayGetItem", &[arr.clone(), Any::int(5)]).unwrap_err();
        assert_eq!((e.kind().as_str(), e.message().as_str()), ("IndexError", "Index 5 out of bounds 2"));
        let e = call("ffi.MapSize", &[Any::int(1)]).unwrap_err();
        assert_eq!(
            e.message(),
            "Mismatched type on argument #0 when calling: `ffi.MapSize(0: ffi.Map) -> int`. Expected `ffi.Map` but got `int`"
        );
        let e = call("ffi.ArrayGetItem", std::slice::from_ref(&arr)).unwrap_err();
        assert!(e.message().starts_with("Mismatched number of arguments"), "{}", e.message());
        assert!(call("ffi.ArrayContains", &[arr, Any::string("x")]).unwrap().as_bool().unwrap());
    }

    #[test]
    fn lookups_borrow_their_arguments_and_convert_raw_keys() {
        let long = "a key longer than a small string";
        let m = call("ffi.Map", &[Any::string(long), Any::int(7), Any::string("k"), Any::int(8)]).unwrap();
        let mo = m.as_object().unwrap();
        let key_obj = Any::string(long);
        let before = (mo.use_count(), key_obj.as_object().unwrap().use_count());
        let f = registry::get("ffi.MapGetItem").unwrap();
        for _ in 0..3 {
            assert_eq!(function::call_any(&f, &[m.clone(), key_obj.clone()]).unwrap().as_i64(), Some(7));
        }
        assert_eq!((mo.use_count(), key_obj.as_object().unwrap().use_count()), before);
        // A raw C string key (what C callers pass) is converted, then found.
        let c = std::ffi::CString::new(long).unwrap();
        let raw = TVMFFIAny::with_bits(ti::RAW_STR, c.as_ptr() as u64);
        assert_eq!(function::call(&f, &[*m.raw(), raw]).unwrap().as_i64(), Some(7));
        let cnt = registry::get("ffi.MapCount").unwrap();
        assert_eq!(function::call(&cnt, &[*m.raw(), raw]).unwrap().as_i64(), Some(1));
        // A null object of an object type, or a map of the wrong type, is an error, not a crash.
        let null_obj = TVMFFIAny::with_bits(ti::STR, 0);
        assert!(function::call(&f, &[*m.raw(), null_obj]).unwrap_err().message().contains("NULL object"));
        let arr = call("ffi.Array", &[Any::int(1)]).unwrap();
        let e = call("ffi.MapGetItem", &[arr, Any::int(1)]).unwrap_err();
        assert!(e.message().contains("Expected `ffi.Map` but got `ffi.Array`"), "{}", e.message());
        let null_map = TVMFFIAny::with_bits(ti::MAP, 0);
        assert_eq!(function::call(&f, &[null_map, raw]).unwrap_err().kind(), "TypeError");
        assert_eq!(mo.use_count(), before.0);
    }

    #[test]
    fn map_dict_list_shape_globals() {
        let m = call("ffi.Map", &[Any::string("a"), Any::int(1), Any::string("b"), Any::int(2)]).unwrap();
        assert_eq!(call("ffi.MapGetItem", &[m.clone(), Any::string("b")]).unwrap().as_i64(), Some(2));
        let e = call("ffi.MapGetItem", &[m.clone(), Any::string("zz")]).unwrap_err();
        assert_eq!(e.kind(), "KeyError");
        let miss = call("ffi.MapGetItemOrMissing", &[m.clone(), Any::string("zz")]).unwrap();
        assert!(miss.as_object().unwrap().same_as(&missing_object().as_object().unwrap()));
        assert_eq!(call("ffi.Map", &[Any::int(1)]).unwrap_err().kind(), "RuntimeError");
        let it = call("ffi.MapForwardIterFunctor", std::slice::from_ref(&m)).unwrap();
        let it = it.as_object().unwrap();
        assert_eq!(function::call_any(&it, &[Any::int(0)]).unwrap().as_str(), Some("a"));
        assert!(function::call_any(&it, &[Any::int(2)]).unwrap().as_bool().unwrap());
        assert_eq!(function::call_any(&it, &[Any::int(1)]).unwrap().as_i64(), Some(2));
        assert!(!function::call_any(&it, &[Any::int(2)]).unwrap().as_bool().unwrap());

        let d = call("ffi.Dict", &[]).unwrap();
        call("ffi.DictSetItem", &[d.clone(), Any::int(3), Any::int(4)]).unwrap();
        assert_eq!(call("ffi.DictCount", &[d.clone(), Any::int(3)]).unwrap().as_i64(), Some(1));
        call("ffi.DictErase", &[d.clone(), Any::int(3)]).unwrap();
        assert_eq!(call("ffi.DictSize", std::slice::from_ref(&d)).unwrap().as_i64(), Some(0));

        let l = call("ffi.List", &[Any::int(1), Any::int(2), Any::int(3)]).unwrap();
        assert_eq!(call("ffi.ListPop", &[l.clone(), Any::int(0)]).unwrap().as_i64(), Some(1));
        call("ffi.ListReplaceSlice", &[l.clone(), Any::int(0), Any::int(1), l.clone()]).unwrap();
        let items: Vec<i64> =
            list::list_items(&l.as_object().unwrap()).unwrap().iter().map(|a| a.as_i64().unwrap()).collect();
        assert_eq!(items, vec![2, 3, 3]);

        let s = call("ffi.Shape", &[Any::int(2), Any::bool(true)]).unwrap();
        assert_eq!(shape::shape_dims(&s.as_object().unwrap()), &[2, 1]);
        assert_eq!(call("ffi.Shape", &[Any::float(1.0)]).unwrap_err().kind(), "ValueError");
        let dev = call("ffi.ContainerFindFirstNonCPUDevice", &[m]).unwrap().as_device().unwrap();
        assert_eq!((dev.device_type, dev.device_id), (1, 0));
    }
}
