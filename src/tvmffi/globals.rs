//! The library's own `ffi.*` global functions, put in the registry on first use.

use super::any::{Any, TVMFFIAny};
use super::registry::{self, Builder};
use super::{string, types, FfiError, FfiResult};

/// Adds every built-in global.
pub fn register_all(b: &mut Builder) {
    register_core(b);
}

/// Checks the argument count of a global.
pub fn expect_args(name: &str, args: &[TVMFFIAny], n: usize) -> FfiResult<()> {
    if args.len() != n {
        return Err(FfiError::type_error(format!(
            "Mismatched number of arguments when calling: `{name}`. Expected {n} but got {} arguments",
            args.len()
        )));
    }
    Ok(())
}

/// A string argument.
pub fn arg_str<'a>(name: &str, args: &'a [TVMFFIAny], i: usize) -> FfiResult<&'a str> {
    let v = args.get(i).ok_or_else(|| FfiError::type_error(format!("`{name}`: missing argument #{i}")))?;
    // SAFETY: argument cells are valid views for the call's duration.
    let b = unsafe { string::view_str_bytes(v) }.ok_or_else(|| {
        FfiError::type_error(format!(
            "Mismatched type on argument #{i} when calling: `{name}`. Expected `str` but got `{}`",
            types::type_key(v.type_index)
        ))
    })?;
    std::str::from_utf8(b).map_err(|_| FfiError::value(format!("`{name}`: argument #{i} is not UTF-8")))
}

/// An owned copy of an argument.
pub fn arg_any(name: &str, args: &[TVMFFIAny], i: usize) -> FfiResult<Any> {
    let v = args.get(i).ok_or_else(|| FfiError::type_error(format!("`{name}`: missing argument #{i}")))?;
    // SAFETY: argument cells are valid views for the call's duration.
    unsafe { Any::from_view(v) }
}

fn register_core(b: &mut Builder) {
    b.add("ffi.String", |a| {
        expect_args("ffi.String", a, 1)?;
        Ok(Any::string(arg_str("ffi.String", a, 0)?))
    });
    b.add("ffi.Bytes", |a| {
        expect_args("ffi.Bytes", a, 1)?;
        // SAFETY: argument cells are valid views.
        let bytes =
            unsafe { string::view_str_bytes(&a[0]) }.ok_or_else(|| FfiError::type_error("ffi.Bytes expects bytes"))?;
        Ok(Any::bytes(bytes))
    });
    b.add("ffi.FunctionRemoveGlobal", |a| {
        expect_args("ffi.FunctionRemoveGlobal", a, 1)?;
        Ok(Any::bool(registry::remove(arg_str("ffi.FunctionRemoveGlobal", a, 0)?)))
    });
    b.add("ffi.GetGlobalFuncMetadata", |a| {
        expect_args("ffi.GetGlobalFuncMetadata", a, 1)?;
        let n = arg_str("ffi.GetGlobalFuncMetadata", a, 0)?;
        Ok(registry::metadata(n).map(|m| Any::string(&m)).unwrap_or_default())
    });
    b.add("ffi.FunctionListGlobalNamesFunctor", |a| {
        expect_args("ffi.FunctionListGlobalNamesFunctor", a, 0)?;
        // A functor: f(-1) is the count, f(i) the i-th name (a snapshot taken now).
        let names = registry::names();
        Ok(Any::object(super::function::from_fn(move |a| {
            let i =
                a.first().and_then(super::any::view_as_i64).ok_or_else(|| FfiError::type_error("expects an int"))?;
            if i < 0 {
                return Ok(Any::int(names.len() as i64));
            }
            names
                .get(i as usize)
                .map(|n| Any::string(n))
                .ok_or_else(|| FfiError::index(format!("index {i} out of range")))
        })))
    });
}
