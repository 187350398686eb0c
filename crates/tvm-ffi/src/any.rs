//! `TVMFFIAny`, the 16-byte value cell of the tvm-ffi ABI, and [`Any`], an owned one.

use super::object::{dec_ref, inc_ref, ObjectRef, TVMFFIObject};
use super::{string, ti, FfiError, FfiResult};
use std::ffi::c_void;
use tvm_runtime_classic::abi::{DLDataType, DLDevice};

/// The 8-byte payload of a `TVMFFIAny`.
#[repr(C)]
#[derive(Clone, Copy)]
pub union AnyValue {
    /// Integers and booleans.
    pub v_int64: i64,
    /// Floats.
    pub v_float64: f64,
    /// Pointers (opaque pointers, raw strings, objects, DLTensor*).
    pub v_ptr: *mut c_void,
    /// Data types.
    pub v_dtype: DLDataType,
    /// Devices.
    pub v_device: DLDevice,
    /// Small strings and bytes (up to 7 bytes and a NUL).
    pub v_bytes: [u8; 8],
    /// The raw bits.
    pub v_uint64: u64,
}

/// `TVMFFIAny`.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct TVMFFIAny {
    /// What the cell holds.
    pub type_index: i32,
    /// The length of a small string or bytes; zero otherwise.
    pub small_len: u32,
    /// The value.
    pub v: AnyValue,
}

const _: () = assert!(std::mem::size_of::<TVMFFIAny>() == 16);

impl TVMFFIAny {
    /// None.
    pub const NONE: TVMFFIAny = TVMFFIAny { type_index: ti::NONE, small_len: 0, v: AnyValue { v_int64: 0 } };

    /// A cell of `type_index` with raw 64-bit payload.
    #[inline]
    pub fn with_bits(type_index: i32, bits: u64) -> Self {
        TVMFFIAny { type_index, small_len: 0, v: AnyValue { v_uint64: bits } }
    }
    /// Whether the cell holds an object (owning or not).
    #[inline]
    pub fn is_object(&self) -> bool {
        self.type_index >= ti::STATIC_OBJECT_BEGIN
    }
    /// The object pointer of an object cell.
    #[inline]
    pub fn obj_ptr(&self) -> *mut TVMFFIObject {
        // SAFETY: every variant is 8 plain bytes; reading them as a pointer is always defined.
        unsafe { self.v.v_ptr.cast() }
    }
    /// The raw bits.
    #[inline]
    pub fn bits(&self) -> u64 {
        // SAFETY: as above.
        unsafe { self.v.v_uint64 }
    }
}

/// An owned value: holds a strong reference when it holds an object.
#[repr(transparent)]
pub struct Any(TVMFFIAny);

impl Default for Any {
    fn default() -> Self {
        Any(TVMFFIAny::NONE)
    }
}

impl Clone for Any {
    #[inline]
    fn clone(&self) -> Self {
        if self.0.is_object() {
            // SAFETY: an owned object cell holds a live strong reference.
            unsafe { inc_ref(self.0.obj_ptr()) };
        }
        Any(self.0)
    }
}

impl Drop for Any {
    #[inline]
    fn drop(&mut self) {
        if self.0.is_object() {
            // SAFETY: we own one strong reference.
            unsafe { dec_ref(self.0.obj_ptr()) };
        }
    }
}

