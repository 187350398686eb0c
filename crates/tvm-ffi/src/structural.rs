//! Structural equality and hashing, access paths and structural keys (tvm-ffi's `extra/structural_*`
//! and `reflection/access_path.h`), over objects' reflection.

pub(crate) mod access_path;
pub(crate) mod cont;
pub(crate) mod equal;
pub(crate) mod error_context;
pub(crate) mod hash;
pub(crate) mod mutate;
pub(crate) mod reflect;
pub(crate) mod visit;

use super::any::Any;
use super::globals::{arg_any, expect_args};
use super::object::{make_object, ObjectRef};
use super::registry::Builder;
use super::{ti, types, FfiError, FfiResult, TVMFFIAny};
use std::sync::OnceLock;

/// `StructuralKeyObj` after the header.
#[repr(C)]
pub(crate) struct KeyPayload {
    /// The wrapped value.
    pub key: Any,
    /// Its structural hash.
    pub hash_i64: i64,
}

/// `ffi.VisitInterrupt` after the header: the payload that stops a visit.
#[repr(C)]
pub(crate) struct InterruptPayload {
    /// The payload.
    pub value: Any,
}

/// The built-in types whose structural children this library's traversals find themselves
/// (their `__s_visit__` / `__s_mutate__` attributes are native hooks for C++ engines).
pub(crate) fn native_builtin(type_index: i32) -> bool {
    matches!(type_index, ti::ARRAY | ti::LIST | ti::MAP | ti::DICT | ti::STR | ti::BYTES | ti::BIG_INT)
}

/// The type index of `ffi.StructuralKey`.
pub(crate) fn key_type() -> i32 {
    static T: OnceLock<i32> = OnceLock::new();
    *T.get_or_init(|| reflect::type_index_of("ffi.StructuralKey"))
}

/// A new `ffi.StructuralKey`.
pub(crate) fn make_key(key: Any) -> FfiResult<ObjectRef> {
    let h = hash::structural_hash(&key, false, false)? as i64;
    Ok(make_object(key_type(), KeyPayload { key, hash_i64: h }))
}

/// A new `ffi.VisitInterrupt`.
pub(crate) fn make_interrupt(value: Any) -> ObjectRef {
    make_object(ti::VISIT_INTERRUPT, InterruptPayload { value })
}

fn key_of(a: &Any) -> FfiResult<(ObjectRef, &KeyPayload)> {
    let o = a.as_object().filter(|o| o.type_index() == key_type()).ok_or_else(|| {
        FfiError::type_error(format!("expected an ffi.StructuralKey, got `{}`", types::type_key(a.type_index())))
    })?;
    // SAFETY: checked to be a StructuralKey, whose payload is KeyPayload; the payload lives as
    // long as the object `a` holds.
    let p = unsafe { &*(o.payload::<KeyPayload>() as *const KeyPayload) };
    Ok((o, p))
}

/// `StructuralKeyEqual`.
pub(crate) fn key_equal(l: &Any, r: &Any) -> FfiResult<bool> {
    let (lo, lp) = key_of(l)?;
    let (ro, rp) = key_of(r)?;
    if lo.same_as(&ro) {
        return Ok(true);
    }
    if lp.hash_i64 != rp.hash_i64 {
        return Ok(false);
    }
    equal::structural_equal(&lp.key, &rp.key, false, false)
}

fn bool_arg(name: &str, a: &[TVMFFIAny], i: usize) -> FfiResult<bool> {
    a.get(i).and_then(super::any::view_as_bool).ok_or_else(|| {
        FfiError::type_error(format!("Mismatched type on argument #{i} when calling: `{name}`. Expected `bool`"))
    })
}

