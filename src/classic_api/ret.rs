//! Moving a returned value to C: ownership as in TVM's C API; strings and bytes through this
//! thread's return slot, valid until the next call on this thread.

use crate::abi::{TVMByteArray, TVMValue};
use crate::error::Result;
use crate::value::{code, dtype, Value};
use std::cell::RefCell;
use std::ffi::{c_char, c_int, c_void};

struct Slot {
    text: Vec<u8>,
    bytes: TVMByteArray,
}

thread_local! {
    static SLOT: RefCell<Slot> = const {
        RefCell::new(Slot { text: Vec::new(), bytes: TVMByteArray { data: std::ptr::null(), size: 0 } })
    };
}

/// Stores a string in the slot; returns a pointer valid until the next call on this thread.
fn slot_str(s: &[u8]) -> *const c_char {
    let end = s.iter().position(|&b| b == 0).unwrap_or(s.len());
    SLOT.with(|slot| {
        let mut slot = slot.borrow_mut();
        slot.text.clear();
        slot.text.extend_from_slice(&s[..end]);
        slot.text.push(0);
        slot.text.as_ptr().cast()
    })
}

/// Stores bytes in the slot; returns the slot's `TVMByteArray`.
fn slot_bytes(b: &[u8]) -> *mut TVMByteArray {
    SLOT.with(|slot| {
        let mut slot = slot.borrow_mut();
        slot.text.clear();
        slot.text.extend_from_slice(b);
        slot.bytes = TVMByteArray { data: slot.text.as_ptr().cast(), size: b.len() };
        &mut slot.bytes as *mut TVMByteArray
    })
}

/// Whether `p` is this thread's return byte array.
pub fn is_slot_bytes(p: *const TVMByteArray) -> bool {
    SLOT.with(|slot| std::ptr::eq(&slot.borrow().bytes, p))
}

/// Converts a value for C, moving its ownership there.
#[inline]
pub fn to_c(v: Value) -> Result<(TVMValue, c_int)> {
    Ok(match v {
        Value::Null => (TVMValue::ZERO, code::NULL),
        Value::Int(x) => (TVMValue { v_int64: x }, code::INT),
        Value::UInt(x) => (TVMValue { v_int64: x }, code::UINT),
        Value::Float(x) => (TVMValue { v_float64: x }, code::FLOAT),
        Value::Handle(p) => (TVMValue { v_handle: p }, code::HANDLE),
        Value::DataType(t) => (TVMValue { v_str: slot_str(dtype::format(t)?.as_bytes()) }, code::STR),
        Value::Device(d) => (TVMValue { v_device: d }, code::DEVICE),
        Value::DLTensor(p) => (TVMValue { v_handle: p.cast() }, code::DLTENSOR),
        Value::Object(o) => (TVMValue { v_handle: o.into_raw().cast() }, code::OBJECT),
        Value::Module(m) => (TVMValue { v_handle: m.into_object().into_raw().cast() }, code::MODULE),
        Value::Func(f) => (TVMValue { v_handle: Box::into_raw(f).cast() }, code::FUNC),
        Value::NDArray(a) => (TVMValue { v_handle: a.into_handle().cast::<c_void>() }, code::NDARRAY),
        Value::Str(s) => (TVMValue { v_str: slot_str(s.as_bytes()) }, code::STR),
        Value::Bytes(b) => (TVMValue { v_handle: slot_bytes(&b).cast() }, code::BYTES),
        Value::Ext(e) => (e.1, e.0),
    })
}
