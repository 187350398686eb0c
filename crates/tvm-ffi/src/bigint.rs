//! `ffi.BigInt`: integers outside the int64 range. tvm-ffi's `BigIntObj` is the header, a
//! `size_t` word count, then that many `int64_t` words in place (least significant first,
//! two's complement, native byte order), always normalized: no redundant sign words, and a
//! value that fits int64 is never a BigInt but a plain `kTVMFFIInt` cell. C++ reads the words at
//! header + 32 inline, so the layout is that exactly.
//!
//! The Python frontend turns a large `int` into words and calls `TVMFFIBigIntFromByteArray`;
//! it reads one back with `TVMFFIBigIntGetContentByteArray`. The hooks that make BigInts usable
//! as map keys and comparable (`__any_hash__`, `__any_equal__`, `__ffi_hash__`, `__ffi_eq__`,
//! `__ffi_compare__`) and the JSON hooks (`__data_to_json__`, `__data_from_json__`, decimal text)
//! are registered as type attributes like tvm-ffi does.

use super::any::{Any, TVMFFIAny};
use super::object::{make_inplace_object, ObjectRef};
use super::registry::Builder;
use super::{ti, types, FfiError, FfiResult, TVMFFIByteArray};
use std::cmp::Ordering;

/// The payload after the header: the word count (the words follow it in place).
#[repr(C)]
struct BigIntPayload {
    size: usize,
}

/// Trims redundant sign-extension words (an empty input is zero).
fn normalize(words: &[i64]) -> &[i64] {
    let mut n = words.len();
    while n > 1 && words[n - 1] == if words[n - 2] < 0 { -1 } else { 0 } {
        n -= 1;
    }
    &words[..n]
}

/// The canonical integer of `words` (least significant first): an int cell when it fits, else
/// an `ffi.BigInt`.
pub(crate) fn from_words(words: &[i64]) -> Any {
    let w = normalize(words);
    match w.len() {
        0 => Any::int(0),
        1 => Any::int(w[0]),
        n => {
            let o = make_inplace_object(
                ti::BIG_INT,
                n * 8,
                |tail| {
                    // SAFETY: the tail holds n * 8 bytes, 8-aligned.
                    unsafe { std::ptr::copy_nonoverlapping(w.as_ptr(), tail.cast::<i64>(), n) };
                    BigIntPayload { size: n }
                },
                None,
            );
            Any::object(o)
        }
    }
}

/// The words of an int or BigInt cell (borrowed from the cell or the object).
///
/// # Safety
/// `v` is a valid cell; the words live as long as it (and its object) does.
pub unsafe fn words(v: &TVMFFIAny) -> Option<&[i64]> {
    match v.type_index {
        // SAFETY: the union's 8 bytes are the integer.
        ti::INT => Some(std::slice::from_ref(unsafe { &v.v.v_int64 })),
        ti::BIG_INT => {
            let p = v.obj_ptr() as *const u8;
            if p.is_null() {
                return None;
            }
            // SAFETY: a BigInt object: the count at +24, the words at +32.
            unsafe {
                let n = *p.add(24).cast::<usize>();
                Some(std::slice::from_raw_parts(p.add(32).cast::<i64>(), n))
            }
        }
        _ => None,
    }
}

/// `TVMFFIBigIntFromByteArray`: whole 64-bit words in, the canonical integer out.
pub fn from_bytes(b: &[u8]) -> FfiResult<Any> {
    if b.len() % 8 != 0 {
        return Err(FfiError::value("BigInt content must contain whole 64-bit words"));
    }
    let w: Vec<i64> = b.chunks_exact(8).map(|c| i64::from_ne_bytes(c.try_into().expect("8 bytes"))).collect();
    Ok(from_words(&w))
}

/// `TVMFFIBigIntGetContentByteArray`: the words of an int or BigInt cell as bytes (empty for
/// anything else).
///
/// # Safety
/// `v` is a valid cell that outlives the returned view.
pub unsafe fn content(v: &TVMFFIAny) -> TVMFFIByteArray {
    // SAFETY: by contract.
    match unsafe { words(v) } {
        Some(w) => TVMFFIByteArray { data: w.as_ptr().cast(), size: w.len() * 8 },
        None => TVMFFIByteArray::EMPTY,
    }
}

/// Signed comparison of two normalized or unnormalized word strings.
pub fn compare(a: &[i64], b: &[i64]) -> Ordering {
    let n = a.len().max(b.len()).max(1);
    let ext = |w: &[i64], i: usize| -> i64 {
        match w.get(i) {
            Some(&x) => x,
            None => {
                if w.last().is_some_and(|&x| x < 0) {
                    -1
                } else {
                    0
                }
            }
        }
    };
    let top = ext(a, n - 1).cmp(&ext(b, n - 1));
    if top != Ordering::Equal {
        return top;
    }
    for i in (0..n - 1).rev() {
        let c = (ext(a, i) as u64).cmp(&(ext(b, i) as u64));
        if c != Ordering::Equal {
            return c;
        }
    }
    Ordering::Equal
}