fn register_types() {
    // Allocate the type indices in libtvm_ffi's order (the lead's DYN_TYPES list).
    access_path::step_type();
    access_path::path_type();
    visit::visitor_type();
    error_context::context_type();
    mutate::mutator_type();
    key_type();
    if let Err(e) = access_path::register_types() {
        eprintln!("tvm-ffi: access path types not registered: {e}");
    }
    let kt = key_type();
    reflect::def_metadata(kt, 24 + std::mem::size_of::<KeyPayload>(), reflect::kind::TREE_NODE);
    reflect::def_field(
        kt,
        "key",
        24 + std::mem::offset_of!(KeyPayload, key),
        16,
        reflect::get_any,
        ti::ANY,
        r#"{"type":"Any"}"#,
    );
    reflect::def_field(
        kt,
        "hash_i64",
        24 + std::mem::offset_of!(KeyPayload, hash_i64),
        8,
        reflect::get_i64,
        ti::INT,
        r#"{"type":"int"}"#,
    );
    reflect::def_method(
        kt,
        "__ffi_init__",
        true,
        &reflect::fn_schema(r#"{"type":"ffi.Object"}"#, &[r#"{"type":"Any"}"#]),
        |a| {
            expect_args("ffi.StructuralKey.__ffi_init__", a, 1)?;
            Ok(Any::object(make_key(arg_any("ffi.StructuralKey.__ffi_init__", a, 0)?)?))
        },
    );
    let any_hash = super::function::from_fn(|a| {
        let k = arg_any("__any_hash__", a, 0)?;
        let (_, p) = key_of(&k)?;
        Ok(Any::int(p.hash_i64))
    });
    let _ = types::register_attr(kt, "__any_hash__", Any::object(any_hash).raw());
    let any_equal = super::function::from_fn(|a| {
        Ok(Any::bool(key_equal(&arg_any("__any_equal__", a, 0)?, &arg_any("__any_equal__", a, 1)?)?))
    });
    let _ = types::register_attr(kt, "__any_equal__", Any::object(any_equal).raw());
    let vi = types::get_or_alloc_index("ffi.VisitInterrupt", ti::VISIT_INTERRUPT, 1, 0, false, ti::OBJECT)
        .unwrap_or(ti::VISIT_INTERRUPT);
    reflect::def_metadata(vi, 24 + std::mem::size_of::<InterruptPayload>(), reflect::kind::TREE_NODE);
    reflect::def_field_flags(
        vi,
        "value",
        (24 + std::mem::offset_of!(InterruptPayload, value), 16),
        reflect::get_any,
        ti::ANY,
        r#"{"type":"Any"}"#,
        super::FIELD_HAS_DEFAULT,
    );
}

/// Adds this subsystem's globals.
pub(crate) fn register(b: &mut Builder) {
    register_types();
    visit::register(b);
    mutate::register(b);
    error_context::register(b);
    b.add("ffi.StructuralEqual", |a| {
        let n = "ffi.StructuralEqual";
        expect_args(n, a, 4)?;
        let r =
            equal::structural_equal(&arg_any(n, a, 0)?, &arg_any(n, a, 1)?, bool_arg(n, a, 2)?, bool_arg(n, a, 3)?)?;
        Ok(Any::bool(r))
    });
    b.add("ffi.GetFirstStructuralMismatch", |a| {
        let n = "ffi.GetFirstStructuralMismatch";
        expect_args(n, a, 4)?;
        let r = equal::first_mismatch(&arg_any(n, a, 0)?, &arg_any(n, a, 1)?, bool_arg(n, a, 2)?, bool_arg(n, a, 3)?)?;
        Ok(match r {
            None => Any::none(),
            Some((l, r)) => cont::make_array(vec![Any::object(l), Any::object(r)]),
        })
    });
    b.add("ffi.StructuralHash", |a| {
        let n = "ffi.StructuralHash";
        expect_args(n, a, 3)?;
        Ok(Any::int(hash::structural_hash(&arg_any(n, a, 0)?, bool_arg(n, a, 1)?, bool_arg(n, a, 2)?)? as i64))
    });
    b.add("ffi.StructuralKey", |a| {
        expect_args("ffi.StructuralKey", a, 1)?;
        Ok(Any::object(make_key(arg_any("ffi.StructuralKey", a, 0)?)?))
    });
    b.add("ffi.StructuralKeyEqual", |a| {
        expect_args("ffi.StructuralKeyEqual", a, 2)?;
        let (l, r) = (arg_any("ffi.StructuralKeyEqual", a, 0)?, arg_any("ffi.StructuralKeyEqual", a, 1)?);
        if l.type_index() == r.type_index() && l.raw().bits() == r.raw().bits() {
            return Ok(Any::bool(true));
        }
        Ok(Any::bool(key_equal(&l, &r)?))
    });
    b.add("ffi.VisitInterrupt", |a| {
        expect_args("ffi.VisitInterrupt", a, 1)?;
        Ok(Any::object(make_interrupt(arg_any("ffi.VisitInterrupt", a, 0)?)))
    });
}