impl std::fmt::Debug for Any {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Any({}:{:#x})", super::types::type_key(self.0.type_index), self.0.bits())
    }
}

impl Any {
    /// None.
    #[inline]
    pub fn none() -> Any {
        Any::default()
    }
    /// An integer.
    #[inline]
    pub fn int(v: i64) -> Any {
        Any(TVMFFIAny::with_bits(ti::INT, v as u64))
    }
    /// A boolean.
    #[inline]
    pub fn bool(v: bool) -> Any {
        Any(TVMFFIAny::with_bits(ti::BOOL, v as u64))
    }
    /// A float.
    pub fn float(v: f64) -> Any {
        Any(TVMFFIAny::with_bits(ti::FLOAT, v.to_bits()))
    }
    /// An opaque pointer (None when null, as tvm-ffi does).
    pub fn opaque_ptr(p: *mut c_void) -> Any {
        if p.is_null() {
            return Any::none();
        }
        Any(TVMFFIAny::with_bits(ti::OPAQUE_PTR, p as u64))
    }
    /// A data type.
    pub fn dtype(t: DLDataType) -> Any {
        // The 4 bytes after the data type stay zero: hashing and equality read all 8.
        let mut raw = TVMFFIAny::with_bits(ti::DATA_TYPE, 0);
        raw.v.v_dtype = t;
        Any(raw)
    }
    /// A device.
    pub fn device(d: DLDevice) -> Any {
        Any(TVMFFIAny { type_index: ti::DEVICE, small_len: 0, v: AnyValue { v_device: d } })
    }
    /// An object.
    #[inline]
    pub fn object(o: ObjectRef) -> Any {
        let ti = o.type_index();
        Any(TVMFFIAny::with_bits(ti, o.into_raw() as u64))
    }
    /// An optional object (None when absent).
    pub fn opt_object(o: Option<ObjectRef>) -> Any {
        o.map(Any::object).unwrap_or_default()
    }
    /// A string: small when it fits in 7 bytes, else an `ffi.String` object.
    pub fn string(s: &str) -> Any {
        string::any_from_bytes(s.as_bytes(), false)
    }
    /// Bytes: small when they fit in 7 bytes, else an `ffi.Bytes` object.
    pub fn bytes(b: &[u8]) -> Any {
        string::any_from_bytes(b, true)
    }
    /// Takes over an owned cell.
    ///
    /// # Safety
    /// `raw` is an owned cell (an object in it carries a strong reference handed over).
    #[inline]
    pub unsafe fn from_raw(raw: TVMFFIAny) -> Any {
        Any(raw)
    }
    /// Gives up the cell without dropping it.
    #[inline]
    pub fn into_raw(self) -> TVMFFIAny {
        let r = self.0;
        std::mem::forget(self);
        r
    }
    /// The cell, borrowed.
    #[inline]
    pub fn raw(&self) -> &TVMFFIAny {
        &self.0
    }
    /// An owned copy of a borrowed view (tvm-ffi's `Any(AnyView)`): objects gain a reference,
    /// raw strings and byte arrays become strings and bytes, an rvalue reference is moved from.
    ///
    /// # Safety
    /// `view` is a valid view: its pointers point to what its type index says.
    #[inline]
    pub unsafe fn from_view(view: &TVMFFIAny) -> FfiResult<Any> {
        let t = view.type_index;
        if t >= ti::STATIC_OBJECT_BEGIN {
            let p = view.obj_ptr();
            if !p.is_null() {
                // SAFETY: a view of a (non-null) object points to a live object.
                unsafe { inc_ref(p) };
                return Ok(Any(*view));
            }
        } else if !matches!(t, ti::RAW_STR | ti::BYTE_ARRAY_PTR | ti::OBJECT_RVALUE_REF) {
            // A plain value: the cell itself.
            return Ok(Any(*view));
        }
        // SAFETY: the caller's contract.
        unsafe { Self::from_view_converted(view) }
    }

