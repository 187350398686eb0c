//! Strings and bytes: the small forms held in the cell (up to 7 bytes) and the `ffi.String` /
//! `ffi.Bytes` objects (header, `TVMFFIByteArray`, then the bytes and a NUL in place).

use super::any::{Any, TVMFFIAny};
use super::object::{make_inplace_object, ObjectRef};
use super::{ti, TVMFFIByteArray};

/// The longest string or bytes held in the cell itself.
pub(crate) const MAX_SMALL_LEN: usize = 7;

/// A string (`bytes == false`) or bytes value: small in the cell, or an object.
#[inline]
pub fn any_from_bytes(b: &[u8], bytes: bool) -> Any {
    if b.len() <= MAX_SMALL_LEN {
        let raw = TVMFFIAny {
            type_index: if bytes { ti::SMALL_BYTES } else { ti::SMALL_STR },
            small_len: b.len() as u32,
            v: super::any::AnyValue { v_bytes: small_payload(b).to_le_bytes() },
        };
        // SAFETY: a small value owns nothing.
        return unsafe { Any::from_raw(raw) };
    }
    Any::object(make_bytes_object(b, bytes))
}

/// Up to 7 bytes as the little-endian payload of a small string, zero-padded, read as two
/// overlapping loads (no call to `memcpy` for a few bytes: this is on every string argument).
#[inline]
fn small_payload(b: &[u8]) -> u64 {
    let n = b.len();
    debug_assert!(n <= MAX_SMALL_LEN);
    match n {
        4.. => {
            let lo = u32::from_le_bytes([b[0], b[1], b[2], b[3]]) as u64;
            let hi = u32::from_le_bytes([b[n - 4], b[n - 3], b[n - 2], b[n - 1]]) as u64;
            lo | hi << (8 * (n - 4))
        }
        2.. => {
            let lo = u16::from_le_bytes([b[0], b[1]]) as u64;
            let hi = u16::from_le_bytes([b[n - 2], b[n - 1]]) as u64;
            lo | hi << (8 * (n - 2))
        }
        1 => b[0] as u64,
        _ => 0,
    }
}

/// An `ffi.String` (or `ffi.Bytes`) object, whatever the length.
pub(crate) fn make_bytes_object(b: &[u8], bytes: bool) -> ObjectRef {
    let tindex = if bytes { ti::BYTES } else { ti::STR };
    make_inplace_object(
        tindex,
        b.len() + 1,
        |tail| {
            // SAFETY: the tail has len + 1 bytes.
            unsafe {
                std::ptr::copy_nonoverlapping(b.as_ptr(), tail, b.len());
                *tail.add(b.len()) = 0;
            }
            TVMFFIByteArray { data: tail as *const _, size: b.len() }
        },
        None,
    )
}

/// The bytes of a string or bytes view: small forms, objects, raw strings and byte arrays.
///
/// # Safety
/// `v` is a valid view; the bytes borrowed from it live as long as what it refers to.
pub unsafe fn view_str_bytes(v: &TVMFFIAny) -> Option<&[u8]> {
    match v.type_index {
        // SAFETY: small forms keep their bytes in the cell.
        ti::SMALL_STR | ti::SMALL_BYTES => Some(unsafe { &v.v.v_bytes[..(v.small_len as usize).min(8)] }),
        ti::STR | ti::BYTES => {
            // SAFETY: string and bytes objects hold a TVMFFIByteArray after the header.
            let cell = unsafe { &*(v.obj_ptr() as *const u8).add(24).cast::<TVMFFIByteArray>() };
            // SAFETY: the array points to its in-place bytes.
            Some(unsafe { cell.as_slice() })
        }
        ti::RAW_STR => {
            let p = v.obj_ptr() as *const std::ffi::c_char;
            // SAFETY: a raw-string view is NUL-terminated.
            (!p.is_null()).then(|| unsafe { std::ffi::CStr::from_ptr(p) }.to_bytes())
        }
        ti::BYTE_ARRAY_PTR => {
            let p = v.obj_ptr() as *const TVMFFIByteArray;
            // SAFETY: a byte-array view points to a valid array.
            (!p.is_null()).then(|| unsafe { (*p).as_slice() })
        }
        _ => None,
    }
}

/// The bytes of a string or bytes object.
#[cfg(test)]
pub(crate) fn object_bytes(o: &ObjectRef) -> &[u8] {
    debug_assert!(o.type_index() == ti::STR || o.type_index() == ti::BYTES);
    // SAFETY: string and bytes objects hold a TVMFFIByteArray after the header.
    unsafe { o.payload::<TVMFFIByteArray>().as_slice() }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn small_payload_is_the_bytes_zero_padded() {
        let all = b"\x01\x82\x03\xf4\x05\x86\x07";
        for n in 0..=MAX_SMALL_LEN {
            let mut want = [0u8; 8];
            want[..n].copy_from_slice(&all[..n]);
            assert_eq!(small_payload(&all[..n]).to_le_bytes(), want, "length {n}");
        }
    }
}