/// `BigInt::hash`: the value itself for an int, `StableHashBytes` of the words otherwise.
pub(crate) fn hash_words(w: &[i64]) -> u64 {
    let w = normalize(w);
    if w.len() <= 1 {
        return w.first().copied().unwrap_or(0) as u64;
    }
    let bytes: Vec<u8> = w.iter().flat_map(|x| x.to_ne_bytes()).collect();
    super::hash::stable_hash_bytes(&bytes)
}

/// Decimal text of a word string.
pub(crate) fn to_decimal(w: &[i64]) -> String {
    let w = normalize(w);
    let neg = w.last().is_some_and(|&x| x < 0);
    // Magnitude as unsigned words: negate the two's complement when negative.
    let mut mag: Vec<u64> = w.iter().map(|&x| x as u64).collect();
    if neg {
        let mut carry = true;
        for m in mag.iter_mut() {
            *m = !*m;
            if carry {
                let (v, c) = m.overflowing_add(1);
                *m = v;
                carry = c;
            }
        }
    }
    const CHUNK: u64 = 10_000_000_000_000_000_000; // 10^19
    let mut parts = Vec::new();
    while mag.iter().any(|&x| x != 0) {
        let mut rem: u128 = 0;
        for m in mag.iter_mut().rev() {
            let cur = (rem << 64) | *m as u128;
            *m = (cur / CHUNK as u128) as u64;
            rem = cur % CHUNK as u128;
        }
        parts.push(rem as u64);
    }
    let mut s = String::from(if neg { "-" } else { "" });
    match parts.split_last() {
        None => s.push('0'),
        Some((top, rest)) => {
            s.push_str(&top.to_string());
            for p in rest.iter().rev() {
                s.push_str(&format!("{p:019}"));
            }
        }
    }
    s
}

/// Parses decimal text (an optional sign, then digits only) into words.
pub(crate) fn from_decimal(text: &str) -> FfiResult<Vec<i64>> {
    let bad = || FfiError::value("Invalid decimal string for ffi.BigInt");
    let (neg, digits) = match text.as_bytes().first() {
        Some(b'-') => (true, &text[1..]),
        Some(b'+') => (false, &text[1..]),
        _ => (false, text),
    };
    if digits.is_empty() || !digits.bytes().all(|c| c.is_ascii_digit()) {
        return Err(bad());
    }
    let mut mag: Vec<u64> = vec![0];
    for c in digits.bytes() {
        let mut carry = (c - b'0') as u128;
        for m in mag.iter_mut() {
            let cur = *m as u128 * 10 + carry;
            *m = cur as u64;
            carry = cur >> 64;
        }
        if carry != 0 {
            mag.push(carry as u64);
        }
    }
    mag.push(0); // room for the sign bit
    if neg {
        let mut carry = true;
        for m in mag.iter_mut() {
            *m = !*m;
            if carry {
                let (v, c) = m.overflowing_add(1);
                *m = v;
                carry = c;
            }
        }
    }
    Ok(normalize(&mag.iter().map(|&x| x as i64).collect::<Vec<_>>()).to_vec())
}

fn arg_words<'a>(args: &'a [TVMFFIAny], i: usize, what: &str) -> FfiResult<&'a [i64]> {
    let v = args.get(i).ok_or_else(|| FfiError::type_error(format!("{what}: missing argument #{i}")))?;
    // SAFETY: argument cells are valid views for the call.
    unsafe { words(v) }
        .ok_or_else(|| FfiError::type_error(format!("{what}: expected an int, got {}", types::type_key(v.type_index))))
}

/// `__any_hash__` as a native hook: `TVMFFIAny (*)(const Any&) noexcept`, an int result.
unsafe extern "C" fn any_hash(v: *const TVMFFIAny) -> TVMFFIAny {
    // SAFETY: the hook is called with a valid cell.
    match unsafe { v.as_ref().and_then(|v| words(v)) } {
        Some(w) => Any::int(hash_words(w) as i64).into_raw(),
        None => Any::object(FfiError::type_error("__any_hash__: expected an int").into_object()).into_raw(),
    }
}

/// `__any_equal__` as a native hook: `TVMFFIAny (*)(const Any&, const Any&) noexcept`.
unsafe extern "C" fn any_equal(a: *const TVMFFIAny, b: *const TVMFFIAny) -> TVMFFIAny {
    // SAFETY: the hook is called with valid cells.
    let (a, b) = unsafe { (a.as_ref().and_then(|v| words(v)), b.as_ref().and_then(|v| words(v))) };
    match (a, b) {
        (Some(a), Some(b)) => Any::bool(compare(a, b) == Ordering::Equal).into_raw(),
        _ => Any::bool(false).into_raw(),
    }
}

