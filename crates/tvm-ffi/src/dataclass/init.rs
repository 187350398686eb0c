//! Making objects by reflection: the empty object of a type (its creator or `__ffi_new__`), the
//! auto-generated `__ffi_init__` (positional and KWARGS binding, defaults, required fields),
//! `ffi.MakeObjectFromPackedArgs`, `ffi.MakeFieldSetter`, and the objects of Python-defined
//! classes (calloc'd, fields at the offsets Python registered).

use super::fields::{self, all_fields, field_name, HAS_DEFAULT, INIT_OFF, KW_ONLY};
use crate::any::{Any, TVMFFIAny};
use crate::globals::kwargs_object;
use crate::object::{ObjectRef, TVMFFIObject, DELETER_STRONG, DELETER_WEAK};
use crate::types::{self, TVMFFIFieldInfo};
use crate::{function, string, ti, FfiError, FfiResult};
use std::collections::HashMap;
use std::ffi::{c_int, c_void};
use std::sync::atomic::AtomicU64;

/// An empty object of a type (`CreateEmptyObject`): the native creator, else `__ffi_new__`.
pub(crate) fn create_empty_object(type_index: i32) -> FfiResult<ObjectRef> {
    let info = types::type_info(type_index)
        .ok_or_else(|| FfiError::value(format!("Cannot find type info for type_index={type_index}")))?;
    // SAFETY: type infos live for the process; metadata, when set, too.
    let creator = unsafe { (*info).metadata.as_ref().and_then(|m| m.creator) };
    if let Some(c) = creator {
        let mut handle: *mut c_void = std::ptr::null_mut();
        // SAFETY: the creator's contract: an owned object out.
        let rc = unsafe { c(&mut handle) };
        if rc != 0 {
            return Err(FfiError::take_raised(rc));
        }
        // SAFETY: the creator handed us a strong reference.
        return unsafe { ObjectRef::from_raw(handle.cast()) }
            .ok_or_else(|| FfiError::runtime("object creator returned NULL"));
    }
    if let Some(f) = types::attr_value("__ffi_new__", type_index).and_then(|v| v.into_object().ok()) {
        if f.type_index() == ti::FUNCTION {
            return function::call(&f, &[])?
                .into_object()
                .map_err(|_| FfiError::type_error("__ffi_new__ did not return an object"));
        }
    }
    Err(FfiError::runtime(format!(
        "Type `{}` does not support reflection creation (no native creator or __ffi_new__ type attr)",
        types::type_key(type_index)
    )))
}

/// `ffi.MakeObjectFromPackedArgs(type, key0, value0, ...)`.
pub(crate) fn make_object_from_packed_args(args: &[TVMFFIAny]) -> FfiResult<Any> {
    let first = args.first().ok_or_else(|| FfiError::type_error("MakeObjectFromPackedArgs needs a type"))?;
    let type_index = match crate::any::view_as_i64(first) {
        Some(i) => i32::try_from(i).map_err(|_| FfiError::value(format!("bad type index {i}")))?,
        None => {
            let key = crate::globals::arg_str("ffi.MakeObjectFromPackedArgs", args, 0)?;
            types::key_to_index(key).ok_or_else(|| FfiError::key(format!("Cannot find type `{key}`")))?
        }
    };
    if args.len() % 2 != 1 {
        return Err(FfiError::value("MakeObjectFromPackedArgs expects key-value pairs"));
    }
    let obj = create_empty_object(type_index)?;
    let mut keys = Vec::new();
    for i in (1..args.len()).step_by(2) {
        keys.push(crate::globals::arg_str("ffi.MakeObjectFromPackedArgs", args, i)?);
    }
    let mut found = vec![false; keys.len()];
    for f in all_fields(type_index) {
        let name = field_name(&f);
        let hit = (0..keys.len()).find(|&i| !found[i] && keys[i] == name);
        // SAFETY: the object is of this type; the argument views are valid.
        unsafe {
            if let Some(i) = hit {
                fields::set_field(obj.as_ptr(), &f, &args[i * 2 + 2])?;
                found[i] = true;
            } else if f.flags & HAS_DEFAULT != 0 {
                fields::set_field_default(obj.as_ptr(), &f)?;
            } else {
                return Err(FfiError::type_error(format!(
                    "Required field `{name}` not set in type `{}`",
                    types::type_key(type_index)
                )));
            }
        }
    }
    if let Some(i) = found.iter().position(|f| !f) {
        return Err(FfiError::type_error(format!(
            "Type `{}` does not have field `{}`",
            types::type_key(type_index),
            keys[i]
        )));
    }
    Ok(Any::object(obj))
}

