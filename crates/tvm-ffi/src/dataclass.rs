//! Reflection-driven dataclass support (tvm-ffi's `extra/dataclass.cc`, `reflection_extra.cc`
//! and the enum types of `object.cc`): field access, auto-generated `__ffi_init__`, objects of
//! Python-defined classes, repr, recursive comparison and hashing, deep copy, and enums.

pub mod access;
pub mod compare;
pub mod convert;
pub mod copy;
pub mod enums;
pub mod fields;
pub mod init;
pub mod repr;

use super::globals::{arg_any, expect_args};
use super::registry::Builder;
use super::{types, Any, FfiError, FfiResult, TVMFFIAny};

fn arg_i64(name: &str, a: &[TVMFFIAny], i: usize) -> FfiResult<i64> {
    a.get(i).and_then(super::any::view_as_i64).ok_or_else(|| {
        FfiError::type_error(format!("Mismatched type on argument #{i} when calling: `{name}`. Expected `int`"))
    })
}

fn arg_i32(name: &str, a: &[TVMFFIAny], i: usize) -> FfiResult<i32> {
    let v = arg_i64(name, a, i)?;
    i32::try_from(v).map_err(|_| FfiError::value(format!("`{name}`: argument #{i} ({v}) is out of range")))
}

fn cmp_global(b: &mut Builder, name: &'static str, eq_only: bool, pick: fn(i32) -> bool) {
    b.add(name, move |a| {
        expect_args(name, a, 2)?;
        let c = compare::recursive_compare(&arg_any(name, a, 0)?, &arg_any(name, a, 1)?, eq_only)?;
        Ok(Any::bool(pick(c)))
    });
}

/// Adds this subsystem's globals and registers the enum types.
pub fn register(b: &mut Builder) {
    for key in [
        "ffi.EnumState",
        "ffi.Enum",
        "ffi.IntEnum",
        "ffi.StrEnum",
        "ffi.reflection.AccessStep",
        "ffi.reflection.AccessPath",
    ] {
        let parent = if key.ends_with("IntEnum") || key.ends_with("StrEnum") {
            types::key_to_index("ffi.Enum")
        } else {
            Some(super::ti::OBJECT)
        };
        if let Some(p) = parent {
            let depth = if p == super::ti::OBJECT { 1 } else { 2 };
            let _ = types::get_or_alloc_index(key, -1, depth, 0, true, p);
        }
    }
    if let Err(e) = enums::register_types() {
        eprintln!("tvm-ffi: enum types not registered: {e}");
    }
    convert::register_converters();
    b.add("ffi._RegisterFFIInit", |a| {
        expect_args("ffi._RegisterFFIInit", a, 1)?;
        init::register_ffi_init(arg_i32("ffi._RegisterFFIInit", a, 0)?)?;
        Ok(Any::none())
    });
    b.add("ffi._PyClassRegisterTypeAttrColumns", |a| {
        let n = "ffi._PyClassRegisterTypeAttrColumns";
        expect_args(n, a, 2)?;
        init::pyclass_register(arg_i32(n, a, 0)?, arg_i32(n, a, 1)?)?;
        Ok(Any::none())
    });
    b.add("ffi.MakeFieldGetter", |a| {
        expect_args("ffi.MakeFieldGetter", a, 1)?;
        Ok(Any::int(init::field_getter_address(arg_i32("ffi.MakeFieldGetter", a, 0)?)?))
    });
    b.add("ffi.MakeFieldSetter", |a| {
        let n = "ffi.MakeFieldSetter";
        expect_args(n, a, 3)?;
        Ok(Any::object(init::make_field_setter(arg_i32(n, a, 0)?, arg_i64(n, a, 1)?, arg_i64(n, a, 2)?)?))
    });
    b.add("ffi.MakeObjectFromPackedArgs", init::make_object_from_packed_args);
    b.add("ffi.DeepCopy", |a| {
        expect_args("ffi.DeepCopy", a, 1)?;
        copy::deep_copy(&arg_any("ffi.DeepCopy", a, 0)?)
    });
    b.add("ffi.ReprPrint", |a| {
        expect_args("ffi.ReprPrint", a, 1)?;
        Ok(Any::string(&repr::repr_print(&arg_any("ffi.ReprPrint", a, 0)?)?))
    });
    b.add("ffi.RecursiveHash", |a| {
        expect_args("ffi.RecursiveHash", a, 1)?;
        Ok(Any::int(compare::recursive_hash(&arg_any("ffi.RecursiveHash", a, 0)?)?))
    });
    cmp_global(b, "ffi.RecursiveEq", true, |c| c == 0);
    cmp_global(b, "ffi.RecursiveLt", false, |c| c < 0);
    cmp_global(b, "ffi.RecursiveLe", false, |c| c <= 0);
    cmp_global(b, "ffi.RecursiveGt", false, |c| c > 0);
    cmp_global(b, "ffi.RecursiveGe", false, |c| c >= 0);
}
