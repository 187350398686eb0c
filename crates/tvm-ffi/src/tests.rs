//! Tests of the tvm-ffi foundation: reference counts, values, the type table, functions, errors.

use super::any::{Any, TVMFFIAny};
use super::object::{make_object, ObjectRef, DELETER_STRONG, DELETER_WEAK};
use super::{error, function, registry, string, ti, types, FfiError};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

struct Counted(Arc<AtomicUsize>);
impl Drop for Counted {
    fn drop(&mut self) {
        self.0.fetch_add(1, Ordering::SeqCst);
    }
}

#[test]
fn strong_references_free_the_payload_once() {
    let drops = Arc::new(AtomicUsize::new(0));
    let o = make_object(ti::OBJECT, Counted(drops.clone()));
    assert_eq!(o.use_count(), 1);
    let o2 = o.clone();
    assert_eq!(o.use_count(), 2);
    let a = Any::object(o2);
    assert_eq!(a.type_index(), ti::OBJECT);
    drop(o);
    assert_eq!(drops.load(Ordering::SeqCst), 0);
    drop(a);
    assert_eq!(drops.load(Ordering::SeqCst), 1);
}

#[test]
fn weak_reference_keeps_the_memory_after_the_payload_goes() {
    let drops = Arc::new(AtomicUsize::new(0));
    let o = make_object(ti::OBJECT, Counted(drops.clone()));
    let p = o.as_ptr();
    // A weak reference, as tvm-ffi's WeakObjectPtr takes it.
    // SAFETY: `p` is live while `o` is held.
    unsafe { (*p).combined_ref_count.fetch_add(1 << 32, Ordering::Relaxed) };
    drop(o);
    assert_eq!(drops.load(Ordering::SeqCst), 1, "the payload goes with the last strong reference");
    // SAFETY: the weak reference keeps the header readable.
    let count = unsafe { (*p).combined_ref_count.load(Ordering::Relaxed) };
    assert_eq!(count, 1 << 32);
    // Dropping the weak reference frees the memory through the deleter's weak flag.
    // SAFETY: we hold the last (weak) reference.
    unsafe {
        (*p).combined_ref_count.fetch_sub(1 << 32, Ordering::Relaxed);
        ((*p).deleter.expect("deleter"))(p.cast(), DELETER_WEAK);
    }
    assert_eq!(drops.load(Ordering::SeqCst), 1);
    let _ = DELETER_STRONG;
}

#[test]
fn strings_are_small_up_to_seven_bytes() {
    let s = Any::string("1234567");
    assert_eq!(s.type_index(), ti::SMALL_STR);
    assert_eq!(s.as_str(), Some("1234567"));
    let l = Any::string("12345678");
    assert_eq!(l.type_index(), ti::STR);
    assert_eq!(l.as_str(), Some("12345678"));
    let b = Any::bytes(b"\x00\xff");
    assert_eq!(b.type_index(), ti::SMALL_BYTES);
    assert_eq!(b.as_str_bytes(), Some(&b"\x00\xff"[..]));
    let o = string::make_bytes_object(b"hello world", false);
    assert_eq!(string::object_bytes(&o), b"hello world");
}

