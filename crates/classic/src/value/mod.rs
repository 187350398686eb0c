//! Values of the PackedFunc calling convention: `TVMValue` + type code <-> typed Rust values.
//!
//! [`Args`] is a borrowed view of the caller's `(values, codes)` arrays; typed accessors apply
//! TVM's coercion rules. [`Value`] is an owned value (a return value, or an
//! argument copied out). [`ArgsBuf`] encodes Rust values as borrowed arguments.

pub use tvm_runtime_core::dtype;

use crate::abi::{DLDataType, DLDevice, DLTensor, TVMByteArray, TVMValue};
use crate::error::{Error, Result};
use crate::function::PackedFunc;
use crate::module::Module;
use crate::ndarray::NDArray;
use crate::object::{index, ObjectHeader, ObjectRef, StringObj};
use std::ffi::{c_char, c_int, c_void, CStr, CString};

/// Type codes as plain integers (the values of `TVMArgTypeCode`).
pub mod code {
    /// `kTVMArgInt`.
    pub const INT: i32 = 0;
    /// `kDLUInt` (never produced by TVM).
    pub const UINT: i32 = 1;
    /// `kTVMArgFloat`.
    pub const FLOAT: i32 = 2;
    /// `kTVMOpaqueHandle`.
    pub const HANDLE: i32 = 3;
    /// `kTVMNullptr`.
    pub const NULL: i32 = 4;
    /// `kTVMDataType`.
    pub const DATA_TYPE: i32 = 5;
    /// `kDLDevice`.
    pub const DEVICE: i32 = 6;
    /// `kTVMDLTensorHandle`.
    pub const DLTENSOR: i32 = 7;
    /// `kTVMObjectHandle`.
    pub const OBJECT: i32 = 8;
    /// `kTVMModuleHandle`.
    pub const MODULE: i32 = 9;
    /// `kTVMPackedFuncHandle`.
    pub const FUNC: i32 = 10;
    /// `kTVMStr`.
    pub const STR: i32 = 11;
    /// `kTVMBytes`.
    pub const BYTES: i32 = 12;
    /// `kTVMNDArrayHandle`.
    pub const NDARRAY: i32 = 13;
    /// `kTVMObjectRValueRefArg`.
    pub const RVALUE_REF: i32 = 14;
    /// `kTVMArgBool` (TVM v0.18+: `v_int64` is 0 or 1). v0.8 had no meaning for 15 but
    /// `kTVMExtBegin`; this runtime reads it as a bool and returns bools as ints (code 0),
    /// which every release's clients understand.
    pub const BOOL: i32 = 15;
    /// `kTVMExtBegin` of TVM v0.8 (v0.18 moved it to 16, after [`BOOL`]).
    pub const EXT_BEGIN: i32 = 15;
    /// `kTVMExtEnd`.
    pub(crate) const EXT_END: i32 = 128;
}

/// TVM's diagnostic name of a type code.
pub fn code_name(c: c_int) -> String {
    match c {
        0 => "int".into(),
        1 => "uint".into(),
        2 => "float".into(),
        3 => "handle".into(),
        4 => "NULL".into(),
        5 => "DLDataType".into(),
        6 => "DLDevice".into(),
        7 => "ArrayHandle".into(),
        8 => "Object".into(),
        9 => "ModuleHandle".into(),
        10 => "FunctionHandle".into(),
        11 => "str".into(),
        12 => "bytes".into(),
        13 => "NDArrayContainer".into(),
        14 => "ObjectRValueRefArg".into(),
        15 => "bool".into(),
        16..=127 => format!("ext({c})"),
        _ => format!("unknown type_code={c}"),
    }
}

/// The address of an NDArray container's `DLTensor` (the handle C sees) is 16 bytes past
/// its header.
pub const NDARRAY_HANDLE_OFFSET: usize = 16;

