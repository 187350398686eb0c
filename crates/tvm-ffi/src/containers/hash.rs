//! `AnyHash` / `AnyEqual` of tvm-ffi's `any.h`: what `ffi.Map` and `ffi.Dict` hash and compare
//! keys with. C++ code compiled against the headers probes our maps inline with the same
//! functions, so the values must be bit for bit the same: strings and bytes (small or not) by
//! content, objects with an `__any_hash__` / `__any_equal__` type attribute through it, anything
//! else by its 64 raw bits (ints, floats, pointers: object identity).

use crate::any::{Any, TVMFFIAny};
use crate::function::{self, TVMFFIFunctionCell};
use crate::hash::stable_hash_bytes;
use crate::{string, ti, types, FfiError, FfiResult};

/// `StableHashCombine`.
pub(crate) fn stable_hash_combine(key: u64, value: u64) -> u64 {
    key ^ (value.wrapping_add(0x9e37_79b9).wrapping_add(key << 6).wrapping_add(key >> 2))
}

fn str_bytes(v: &TVMFFIAny) -> &[u8] {
    // SAFETY: callers pass valid cells of a string or bytes type; the bytes live as long as `v`.
    unsafe { string::view_str_bytes(v) }.unwrap_or(&[])
}

/// The function type of a native `__any_hash__` hook (`TVMFFIAny (*)(const Any&) noexcept`).
type NativeHash = unsafe extern "C" fn(*const TVMFFIAny) -> TVMFFIAny;
/// The function type of a native `__any_equal__` hook.
type NativeEqual = unsafe extern "C" fn(*const TVMFFIAny, *const TVMFFIAny) -> TVMFFIAny;

/// Calls a hook (an opaque native function pointer or an `ffi.Function`) and returns its result.
fn call_hook(hook: &Any, args: &[TVMFFIAny]) -> FfiResult<Any> {
    let raw = hook.raw();
    let out = match raw.type_index {
        ti::OPAQUE_PTR => {
            let p = raw.obj_ptr().cast::<std::ffi::c_void>();
            if p.is_null() {
                return Err(FfiError::runtime("null native hook"));
            }
            // SAFETY: a native hook registered under this attribute has the NativeFunctionView
            // signature for its arity (what the C++ headers call it with); it returns an owned cell.
            unsafe {
                match args {
                    [a] => Any::from_raw(std::mem::transmute::<*mut std::ffi::c_void, NativeHash>(p)(a)),
                    [a, b] => Any::from_raw(std::mem::transmute::<*mut std::ffi::c_void, NativeEqual>(p)(a, b)),
                    _ => return Err(FfiError::runtime("bad hook arity")),
                }
            }
        }
        ti::FUNCTION => {
            let f = hook.as_object().ok_or_else(|| FfiError::runtime("null hook"))?;
            // SAFETY: a function object has its cell right after the header.
            let cell = unsafe { f.payload::<TVMFFIFunctionCell>() };
            if !cell.cpp_call.is_null() {
                type CppCall = unsafe extern "C" fn(*const std::ffi::c_void, *const TVMFFIAny, i32, *mut TVMFFIAny);
                let mut out = TVMFFIAny::NONE;
                // SAFETY: a non-null cpp_call has this signature (tvm-ffi's fast path); it
                // writes an owned result.
                unsafe {
                    let c = std::mem::transmute::<*mut std::ffi::c_void, CppCall>(cell.cpp_call);
                    c(f.as_ptr().cast(), args.as_ptr(), args.len() as i32, &mut out);
                    Any::from_raw(out)
                }
            } else {
                function::call(&f, args)?
            }
        }
        _ => return Err(FfiError::runtime("a type's __any_hash__/__any_equal__ is not a function")),
    };
    if out.type_index() == ti::ERROR {
        let o = out.into_object().map_err(|_| FfiError::runtime("bad error"))?;
        return Err(FfiError::from_object(o));
    }
    Ok(out)
}

/// `AnyHash` of a cell (owned values' cells; views must be converted to `Any` first, as the C++
/// functions take `const Any&`).
pub(crate) fn hash_raw(v: &TVMFFIAny) -> FfiResult<u64> {
    match v.type_index {
        ti::SMALL_STR => Ok(stable_hash_combine(ti::STR as u64, v.bits() % 2_147_483_647)),
        ti::SMALL_BYTES => Ok(stable_hash_combine(ti::BYTES as u64, v.bits() % 2_147_483_647)),
        ti::STR | ti::BYTES => Ok(stable_hash_combine(v.type_index as u64, stable_hash_bytes(str_bytes(v)))),
        t => {
            if t >= ti::STATIC_OBJECT_BEGIN {
                if let Some(hook) = types::attr_value("__any_hash__", t) {
                    let r = call_hook(&hook, std::slice::from_ref(v))?;
                    let h = r.as_i64().filter(|_| r.type_index() == ti::INT).ok_or_else(|| {
                        FfiError::type_error(format!("__any_hash__ of {} must return an int", types::type_key(t)))
                    })?;
                    return Ok(stable_hash_combine(t as u64, h as u64));
                }
            }
            Ok(stable_hash_combine(t as i64 as u64, v.bits()))
        }
    }
}