    /// [`Any::from_view`] of what is not a plain copy: a NULL object, a raw string or byte
    /// array (copied into a string), a moved object.
    ///
    /// # Safety
    /// As [`Any::from_view`].
    #[cold]
    #[inline(never)]
    unsafe fn from_view_converted(view: &TVMFFIAny) -> FfiResult<Any> {
        let t = view.type_index;
        if t >= ti::STATIC_OBJECT_BEGIN {
            if view.obj_ptr().is_null() {
                return Err(FfiError::value(format!(
                    "a value of type {} holds a NULL object",
                    super::types::type_key(t)
                )));
            }
            // SAFETY: a view of a (non-null) object points to a live object.
            unsafe { inc_ref(view.obj_ptr()) };
            return Ok(Any(*view));
        }
        match t {
            ti::RAW_STR => {
                let p = view.obj_ptr() as *const std::ffi::c_char;
                if p.is_null() {
                    return Err(FfiError::value("a raw string argument is NULL"));
                }
                // SAFETY: a raw-string view points to a NUL-terminated string.
                let b = unsafe { std::ffi::CStr::from_ptr(p) }.to_bytes();
                Ok(string::any_from_bytes(b, false))
            }
            ti::BYTE_ARRAY_PTR => {
                let p = view.obj_ptr() as *const super::TVMFFIByteArray;
                if p.is_null() {
                    return Err(FfiError::value("a byte-array argument is NULL"));
                }
                // SAFETY: a byte-array view points to a valid TVMFFIByteArray.
                let b = unsafe { (*p).as_slice() };
                Ok(string::any_from_bytes(b, true))
            }
            ti::OBJECT_RVALUE_REF => {
                let slot = view.obj_ptr() as *mut *mut TVMFFIObject;
                // SAFETY: an rvalue-ref view points to a slot holding an owned object pointer.
                let obj = unsafe { slot.as_mut() }.map(|s| std::mem::replace(s, std::ptr::null_mut()));
                match obj.filter(|p| !p.is_null()) {
                    // SAFETY: the slot's reference is moved to us.
                    Some(p) => Ok(Any(TVMFFIAny::with_bits(unsafe { (*p).type_index }, p as u64))),
                    None => Err(FfiError::runtime("RValueRef already moved")),
                }
            }
            _ => Ok(Any(*view)),
        }
    }
    /// The type index.
    #[inline]
    pub fn type_index(&self) -> i32 {
        self.0.type_index
    }
    /// Whether this is None.
    #[inline]
    pub fn is_none(&self) -> bool {
        self.0.type_index == ti::NONE
    }
    /// The integer, with tvm-ffi's conversions (bool -> int).
    #[inline]
    pub fn as_i64(&self) -> Option<i64> {
        view_as_i64(&self.0)
    }
    /// The float, with tvm-ffi's conversions (int, bool -> float).
    pub fn as_f64(&self) -> Option<f64> {
        view_as_f64(&self.0)
    }
    /// The boolean (int -> bool).
    pub fn as_bool(&self) -> Option<bool> {
        view_as_bool(&self.0)
    }
    /// The string's bytes (small or object), if this is a string.
    pub fn as_str_bytes(&self) -> Option<&[u8]> {
        // SAFETY: an owned Any holds valid cells; the bytes live as long as self.
        unsafe { string::view_str_bytes(&self.0) }
    }
    /// The string, if this is a (UTF-8) string.
    pub fn as_str(&self) -> Option<&str> {
        self.as_str_bytes().and_then(|b| std::str::from_utf8(b).ok())
    }
    /// The object, if this holds one (a new reference).
    #[inline]
    pub fn as_object(&self) -> Option<ObjectRef> {
        if self.0.is_object() {
            // SAFETY: an owned object cell holds a live object.
            unsafe { ObjectRef::from_borrowed(self.0.obj_ptr()) }
        } else {
            None
        }
    }
    /// Moves the object out, if this holds one.
    #[inline]
    pub fn into_object(self) -> Result<ObjectRef, Any> {
        if self.0.is_object() {
            let p = self.into_raw().obj_ptr();
            // SAFETY: the owned reference moves into the ObjectRef.
            Ok(unsafe { ObjectRef::from_raw(p) }.expect("object cell holds a pointer"))
        } else {
            Err(self)
        }
    }
    /// The device, if this is one.
    pub(crate) fn as_device(&self) -> Option<DLDevice> {
        if self.0.type_index == ti::DEVICE {
            // SAFETY: the union is read as the variant the type index names.
            Some(unsafe { self.0.v.v_device })
        } else {
            None
        }
    }
    /// The data type, if this is one.
    pub(crate) fn as_dtype(&self) -> Option<DLDataType> {
        if self.0.type_index == ti::DATA_TYPE {
            // SAFETY: as above.
            Some(unsafe { self.0.v.v_dtype })
        } else {
            None
        }
    }
}

/// An integer from a view (int or bool).
#[inline]
pub fn view_as_i64(v: &TVMFFIAny) -> Option<i64> {
    match v.type_index {
        ti::INT | ti::BOOL => Some(v.bits() as i64),
        _ => None,
    }
}

/// A float from a view (float, int or bool).
pub fn view_as_f64(v: &TVMFFIAny) -> Option<f64> {
    match v.type_index {
        ti::FLOAT => Some(f64::from_bits(v.bits())),
        ti::INT | ti::BOOL => Some(v.bits() as i64 as f64),
        _ => None,
    }
}

/// A boolean from a view (bool or int).
#[inline]
pub fn view_as_bool(v: &TVMFFIAny) -> Option<bool> {
    match v.type_index {
        ti::INT | ti::BOOL => Some(v.bits() != 0),
        _ => None,
    }
}