struct InitEntry {
    info: TVMFFIFieldInfo,
    init: bool,
    kw_only: bool,
    has_default: bool,
}

struct AutoInit {
    type_index: i32,
    type_key: String,
    fields: Vec<InitEntry>,
    pos: Vec<usize>,
    by_name: HashMap<&'static str, usize>,
}

// SAFETY: the field infos point into the type table's storage, which lives for the process
// and is never written after registration; the setters they name are thread-safe calls.
unsafe impl Send for AutoInit {}
// SAFETY: as above.
unsafe impl Sync for AutoInit {}

impl AutoInit {
    fn new(type_index: i32) -> Self {
        let mut fields = Vec::new();
        let mut pos = Vec::new();
        let mut by_name = HashMap::new();
        for f in all_fields(type_index) {
            let e = InitEntry {
                info: f,
                init: f.flags & INIT_OFF == 0,
                kw_only: f.flags & KW_ONLY != 0,
                has_default: f.flags & HAS_DEFAULT != 0,
            };
            let i = fields.len();
            if e.init {
                by_name.insert(field_name(&f), i);
                if !e.kw_only {
                    pos.push(i);
                }
            }
            fields.push(e);
        }
        // Required positional fields come first (a stable partition).
        let (mut req, opt): (Vec<usize>, Vec<usize>) = pos.into_iter().partition(|&i| !fields[i].has_default);
        req.extend(opt);
        AutoInit { type_index, type_key: types::type_key(type_index), fields, pos: req, by_name }
    }

    fn setter_error(&self, fi: usize, what: &str, e: FfiError) -> FfiError {
        let mut msg = format!("{}.__ffi_init__() {what} '{}'", self.type_key, field_name(&self.fields[fi].info));
        msg.push_str(":\n  ");
        msg.push_str(&e.message().replace('\n', "\n  "));
        let cause = e.clone().into_object();
        FfiError::from_object(crate::error::make_error(&e.kind(), &msg, "", Some(cause), None))
    }