/// An owned value.
///
/// `repr(C, u8)` puts every payload at offset 8, so moving a value is two aligned 8-byte
/// copies (Rust's default layout packs small payloads at offset 2, and copying such a value
/// right after an 8-byte store of its payload stalls on store forwarding).
#[derive(Clone, Debug, Default)]
#[repr(C, u8)]
pub enum Value {
    /// No value (`kTVMNullptr`).
    #[default]
    Null,
    /// `kTVMArgInt`.
    Int(i64),
    /// `kDLUInt` (passed through, never produced).
    UInt(i64),
    /// `kTVMArgFloat`.
    Float(f64),
    /// `kTVMOpaqueHandle`: no ownership.
    Handle(*mut c_void),
    /// `kTVMDataType`.
    DataType(DLDataType),
    /// `kDLDevice`.
    Device(DLDevice),
    /// `kTVMDLTensorHandle`: a borrowed tensor, no ownership.
    DLTensor(*mut DLTensor),
    /// An object that is neither a module nor an NDArray.
    Object(ObjectRef),
    /// A module.
    Module(Module),
    /// A function (boxed: a function handle is the address of a `PackedFunc`).
    Func(Box<PackedFunc>),
    /// An NDArray.
    NDArray(NDArray),
    /// A string (boxed to keep `Value` two words wide).
    Str(Box<String>),
    /// Bytes (boxed likewise).
    Bytes(Box<Vec<u8>>),
    /// An extension value (codes 15..127), copied bit-wise (boxed: rare, and it would double
    /// the size of every value).
    Ext(Box<(c_int, TVMValue)>),
}

const _: () = assert!(std::mem::size_of::<Value>() == 16);

impl Value {
    /// A string value.
    pub fn str(s: impl Into<String>) -> Value {
        Value::Str(Box::new(s.into()))
    }

    /// A bytes value.
    pub fn bytes(b: Vec<u8>) -> Value {
        Value::Bytes(Box::new(b))
    }

    /// An extension value (codes 15..127).
    pub fn ext(code: c_int, v: TVMValue) -> Value {
        Value::Ext(Box::new((code, v)))
    }

    /// A function value.
    pub fn func(f: PackedFunc) -> Value {
        Value::Func(Box::new(f))
    }

    /// Wraps an object with the right variant for its type.
    pub fn from_object(obj: ObjectRef) -> Value {
        match obj.type_index() {
            index::MODULE => Module::from_object(obj).map_or(Value::Null, Value::Module),
            index::NDARRAY => NDArray::from_object(obj).map_or(Value::Null, Value::NDArray),
            _ => Value::Object(obj),
        }
    }

    /// An optional object.
    pub fn from_opt_object(obj: Option<ObjectRef>) -> Value {
        obj.map_or(Value::Null, Value::from_object)
    }

    /// Whether dropping this value releases something (a reference, a box).
    #[inline]
    pub(crate) fn owns_resources(&self) -> bool {
        matches!(
            self,
            Value::Object(_)
                | Value::Module(_)
                | Value::Func(_)
                | Value::NDArray(_)
                | Value::Str(_)
                | Value::Bytes(_)
                | Value::Ext(_)
        )
    }

    /// Replaces this value, skipping the drop call when the old one owns nothing (the return
    /// slot of a call usually holds a plain value).
    #[inline]
    pub fn set(&mut self, v: Value) {
        let old = std::mem::replace(self, v);
        if old.owns_resources() {
            drop(old);
        } else {
            std::mem::forget(old);
        }
    }

    /// The type code of this value.
    pub fn type_code(&self) -> c_int {
        match self {
            Value::Null => code::NULL,
            Value::Int(_) => code::INT,
            Value::UInt(_) => code::UINT,
            Value::Float(_) => code::FLOAT,
            Value::Handle(_) => code::HANDLE,
            Value::DataType(_) => code::DATA_TYPE,
            Value::Device(_) => code::DEVICE,
            Value::DLTensor(_) => code::DLTENSOR,
            Value::Object(_) => code::OBJECT,
            Value::Module(_) => code::MODULE,
            Value::Func(_) => code::FUNC,
            Value::NDArray(_) => code::NDARRAY,
            Value::Str(_) => code::STR,
            Value::Bytes(_) => code::BYTES,
            Value::Ext(e) => e.0,
        }
    }