#[test]
fn views_become_owned_values() {
    let c = c"a raw string that is long";
    let v = TVMFFIAny::with_bits(ti::RAW_STR, c.as_ptr() as u64);
    // SAFETY: the view points to a live C string.
    let a = unsafe { Any::from_view(&v) }.unwrap();
    assert_eq!(a.type_index(), ti::STR);
    assert_eq!(a.as_str(), Some("a raw string that is long"));
    // An rvalue reference is moved from, once.
    let o = make_object(ti::OBJECT, ());
    let mut slot = o.into_raw();
    let v = TVMFFIAny::with_bits(ti::OBJECT_RVALUE_REF, std::ptr::addr_of_mut!(slot) as u64);
    // SAFETY: the slot holds an owned object pointer.
    let moved = unsafe { Any::from_view(&v) }.unwrap();
    assert!(slot.is_null());
    assert_eq!(moved.as_object().unwrap().use_count(), 2);
    // SAFETY: the slot is now null.
    let again = unsafe { Any::from_view(&v) };
    assert!(again.unwrap_err().message().contains("already moved"));
    // A data type leaves the rest of the payload zero.
    let d = Any::dtype(tvm_runtime_classic::abi::DLDataType { code: 2, bits: 32, lanes: 1 });
    assert_eq!(d.raw().bits() >> 32, 0);
    // A null object is an error, not a crash.
    let v = TVMFFIAny::with_bits(ti::ARRAY, 0);
    // SAFETY: a null pointer is checked.
    assert!(unsafe { Any::from_view(&v) }.is_err());
    // A null raw string is an error, not a crash.
    let v = TVMFFIAny::with_bits(ti::RAW_STR, 0);
    // SAFETY: a null pointer is checked.
    assert!(unsafe { Any::from_view(&v) }.is_err());
}

#[test]
fn numbers_convert_as_tvm_ffi_does() {
    assert_eq!(Any::bool(true).as_i64(), Some(1));
    assert_eq!(Any::int(3).as_f64(), Some(3.0));
    assert_eq!(Any::float(2.5).as_i64(), None);
    assert_eq!(Any::int(0).as_bool(), Some(false));
    assert!(Any::opaque_ptr(std::ptr::null_mut()).is_none());
}

#[test]
fn type_table_allocates_in_reserved_child_slots() {
    let base = types::get_or_alloc_index("test.SlotBase", -1, 1, 3, false, ti::OBJECT).unwrap();
    assert!(base >= ti::DYN_OBJECT_BEGIN);
    let c1 = types::get_or_alloc_index("test.SlotChild1", -1, 2, 0, false, base).unwrap();
    let c2 = types::get_or_alloc_index("test.SlotChild2", -1, 2, 1, false, base).unwrap();
    assert_eq!((c1, c2), (base + 1, base + 2));
    // The parent's 3 slots are used up and it cannot overflow.
    let e = types::get_or_alloc_index("test.SlotChild3", -1, 2, 0, false, base).unwrap_err();
    assert!(e.message().contains("Reach maximum number of sub-classes"), "{}", e.message());
    // Asking again for a known key gives its index.
    assert_eq!(types::get_or_alloc_index("test.SlotChild1", -1, 2, 0, false, base).unwrap(), c1);
    assert!(types::is_instance(c1, base));
    assert!(types::is_instance(c2, ti::OBJECT));
    assert!(!types::is_instance(base, c1));
    // SAFETY: infos live for the process.
    let info = unsafe { &*types::type_info(c2).unwrap() };
    assert_eq!(info.type_depth, 2);
    // SAFETY: a depth-2 type has two ancestors.
    assert_eq!(unsafe { (**info.type_ancestors.add(1)).type_index }, base);
    assert!(types::get_or_alloc_index("test.Orphan", -1, 3, 0, true, base).is_err(), "depth must follow the parent");
    assert_eq!(types::key_to_index("ffi.Array"), Some(ti::ARRAY));
}

#[test]
fn functions_call_and_raise() {
    let f = function::from_fn(|args| {
        let x = args.first().and_then(super::any::view_as_i64).ok_or_else(|| FfiError::type_error("int expected"))?;
        if x < 0 {
            return Err(FfiError::value(format!("negative: {x}")));
        }
        Ok(Any::int(x + 1))
    });
    assert_eq!(function::call_any(&f, &[Any::int(41)]).unwrap().as_i64(), Some(42));
    let e = function::call_any(&f, &[Any::int(-1)]).unwrap_err();
    assert_eq!((e.kind().as_str(), e.message().as_str()), ("ValueError", "negative: -1"));
    let e = function::call_any(&f, &[Any::string("x")]).unwrap_err();
    assert_eq!(e.kind(), "TypeError");
    // A panic in a Rust function is an error, not an unwind across the C boundary.
    let p = function::from_fn(|_| panic!("boom"));
    let e = function::call_any(&p, &[]).unwrap_err();
    assert_eq!(e.kind(), "InternalError");
    assert!(e.message().contains("boom"));
}