    fn bind(&self, obj: &ObjectRef, args: &[TVMFFIAny]) -> FfiResult<()> {
        let mut set = vec![false; self.fields.len()];
        let set_field = |fi: usize, v: &TVMFFIAny, set: &mut Vec<bool>| -> FfiResult<()> {
            // SAFETY: the object is of this type; `v` is a valid view.
            unsafe { fields::set_field(obj.as_ptr(), &self.fields[fi].info, v) }
                .map_err(|e| self.setter_error(fi, "field", e))?;
            set[fi] = true;
            Ok(())
        };
        let kw = kwargs_object();
        let kw_ptr = kw.raw().obj_ptr();
        let kwargs_pos = args.iter().position(|a| a.is_object() && a.obj_ptr() == kw_ptr);
        let tk = &self.type_key;
        if let Some(kp) = kwargs_pos {
            if kp > self.pos.len() {
                return Err(FfiError::type_error(format!(
                    "{tk}.__ffi_init__() takes at most {} positional argument(s), but {kp} were given",
                    self.pos.len()
                )));
            }
            for (i, &fi) in self.pos.iter().take(kp).enumerate() {
                set_field(fi, &args[i], &mut set)?;
            }
            let kv = args.len() - kp - 1;
            if kv % 2 != 0 {
                return Err(FfiError::type_error(format!(
                    "{tk}.__ffi_init__() KWARGS requires an even number of key-value arguments"
                )));
            }
            for i in (kp + 1..args.len()).step_by(2) {
                // SAFETY: argument views are valid.
                let key = unsafe { string::view_str_bytes(&args[i]) }.ok_or_else(|| {
                    FfiError::type_error(format!("{tk}.__ffi_init__() keyword names must be strings"))
                })?;
                let key = String::from_utf8_lossy(key).into_owned();
                let &fi = self.by_name.get(key.as_str()).ok_or_else(|| {
                    FfiError::type_error(format!("{tk}.__ffi_init__() got an unexpected keyword argument '{key}'"))
                })?;
                if set[fi] {
                    return Err(FfiError::type_error(format!(
                        "{tk}.__ffi_init__() got multiple values for argument '{key}'"
                    )));
                }
                set_field(fi, &args[i + 1], &mut set)?;
            }
        } else {
            if args.len() > self.pos.len() {
                return Err(FfiError::type_error(format!(
                    "{tk}.__ffi_init__() takes at most {} positional argument(s), but {} were given",
                    self.pos.len(),
                    args.len()
                )));
            }
            for (i, a) in args.iter().enumerate() {
                set_field(self.pos[i], a, &mut set)?;
            }
        }
        for (fi, e) in self.fields.iter().enumerate() {
            if set[fi] {
                continue;
            }
            if e.has_default {
                // SAFETY: the object is of this type.
                unsafe { fields::set_field_default(obj.as_ptr(), &e.info) }
                    .map_err(|err| self.setter_error(fi, "default for field", err))?;
            } else if e.init {
                let name = field_name(&e.info);
                return Err(FfiError::type_error(if e.kw_only {
                    format!("{tk}.__ffi_init__() missing required keyword-only argument: '{name}'")
                } else {
                    format!("{tk}.__ffi_init__() missing required argument: '{name}'")
                }));
            }
        }
        Ok(())
    }
}

/// The auto-generated `__ffi_init__` of a type.
pub(crate) fn make_init(type_index: i32) -> ObjectRef {
    let info = std::sync::Arc::new(AutoInit::new(type_index));
    function::from_fn(move |args| {
        let obj = create_empty_object(info.type_index)?;
        info.bind(&obj, args)?;
        Ok(Any::object(obj))
    })
}

/// `ffi._RegisterFFIInit(type_index)`.
pub(crate) fn register_ffi_init(type_index: i32) -> FfiResult<()> {
    let f = Any::object(make_init(type_index));
    types::register_attr(type_index, "__ffi_init__", f.raw())
}

unsafe extern "C" fn pyclass_deleter(obj: *mut c_void, flags: c_int) {
    let p = obj.cast::<TVMFFIObject>();
    if flags & DELETER_STRONG != 0 {
        // SAFETY: the object is ours (calloc'd with its fields at their offsets); the strong
        // count reached zero, so the fields are released once.
        unsafe {
            for f in all_fields((*p).type_index) {
                fields::drop_field((p as *mut u8).add(f.offset as usize), &f);
            }
        }
    }
    if flags & DELETER_WEAK != 0 {
        // SAFETY: the memory came from calloc in `pyclass_alloc`.
        unsafe { libc::free(obj) };
    }
}

fn pyclass_alloc(type_index: i32, total_size: usize) -> FfiResult<*mut TVMFFIObject> {
    // SAFETY: calloc of a positive size.
    let p = unsafe { libc::calloc(1, total_size.max(24)) }.cast::<TVMFFIObject>();
    if p.is_null() {
        return Err(FfiError::runtime(format!(
            "Failed to allocate {total_size} bytes for type {}",
            types::type_key(type_index)
        )));
    }
    // SAFETY: fresh zeroed memory of at least a header (zeroed fields are None / null / 0).
    unsafe {
        p.write(TVMFFIObject {
            combined_ref_count: AtomicU64::new(1 | (1 << 32)),
            type_index,
            padding: 0,
            deleter: Some(pyclass_deleter),
        })
    };
    Ok(p)
}