    /// The object behind this value, if it is one (objects, modules, NDArrays).
    pub fn as_object(&self) -> Option<ObjectRef> {
        match self {
            Value::Object(o) => Some(o.clone()),
            Value::Module(m) => Some(m.as_object().clone()),
            Value::NDArray(a) => Some(a.as_object().clone()),
            _ => None,
        }
    }

    /// A String object's or a string's text.
    pub fn as_str(&self) -> Option<String> {
        match self {
            Value::Str(s) => Some(String::clone(s)),
            Value::Object(o) => o.downcast::<StringObj>().map(StringObj::to_string_lossy),
            _ => None,
        }
    }
}

/// A borrowed view of call arguments.
#[derive(Clone, Copy)]
pub struct Args<'a> {
    values: &'a [TVMValue],
    codes: &'a [c_int],
}

pub use tvm_runtime_core::abi::slice_from_raw;

impl<'a> Args<'a> {
    /// Wraps the caller's arrays.
    ///
    /// # Safety
    /// `values`/`codes` point to `num_args` elements (or may be NULL when `num_args == 0`), and
    /// every value is valid for its code (live handles, NUL-terminated strings) for `'a`.
    #[inline]
    pub unsafe fn from_raw(values: *const TVMValue, codes: *const c_int, num_args: c_int) -> Result<Args<'a>> {
        let n = usize::try_from(num_args).map_err(|_| Error::value(format!("negative num_args {num_args}")))?;
        // SAFETY: per contract.
        let values = unsafe { slice_from_raw(values, n)? };
        // SAFETY: per contract.
        let codes = unsafe { slice_from_raw(codes, n)? };
        Ok(Args { values, codes })
    }

    /// Wraps slices.
    ///
    /// # Safety
    /// Every value is valid for its code for `'a` (see [`Args::from_raw`]).
    pub unsafe fn new(values: &'a [TVMValue], codes: &'a [c_int]) -> Args<'a> {
        let n = values.len().min(codes.len());
        Args { values: &values[..n], codes: &codes[..n] }
    }

    /// No arguments.
    pub fn empty() -> Args<'static> {
        Args { values: &[], codes: &[] }
    }

    /// Number of arguments.
    pub fn len(&self) -> usize {
        self.values.len()
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.values.is_empty()
    }

    /// The raw values.
    pub fn values(&self) -> &'a [TVMValue] {
        self.values
    }

    /// The raw codes.
    pub fn codes(&self) -> &'a [c_int] {
        self.codes
    }

    /// The arguments from `start` on.
    pub fn slice_from(&self, start: usize) -> Args<'a> {
        let s = start.min(self.len());
        Args { values: &self.values[s..], codes: &self.codes[s..] }
    }

    /// Fails unless there are exactly `n` arguments.
    pub fn expect_len(&self, name: &str, n: usize) -> Result<()> {
        if self.len() != n {
            return Err(Error::tvm(format!(
                "Function {name} expects {n} arguments, but {} were provided.",
                self.len()
            )));
        }
        Ok(())
    }

    /// Fails unless there are at least `n` arguments.
    pub fn expect_at_least(&self, name: &str, n: usize) -> Result<()> {
        if self.len() < n {
            return Err(Error::tvm(format!(
                "Function {name} expects at least {n} arguments, but {} were provided.",
                self.len()
            )));
        }
        Ok(())
    }

    /// The type code of argument `i`.
    pub fn code(&self, i: usize) -> Result<c_int> {
        self.codes
            .get(i)
            .copied()
            .ok_or_else(|| Error::index(format!("argument index {i} out of range: {} arguments", self.len())))
    }

    fn raw(&self, i: usize) -> Result<(TVMValue, c_int)> {
        let c = self.code(i)?;
        Ok((self.values[i], c))
    }

    fn mismatch(i: usize, want: &str, got: c_int) -> Error {
        Error::type_error(format!("error while converting argument {i}: expected {want} but got {}", code_name(got)))
    }

    /// `int64`: code 0, or a bool (code 15, TVM v0.18+) as 0/1.
    pub fn i64(&self, i: usize) -> Result<i64> {
        let (v, c) = self.raw(i)?;
        match c {
            // SAFETY: code 0 carries v_int64.
            code::INT => Ok(unsafe { v.v_int64 }),
            // SAFETY: code 15 carries a bool in v_int64 (TVM reads all of it, as here).
            code::BOOL => Ok(i64::from(unsafe { v.v_int64 } != 0)),
            _ => Err(Self::mismatch(i, "int", c)),
        }
    }

    /// `int` (32-bit): code 0 and the value must fit.
    pub fn i32(&self, i: usize) -> Result<i32> {
        let v = self.i64(i)?;
        i32::try_from(v).map_err(|_| Error::value(format!("argument {i}: {v} does not fit in int32")))
    }

    /// `double`: code 2, or 0 converted.
    pub fn f64(&self, i: usize) -> Result<f64> {
        let (v, c) = self.raw(i)?;
        match c {
            // SAFETY: code 2 carries v_float64.
            code::FLOAT => Ok(unsafe { v.v_float64 }),
            // SAFETY: code 0 carries v_int64.
            code::INT => Ok(unsafe { v.v_int64 } as f64),
            _ => Err(Self::mismatch(i, "float", c)),
        }
    }

    /// `void*`: code 3, 4 (NULL) or 7.
    pub fn handle(&self, i: usize) -> Result<*mut c_void> {
        let (v, c) = self.raw(i)?;
        match c {
            // SAFETY: these codes carry v_handle.
            code::HANDLE | code::DLTENSOR => Ok(unsafe { v.v_handle }),
            code::NULL => Ok(std::ptr::null_mut()),
            _ => Err(Self::mismatch(i, "handle", c)),
        }
    }

    /// `DLTensor*`: code 7 or 13; 4 is NULL.
    pub fn dltensor(&self, i: usize) -> Result<*mut DLTensor> {
        let (v, c) = self.raw(i)?;
        match c {
            // SAFETY: these codes carry v_handle (a DLTensor*).
            code::DLTENSOR | code::NDARRAY => Ok(unsafe { v.v_handle }.cast()),
            code::NULL => Ok(std::ptr::null_mut()),
            _ => Err(Self::mismatch(i, "DLTensor*", c)),
        }
    }

    /// `Device`: code 6.
    pub fn device(&self, i: usize) -> Result<DLDevice> {
        let (v, c) = self.raw(i)?;
        match c {
            // SAFETY: code 6 carries v_device.
            code::DEVICE => Ok(unsafe { v.v_device }),
            _ => Err(Self::mismatch(i, "DLDevice", c)),
        }
    }

    /// `DLDataType`: code 5, a string, or NULL (void).
    pub fn dtype(&self, i: usize) -> Result<DLDataType> {
        let (v, c) = self.raw(i)?;
        match c {
            // SAFETY: code 5 carries v_type.
            code::DATA_TYPE => Ok(unsafe { v.v_type }),
            code::NULL => Ok(DLDataType { code: 3, bits: 0, lanes: 0 }),
            code::STR | code::OBJECT | code::RVALUE_REF => dtype::parse(&self.string(i)?),
            _ => Err(Self::mismatch(i, "DLDataType", c)),
        }
    }

    /// The bytes of a string argument: codes 11, 12, 5 (formatted) or a String object.
    pub fn bytes(&self, i: usize) -> Result<Vec<u8>> {
        let (v, c) = self.raw(i)?;
        match c {
            code::STR => {
                // SAFETY: code 11 carries a NUL-terminated string (checked non-NULL).
                let p = unsafe { v.v_str };
                if p.is_null() {
                    return Err(Error::value(format!("argument {i}: null string")));
                }
                // SAFETY: as above.
                Ok(unsafe { CStr::from_ptr(p) }.to_bytes().to_vec())
            }
            code::BYTES => {
                // SAFETY: code 12 carries a TVMByteArray*.
                let ba = unsafe { v.v_handle }.cast::<TVMByteArray>();
                if ba.is_null() {
                    return Err(Error::value(format!("argument {i}: null byte array")));
                }
                // SAFETY: a live byte array per the Args contract.
                let ba = unsafe { *ba };
                // SAFETY: `data` holds `size` bytes.
                Ok(unsafe { slice_from_raw(ba.data.cast::<u8>(), ba.size)? }.to_vec())
            }
            // SAFETY: code 5 carries v_type.
            code::DATA_TYPE => Ok(dtype::format(unsafe { v.v_type })?.into_bytes()),
            code::OBJECT | code::RVALUE_REF => {
                let obj = self.object(i)?.ok_or_else(|| Self::mismatch(i, "str", c))?;
                obj.downcast::<StringObj>()
                    .map(|s| s.as_bytes().to_vec())
                    .ok_or_else(|| Error::type_error(format!("argument {i}: expected str but got Object")))
            }
            _ => Err(Self::mismatch(i, "str", c)),
        }
    }

    /// Like [`Args::bytes`], but borrows the caller's bytes (codes 11 and 12) for the call
    /// instead of copying them: for large inputs such as a params blob.
    pub(crate) fn bytes_view(&self, i: usize) -> Result<std::borrow::Cow<'a, [u8]>> {
        let (v, c) = self.raw(i)?;
        if c == code::BYTES {
            // SAFETY: code 12 carries a TVMByteArray* (checked non-NULL), live for the call.
            if let Some(ba) = unsafe { v.v_handle.cast::<TVMByteArray>().as_ref() } {
                // SAFETY: `data` holds `size` bytes that the caller keeps for the call ('a).
                return Ok(std::borrow::Cow::Borrowed(unsafe { slice_from_raw(ba.data.cast::<u8>(), ba.size)? }));
            }
        }
        self.bytes(i).map(std::borrow::Cow::Owned)
    }

    /// A string argument (lossily decoded to UTF-8).
    pub fn string(&self, i: usize) -> Result<String> {
        let b = self.bytes(i)?;
        Ok(String::from_utf8(b).unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned()))
    }

    /// A function: code 10; 4 is none.
    pub fn func(&self, i: usize) -> Result<Option<PackedFunc>> {
        let (v, c) = self.raw(i)?;
        match c {
            // SAFETY: code 10 carries a live function handle (`*mut PackedFunc`).
            code::FUNC => Ok(unsafe { PackedFunc::from_handle(v.v_handle) }),
            code::NULL => Ok(None),
            _ => Err(Self::mismatch(i, "FunctionHandle", c)),
        }
    }

    /// A module: code 9; 4 is none.
    pub fn module(&self, i: usize) -> Result<Option<Module>> {
        let (v, c) = self.raw(i)?;
        match c {
            code::MODULE => {
                // SAFETY: code 9 carries a live module header.
                let obj = unsafe { ObjectRef::from_borrowed(v.v_handle.cast()) };
                Ok(obj.and_then(Module::from_object))
            }
            code::NULL => Ok(None),
            _ => Err(Self::mismatch(i, "ModuleHandle", c)),
        }
    }

    /// An NDArray: code 13; 4 is none.
    pub fn ndarray(&self, i: usize) -> Result<Option<NDArray>> {
        let (v, c) = self.raw(i)?;
        match c {
            // SAFETY: code 13 carries a live NDArray handle.
            code::NDARRAY => Ok(unsafe { NDArray::from_handle_borrowed(v.v_handle.cast()) }),
            code::NULL => Ok(None),
            _ => Err(Self::mismatch(i, "NDArrayContainer", c)),
        }
    }

    /// Any object: codes 8, 14 (copied, not moved), 9, 13; 4 is none.
    pub fn object(&self, i: usize) -> Result<Option<ObjectRef>> {
        let (v, c) = self.raw(i)?;
        // SAFETY: the code says which handle the value holds, and handles are live for the call
        // (the `Args` contract); an rvalue reference points to a caller variable holding one.
        unsafe {
            match c {
                code::OBJECT | code::MODULE => Ok(ObjectRef::from_borrowed(v.v_handle.cast())),
                code::RVALUE_REF => {
                    let slot = v.v_handle.cast::<*mut ObjectHeader>();
                    if slot.is_null() {
                        return Ok(None);
                    }
                    Ok(ObjectRef::from_borrowed(*slot))
                }
                code::NDARRAY => Ok(NDArray::from_handle_borrowed(v.v_handle.cast()).map(|a| a.into_object())),
                code::NULL => Ok(None),
                _ => Err(Self::mismatch(i, "Object", c)),
            }
        }
    }

    /// An object with a given static type: codes 8/14 type-checked.
    pub fn object_of(&self, i: usize, tindex: u32, what: &str) -> Result<ObjectRef> {
        let o =
            self.object(i)?.ok_or_else(|| Error::type_error(format!("argument {i}: expected {what} but got NULL")))?;
        if o.type_index() != tindex {
            let got = crate::object::type_index2key(o.type_index()).unwrap_or_default();
            return Err(Error::type_error(format!("argument {i}: expected {what} but got {got}")));
        }
        Ok(o)
    }

    /// A copy of argument `i` as an owned value (copying semantics: strings copied, objects
    /// retained, functions shared; an rvalue reference is read, not moved).
    pub fn get(&self, i: usize) -> Result<Value> {
        let (v, c) = self.raw(i)?;
        // SAFETY: the code says which union member is valid.
        let pod = unsafe {
            match c {
                code::INT => Value::Int(v.v_int64),
                code::BOOL => Value::Int(i64::from(v.v_int64 != 0)),
                code::UINT => Value::UInt(v.v_int64),
                code::FLOAT => Value::Float(v.v_float64),
                code::HANDLE => Value::Handle(v.v_handle),
                code::NULL => Value::Null,
                code::DATA_TYPE => Value::DataType(v.v_type),
                code::DEVICE => Value::Device(v.v_device),
                code::DLTENSOR => Value::DLTensor(v.v_handle.cast()),
                _ => Value::Null,
            }
        };
        Ok(match c {
            code::INT
            | code::BOOL
            | code::UINT
            | code::FLOAT
            | code::HANDLE
            | code::NULL
            | code::DATA_TYPE
            | code::DEVICE
            | code::DLTENSOR => pod,
            code::OBJECT | code::RVALUE_REF | code::MODULE | code::NDARRAY => Value::from_opt_object(self.object(i)?),
            code::FUNC => self.func(i)?.map_or(Value::Null, Value::func),
            code::STR => Value::str(self.string(i)?),
            code::BYTES => Value::bytes(self.bytes(i)?),
            c if (code::BOOL + 1..code::EXT_END).contains(&c) => Value::ext(c, v),
            c => return Err(Error::value(format!("unknown type_code={c}"))),
        })
    }
}