#[test]
fn globals_set_get_and_refuse_overrides() {
    let f = function::from_fn(|_| Ok(Any::int(7)));
    registry::set("test.seven", f.clone(), false, None).unwrap();
    assert!(registry::set("test.seven", f, false, None).is_err());
    let g = registry::get("test.seven").unwrap();
    assert_eq!(function::call_any(&g, &[]).unwrap().as_i64(), Some(7));
    assert!(registry::remove("test.seven"));
    assert!(registry::get("test.seven").is_none());
    assert!(registry::get("ffi.String").is_some());
}

#[test]
fn an_error_releases_its_cause_and_context_once() {
    let drops = Arc::new(AtomicUsize::new(0));
    let ctx = make_object(ti::OBJECT, Counted(drops.clone()));
    let cause = error::make_error("ValueError", "inner", "", None, None);
    let e = error::make_error("RuntimeError", "outer", "", Some(cause.clone()), Some(ctx));
    assert_eq!(cause.use_count(), 2);
    drop(e);
    assert_eq!(cause.use_count(), 1);
    assert_eq!(drops.load(Ordering::SeqCst), 1);
}

#[test]
fn errors_travel_as_objects() {
    let e = error::make_error("KeyError", "no such key", "  File \"x\", line 1\n", None, None);
    let (k, m, b) = error::error_parts(&e);
    assert_eq!((k.as_str(), m.as_str()), ("KeyError", "no such key"));
    assert!(b.contains("line 1"));
    assert_eq!(FfiError::value("x").raise(), -1);
    let raised: ObjectRef = error::take_raised().unwrap();
    assert_eq!(raised.type_index(), ti::ERROR);
    assert_eq!(error::error_parts(&raised).0, "ValueError");
    assert!(error::take_raised().is_none());
}

#[test]
fn core_errors_cross_with_their_kind() {
    use tvm_runtime_classic::error::Error;
    let parts = |e: FfiError| (e.kind(), e.message());
    assert_eq!(parts(Error::key("k: v").into()), ("KeyError".into(), "k: v".into()));
    assert_eq!(parts(Error::from_foreign("two words: x".into()).into()), ("TVMError".into(), "two words: x".into()));
    // The classic API's pending frontend error is not tvm-ffi's pending signal.
    let e: FfiError = Error::already_set().into();
    assert!(!e.is_env_signal());
    assert_eq!(parts(e), ("TVMError".into(), "a frontend error is pending".into()));
    assert!(FfiError::env_signal().is_env_signal());
    assert_eq!(parts(FfiError::env_signal()), ("EnvErrorAlreadySet".into(), String::new()));
    assert_eq!(FfiError::env_signal().raise(), -2);
}

unsafe extern "C" fn first_arg_back(
    handle: *mut std::ffi::c_void,
    _args: *const TVMFFIAny,
    _n: i32,
    out: *mut TVMFFIAny,
) -> i32 {
    // SAFETY: the result cell is writable.
    unsafe { *out = Any::int(handle as i64).into_raw() };
    0
}

#[test]
fn extern_c_functions_get_their_handle_or_without_one_the_function() {
    // With a handle: the callback gets it.
    let mut h = 7u8;
    let hp = (&mut h as *mut u8).cast::<std::ffi::c_void>();
    let f = function::from_extern_c(hp, first_arg_back, None);
    assert_eq!(function::call_any(&f, &[]).unwrap().as_i64(), Some(hp as i64));
    // Without a handle or a deleter the callback is the function's own entry (as tvm-ffi's
    // FromExternC makes it): its first argument is the function object.
    let g = function::from_extern_c(std::ptr::null_mut(), first_arg_back, None);
    assert_eq!(function::call_any(&g, &[]).unwrap().as_i64(), Some(g.as_ptr() as i64));
}