/// `ffi._PyClassRegisterTypeAttrColumns(type_index, total_size)`: `__ffi_init__`,
/// `__ffi_new__` and `__ffi_shallow_copy__` for a class whose layout Python defined.
pub(crate) fn pyclass_register(type_index: i32, total_size: i32) -> FfiResult<()> {
    types::type_info(type_index)
        .ok_or_else(|| FfiError::value(format!("Cannot find type info for type_index={type_index}")))?;
    let size = usize::try_from(total_size).map_err(|_| FfiError::value(format!("bad total size {total_size}")))?;
    let need =
        all_fields(type_index).iter().map(|f| (f.offset.max(0) + f.size.max(0)) as usize).max().unwrap_or(0).max(24);
    if size < need {
        return Err(FfiError::value(format!(
            "type `{}`: total size {total_size} does not cover its fields ({need} bytes)",
            types::type_key(type_index)
        )));
    }
    register_ffi_init(type_index)?;
    let new_fn = function::from_fn(move |_| {
        let p = pyclass_alloc(type_index, size)?;
        // SAFETY: we own the new object's one reference.
        Ok(Any::opt_object(unsafe { ObjectRef::from_raw(p) }))
    });
    types::register_attr(type_index, "__ffi_new__", Any::object(new_fn).raw())?;
    let copy_fn = function::from_fn(move |args| {
        let src = args.first().filter(|a| a.is_object() && a.type_index == type_index).ok_or_else(|| {
            FfiError::type_error(format!("__ffi_shallow_copy__ expects a {}", types::type_key(type_index)))
        })?;
        let p = pyclass_alloc(type_index, size)?;
        // SAFETY: the source is a live object of this type; the copy is fresh zeroed storage.
        unsafe {
            let s = src.obj_ptr() as *const u8;
            let mut seen = std::collections::HashSet::new();
            // Fields that alias one storage (an enum's `value`) are copied once.
            for f in all_fields(type_index).iter().filter(|f| seen.insert(f.offset)) {
                let off = f.offset as usize;
                fields::copy_field((p as *mut u8).add(off), s.add(off), f);
            }
            Ok(Any::opt_object(ObjectRef::from_raw(p)))
        }
    });
    types::register_attr(type_index, "__ffi_shallow_copy__", Any::object(copy_fn).raw())
}

/// `ffi.MakeFieldSetter(field_type_index, converter, f_convert)`: a setter function object that
/// converts through the Python converter, then writes the field in place.
pub(crate) fn make_field_setter(field_type_index: i32, converter: i64, f_convert: i64) -> FfiResult<ObjectRef> {
    type FConvert = unsafe extern "C" fn(*mut c_void, *const TVMFFIAny, *mut TVMFFIAny) -> c_int;
    if f_convert == 0 {
        return Err(FfiError::value("MakeFieldSetter: the converter function is NULL"));
    }
    // SAFETY: the caller (the Python package) passes a C function of this signature.
    let conv: FConvert = unsafe { std::mem::transmute::<usize, FConvert>(f_convert as usize) };
    let handle = converter as usize;
    Ok(function::from_fn(move |args| {
        if args.len() != 2 {
            return Err(FfiError::type_error("a field setter takes (address, value)"));
        }
        let addr = match args[0].type_index {
            ti::OPAQUE_PTR => args[0].obj_ptr() as *mut u8,
            _ => return Err(FfiError::type_error("a field setter's first argument is the field address")),
        };
        let mut out = TVMFFIAny::NONE;
        // SAFETY: the converter's contract: a borrowed value in, an owned value out.
        let rc = unsafe { conv(handle as *mut c_void, &args[1], &mut out) };
        if rc != 0 {
            return Err(FfiError::take_raised(rc));
        }
        // SAFETY: an owned value from the converter; `addr` is the field's storage.
        unsafe { fields::write_field_value(addr, field_type_index, Any::from_raw(out)) }?;
        Ok(Any::none())
    }))
}