/// Owned storage for arguments encoded from Rust values, viewed as [`Args`].
#[derive(Default)]
pub struct ArgsBuf {
    values: Vec<TVMValue>,
    codes: Vec<c_int>,
    strings: Vec<CString>,
    #[expect(clippy::vec_box, reason = "argument values point at these byte arrays")]
    byte_arrays: Vec<Box<TVMByteArray>>,
}

impl ArgsBuf {
    /// Encodes borrowed arguments from values; the values must outlive the buffer's use.
    pub fn new(vals: &[Value]) -> ArgsBuf {
        let mut b = ArgsBuf {
            values: Vec::with_capacity(vals.len()),
            codes: Vec::with_capacity(vals.len()),
            ..ArgsBuf::default()
        };
        for v in vals {
            let tv = match v {
                Value::Null => TVMValue::ZERO,
                Value::Int(x) | Value::UInt(x) => TVMValue { v_int64: *x },
                Value::Float(x) => TVMValue { v_float64: *x },
                Value::Handle(p) => TVMValue { v_handle: *p },
                Value::DataType(t) => TVMValue { v_type: *t },
                Value::Device(d) => TVMValue { v_device: *d },
                Value::DLTensor(p) => TVMValue { v_handle: p.cast() },
                Value::Object(o) => TVMValue { v_handle: o.as_ptr().cast() },
                Value::Module(m) => TVMValue { v_handle: m.as_object().as_ptr().cast() },
                Value::Func(f) => TVMValue { v_handle: f.as_handle() },
                Value::NDArray(a) => TVMValue { v_handle: a.handle().cast() },
                Value::Str(s) => {
                    let end = s.bytes().position(|c| c == 0).unwrap_or(s.len());
                    let cs = CString::new(&s.as_bytes()[..end]).unwrap_or_default();
                    let p = cs.as_ptr();
                    b.strings.push(cs);
                    TVMValue { v_str: p }
                }
                Value::Bytes(bytes) => {
                    let ba = Box::new(TVMByteArray { data: bytes.as_ptr().cast::<c_char>(), size: bytes.len() });
                    let p = (&*ba as *const TVMByteArray).cast_mut().cast::<c_void>();
                    b.byte_arrays.push(ba);
                    TVMValue { v_handle: p }
                }
                Value::Ext(e) => e.1,
            };
            b.values.push(tv);
            b.codes.push(v.type_code());
        }
        b
    }