#[inline]
fn words(v: &TVMFFIAny) -> (u64, u64) {
    ((v.type_index as u32 as u64) | ((v.small_len as u64) << 32), v.bits())
}

/// `AnyEqual` of two cells. The cases of a lookup's probe are decided inline: cells equal bit
/// for bit are equal, and two different cells of one value type (small strings included) are
/// not; the rest (heap strings, objects with an `__any_equal__`, mixed kinds) goes to
/// [`equal_other`].
#[inline]
pub(crate) fn equal_raw(lhs: &TVMFFIAny, rhs: &TVMFFIAny) -> FfiResult<bool> {
    if words(lhs) == words(rhs) {
        return Ok(true);
    }
    if lhs.type_index == rhs.type_index && lhs.type_index < ti::STATIC_OBJECT_BEGIN {
        return Ok(false);
    }
    equal_other(lhs, rhs)
}

/// [`equal_raw`] of two cells that differ bit for bit and are not both of one value type.
#[inline(never)]
fn equal_other(lhs: &TVMFFIAny, rhs: &TVMFFIAny) -> FfiResult<bool> {
    let (lt, rt) = (lhs.type_index, rhs.type_index);
    if lt == rt {
        if lt == ti::STR || lt == ti::BYTES {
            return Ok(str_bytes(lhs) == str_bytes(rhs));
        }
        if lt >= ti::STATIC_OBJECT_BEGIN {
            if let Some(hook) = types::attr_value("__any_equal__", lt) {
                let r = call_hook(&hook, &[*lhs, *rhs])?;
                if r.type_index() != ti::BOOL {
                    return Err(FfiError::type_error(format!(
                        "__any_equal__ of {} must return a bool",
                        types::type_key(lt)
                    )));
                }
                return Ok(r.raw().bits() != 0);
            }
        }
        return Ok(false);
    }
    let pair = |a: i32, b: i32| (lt == a && rt == b) || (lt == b && rt == a);
    if pair(ti::STR, ti::SMALL_STR) || pair(ti::BYTES, ti::SMALL_BYTES) {
        return Ok(str_bytes(lhs) == str_bytes(rhs));
    }
    Ok(false)
}

/// `AnyHash`.
pub fn any_hash(v: &Any) -> FfiResult<u64> {
    hash_raw(v.raw())
}

/// `AnyEqual`.
pub fn any_equal(a: &Any, b: &Any) -> FfiResult<bool> {
    equal_raw(a.raw(), b.raw())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strings_hash_by_content_small_or_not() {
        let small = Any::string("abc");
        let big = Any::object(string::make_bytes_object(b"abc", false));
        assert_eq!(small.type_index(), ti::SMALL_STR);
        assert_eq!(big.type_index(), ti::STR);
        assert_eq!(any_hash(&small).unwrap(), any_hash(&big).unwrap());
        assert!(any_equal(&small, &big).unwrap());
        assert!(any_equal(&big, &small).unwrap());
        let other = Any::object(string::make_bytes_object(b"abd", false));
        assert!(!any_equal(&big, &other).unwrap());
        // bytes and strings differ
        assert_ne!(any_hash(&Any::bytes(b"abc")).unwrap(), any_hash(&small).unwrap());
        assert!(!any_equal(&Any::bytes(b"abc"), &small).unwrap());
    }

    #[test]
    fn scalars_hash_by_bits() {
        assert_eq!(any_hash(&Any::int(5)).unwrap(), stable_hash_combine(1, 5));
        assert!(!any_equal(&Any::int(1), &Any::float(1.0)).unwrap());
        assert!(!any_equal(&Any::int(1), &Any::bool(true)).unwrap());
        assert!(any_equal(&Any::int(7), &Any::int(7)).unwrap());
        // the value the C++ header computes for the string "a": combine(65, 97)
        let h = 65u64 ^ (97u64 + 0x9e37_79b9 + (65 << 6) + (65 >> 2));
        assert_eq!(any_hash(&Any::string("a")).unwrap(), h);
    }
}