/// A C entry for `ffi.MakeFieldGetter`, kept to show the getter pointers are plain C functions.
pub(crate) fn field_getter_address(type_index: i32) -> FfiResult<i64> {
    Ok(fields::getter_for(type_index)? as usize as i64)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::TVMFFIByteArray;

    unsafe extern "C" fn set_i64(field: *mut c_void, value: *const TVMFFIAny) -> i32 {
        // SAFETY: the test's fields are i64 cells; the value is a valid view.
        unsafe { *field.cast::<i64>() = crate::any::view_as_i64(&*value).unwrap_or(-1) };
        0
    }

    fn int_field(name: &'static str, offset: i64, flags: i64, default: i64) -> TVMFFIFieldInfo {
        TVMFFIFieldInfo {
            name: TVMFFIByteArray::of(name.as_bytes()),
            doc: TVMFFIByteArray::EMPTY,
            metadata: TVMFFIByteArray::EMPTY,
            flags,
            size: 8,
            alignment: 8,
            offset,
            getter: Some(fields::getter_for(ti::INT).unwrap()),
            setter: set_i64 as *mut c_void,
            default_value_or_factory: TVMFFIAny::with_bits(ti::INT, default as u64),
            field_static_type_index: ti::INT,
        }
    }

    fn point_type(key: &str) -> i32 {
        let t = types::get_or_alloc_index(key, -1, 1, 0, true, ti::OBJECT).unwrap();
        types::register_field(t, &int_field("x", 24, 0, 0)).unwrap();
        types::register_field(t, &int_field("y", 32, HAS_DEFAULT, 7)).unwrap();
        types::register_field(t, &int_field("z", 40, KW_ONLY | HAS_DEFAULT, 9)).unwrap();
        pyclass_register(t, 48).unwrap();
        t
    }

    fn get(o: &Any, name: &str) -> i64 {
        let o = o.as_object().unwrap();
        let f = all_fields(o.type_index()).into_iter().find(|f| field_name(f) == name).unwrap();
        // SAFETY: the object is of the test type.
        unsafe { fields::get_field(o.as_ptr(), &f) }.unwrap().as_i64().unwrap()
    }

    #[test]
    fn auto_init_binds_positional_keyword_and_defaults() {
        let t = point_type("dc.test.Point");
        let init = types::attr_value("__ffi_init__", t).unwrap().into_object().unwrap();
        let o = function::call_any(&init, &[Any::int(1)]).unwrap();
        assert_eq!((get(&o, "x"), get(&o, "y"), get(&o, "z")), (1, 7, 9));
        let o = function::call_any(&init, &[Any::int(1), kwargs_object(), Any::string("z"), Any::int(5)]).unwrap();
        assert_eq!((get(&o, "x"), get(&o, "y"), get(&o, "z")), (1, 7, 5));
        let e = function::call_any(&init, &[]).unwrap_err();
        assert!(e.message().contains("missing required argument: 'x'"), "{}", e.message());
        let e = function::call_any(&init, &[Any::int(1), Any::int(2), Any::int(3)]).unwrap_err();
        assert!(e.message().contains("takes at most 2 positional argument(s), but 3 were given"));
        let e = function::call_any(&init, &[kwargs_object(), Any::string("w"), Any::int(1)]).unwrap_err();
        assert!(e.message().contains("unexpected keyword argument 'w'"));
    }

    #[test]
    fn packed_args_and_shallow_copy() {
        let t = point_type("dc.test.Point2");
        let args = [Any::int(t as i64), Any::string("x"), Any::int(3)];
        let views: Vec<TVMFFIAny> = args.iter().map(|a| *a.raw()).collect();
        let o = make_object_from_packed_args(&views).unwrap();
        assert_eq!((get(&o, "x"), get(&o, "y")), (3, 7));
        let copy = types::attr_value("__ffi_shallow_copy__", t).unwrap().into_object().unwrap();
        let c = function::call_any(&copy, std::slice::from_ref(&o)).unwrap();
        assert_ne!(c.raw().obj_ptr(), o.raw().obj_ptr());
        assert_eq!(get(&c, "x"), 3);
        let bad = [Any::int(t as i64), Any::string("nope"), Any::int(3), Any::string("x"), Any::int(1)];
        let views: Vec<TVMFFIAny> = bad.iter().map(|a| *a.raw()).collect();
        assert!(make_object_from_packed_args(&views).unwrap_err().message().contains("does not have field `nope`"));
    }
}