    /// The arguments.
    pub fn args(&self) -> Args<'_> {
        // SAFETY: every value was encoded from a live Rust value that the caller keeps alive
        // while the buffer is used (strings and byte arrays are owned by the buffer itself).
        unsafe { Args::new(&self.values, &self.codes) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn coercions() {
        let vals =
            [Value::Int(3), Value::Float(1.5), Value::str("float32"), Value::Null, Value::bytes(b"a\0b".to_vec())];
        let buf = ArgsBuf::new(&vals);
        let a = buf.args();
        assert_eq!(a.i64(0).unwrap(), 3);
        assert_eq!(a.f64(0).unwrap(), 3.0);
        assert_eq!(a.f64(1).unwrap(), 1.5);
        assert!(a.i64(1).unwrap_err().to_string().contains("expected int but got float"));
        assert_eq!(a.dtype(2).unwrap(), dtype::FLOAT32);
        assert_eq!(a.handle(3).unwrap(), std::ptr::null_mut());
        assert_eq!(a.bytes(4).unwrap(), b"a\0b");
        assert!(a.func(3).unwrap().is_none());
        assert!(a.i64(9).is_err());
        assert!(matches!(a.get(2).unwrap(), Value::Str(s) if s.as_str() == "float32"));
    }

    #[test]
    fn string_objects_are_strings() {
        let s = StringObj::new_object(b"int8");
        let vals = [Value::Object(s)];
        let buf = ArgsBuf::new(&vals);
        assert_eq!(buf.args().string(0).unwrap(), "int8");
        assert_eq!(buf.args().dtype(0).unwrap(), dtype::dtype(0, 8, 1));
    }
}