fn register_attrs() -> FfiResult<()> {
    let native = |f: *mut std::ffi::c_void| TVMFFIAny::with_bits(ti::OPAQUE_PTR, f as u64);
    // ObjectDef<BigIntObj> records its size (header and word count; the words trail it).
    let meta = types::TVMFFITypeMetadata {
        doc: TVMFFIByteArray::EMPTY,
        creator: None,
        total_size: 32,
        structural_eq_hash_kind: 0,
    };
    types::register_metadata(ti::BIG_INT, &meta)?;
    // BigIntObj is final (`_type_final`), which tvm-ffi's ObjectDef records as an attribute.
    types::register_attr(ti::BIG_INT, "__ffi_type_final__", Any::bool(true).raw())?;
    types::register_attr(ti::BIG_INT, "__any_hash__", &native(any_hash as *mut _))?;
    types::register_attr(ti::BIG_INT, "__any_equal__", &native(any_equal as *mut _))?;
    let func = |f: super::object::ObjectRef| Any::object(f);
    let eq = func(super::function::from_fn(|a| {
        Ok(Any::bool(compare(arg_words(a, 0, "__ffi_eq__")?, arg_words(a, 1, "__ffi_eq__")?) == Ordering::Equal))
    }));
    let cmp = func(super::function::from_fn(|a| {
        let o = compare(arg_words(a, 0, "__ffi_compare__")?, arg_words(a, 1, "__ffi_compare__")?);
        Ok(Any::int(o as i64))
    }));
    let hash = func(super::function::from_fn(|a| Ok(Any::int(hash_words(arg_words(a, 0, "__ffi_hash__")?) as i64))));
    let to_json =
        func(super::function::from_fn(|a| Ok(Any::string(&to_decimal(arg_words(a, 0, "__data_to_json__")?)))));
    let from_json = func(super::function::from_fn(|a| {
        let s = super::globals::arg_str("__data_from_json__", a, 0)?;
        Ok(from_words(&from_decimal(s)?))
    }));
    for (name, v) in [
        ("__ffi_eq__", eq),
        ("__ffi_compare__", cmp),
        ("__ffi_hash__", hash),
        ("__data_to_json__", to_json),
        ("__data_from_json__", from_json),
    ] {
        types::register_attr(ti::BIG_INT, name, v.raw())?;
    }
    Ok(())
}

/// An `ffi.BigInt` object's words (for objects this library did not make, too).
pub(crate) fn object_words(o: &ObjectRef) -> Option<Vec<i64>> {
    let cell = TVMFFIAny::with_bits(o.type_index(), o.as_ptr() as u64);
    // SAFETY: `o` keeps the object alive while we copy.
    unsafe { words(&cell) }.map(|w| w.to_vec())
}

/// Adds this subsystem's globals (none) and BigInt's type attributes.
pub fn register(_b: &mut Builder) {
    // Registered once with the globals; a second registration (a re-run) is refused, harmlessly.
    let _ = register_attrs();
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bytes(w: &[i64]) -> Vec<u8> {
        w.iter().flat_map(|x| x.to_ne_bytes()).collect()
    }

    #[test]
    fn byte_arrays_normalize_and_demote() {
        assert_eq!(from_bytes(&[]).unwrap().as_i64(), Some(0));
        assert_eq!(from_bytes(&[0; 7]).unwrap_err().message(), "BigInt content must contain whole 64-bit words");
        assert_eq!(from_bytes(&bytes(&[-5, -1, -1])).unwrap().as_i64(), Some(-5));
        let big = from_bytes(&bytes(&[i64::MIN, 0, 0])).unwrap(); // 2^63
        assert_eq!(big.type_index(), ti::BIG_INT);
        // SAFETY: `big` is alive.
        let c = unsafe { content(big.raw()) };
        // SAFETY: a view of `big`'s words.
        assert_eq!(unsafe { c.as_slice() }, bytes(&[i64::MIN, 0]).as_slice());
        let small = Any::int(7);
        // SAFETY: `small` is alive.
        assert_eq!(unsafe { content(small.raw()).as_slice() }, 7i64.to_ne_bytes());
        // SAFETY: a float cell has no words.
        assert_eq!(unsafe { content(Any::float(1.0).raw()) }.size, 0);
    }

    #[test]
    fn decimal_text_round_trips() {
        for s in ["0", "-1", "9223372036854775808", "-9223372036854775809", "340282366920938463463374607431768211456"] {
            let w = from_decimal(s).unwrap();
            assert_eq!(to_decimal(&w), s);
        }
        assert_eq!(from_decimal("-9223372036854775808").unwrap(), vec![i64::MIN]);
        assert!(from_decimal("12 ").is_err());
        assert!(from_decimal("-").is_err());
    }

    #[test]
    fn comparison_is_signed_across_lengths() {
        let two63 = [i64::MIN, 0];
        let neg = [i64::MAX, -1]; // -2^63 - 1
        assert_eq!(compare(&two63, &[5]), Ordering::Greater);
        assert_eq!(compare(&neg, &[i64::MIN]), Ordering::Less);
        assert_eq!(compare(&[-1], &[0]), Ordering::Less);
        assert_eq!(compare(&two63, &[i64::MIN, 0, 0]), Ordering::Equal);
        assert_eq!(hash_words(&[42]), 42);
        assert_eq!(hash_words(&two63), hash_words(&[i64::MIN, 0, 0]));
    }
}
