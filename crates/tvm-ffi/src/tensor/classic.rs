//! Arrays of the classic runtime as `ffi.Tensor`s and back, without copying: each side adopts
//! the other's DLPack export, so the memory stays alive while either object does (the safe Rust
//! API passes its arrays to the Relax VM and takes the VM's results this way).
//!
//! Booleans are spelled differently on the two sides, one byte per element on both: the
//! classic runtime's `bool` is `uint1` (TVM v0.8-v0.19), tvm-ffi's is `kDLBool` with 8 bits (TVM
//! v0.20+, what the Relax VM's `check_tensor_info` expects). The conversions translate it.

use super::{dltensor, from_dlpack, is_contiguous, to_dlpack};
use crate::object::ObjectRef;
use crate::{ti, types, FfiError, FfiResult};
use tvm_runtime_classic::abi::DLDataType;
use tvm_runtime_classic::ndarray::NDArray;

/// The classic runtime's `bool`.
const CLASSIC_BOOL: DLDataType = DLDataType { code: 1, bits: 1, lanes: 1 };
/// tvm-ffi's `bool` (`kDLBool`).
const FFI_BOOL_CODE: u8 = 6;

fn to_ffi_dtype(t: DLDataType) -> DLDataType {
    if (t.code, t.bits) == (CLASSIC_BOOL.code, CLASSIC_BOOL.bits) {
        DLDataType { code: FFI_BOOL_CODE, bits: 8, lanes: t.lanes }
    } else {
        t
    }
}

fn to_classic_dtype(t: DLDataType) -> DLDataType {
    if (t.code, t.bits) == (FFI_BOOL_CODE, 8) {
        DLDataType { lanes: t.lanes, ..CLASSIC_BOOL }
    } else {
        t
    }
}

/// A tensor over a classic array's memory: it holds a reference to the array.
pub fn from_classic(a: &NDArray) -> FfiResult<ObjectRef> {
    let m = a.to_dlpack();
    // SAFETY: a fresh managed tensor of ours; its dtype is a copy.
    unsafe { (*m).dl_tensor.dtype = to_ffi_dtype((*m).dl_tensor.dtype) };
    // SAFETY: a fresh managed tensor whose ownership moves in; on error it is still ours.
    match unsafe { from_dlpack(m, 0, false) } {
        Ok(t) => Ok(t),
        Err(e) => {
            // SAFETY: still ours after a failed import; its deleter runs once.
            unsafe {
                if let Some(d) = (*m).deleter {
                    d(m);
                }
            }
            Err(e)
        }
    }
}

/// A classic array over a tensor's memory: it holds a reference to the tensor. The tensor must
/// be compact (the classic arrays are; every tensor the Relax VM makes is).
pub fn to_classic(t: &ObjectRef) -> FfiResult<NDArray> {
    if !types::is_instance(t.type_index(), ti::TENSOR) {
        return Err(FfiError::type_error(format!("expected ffi.Tensor, got {}", types::type_key(t.type_index()))));
    }
    // SAFETY: a live tensor (checked above).
    if !is_contiguous(unsafe { dltensor(t.as_ptr()) }) {
        return Err(FfiError::value("a strided (non-contiguous) ffi.Tensor cannot be shared with the classic runtime"));
    }
    // SAFETY: a live tensor; the managed tensor holds one reference to it.
    let m = unsafe { to_dlpack(t.as_ptr()) };
    // SAFETY: a fresh managed tensor of ours; its dtype is a copy.
    unsafe { (*m).dl_tensor.dtype = to_classic_dtype((*m).dl_tensor.dtype) };
    // SAFETY: a fresh managed tensor whose ownership moves to the array; on error it is ours.
    match unsafe { NDArray::from_dlpack(m) } {
        Ok(a) => Ok(a),
        Err(e) => {
            // SAFETY: still ours after a failed import; its deleter runs once.
            unsafe {
                if let Some(d) = (*m).deleter {
                    d(m);
                }
            }
            Err(e.into())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tvm_runtime_classic::abi::{DLDataType, DLDevice};

    #[test]
    fn both_ways_share_memory_and_keep_it_alive() {
        let f32 = DLDataType { code: 2, bits: 32, lanes: 1 };
        let cpu = DLDevice { device_type: 1, device_id: 0 };
        let a = NDArray::empty(&[2, 3], f32, cpu).unwrap();
        let bytes: Vec<u8> = (0..6).flat_map(|i| (i as f32).to_ne_bytes()).collect();
        a.copy_from_bytes(&bytes).unwrap();
        let t = from_classic(&a).unwrap();
        // SAFETY: a live tensor.
        let dl = unsafe { dltensor(t.as_ptr()) };
        assert_eq!(dl.data, a.tensor().data);
        drop(a);
        let b = to_classic(&t).unwrap();
        drop(t);
        assert_eq!(b.shape(), &[2, 3]);
        assert_eq!(b.to_bytes().unwrap(), bytes);
        // Booleans change spelling, not bytes.
        let flags = NDArray::empty(&[3], CLASSIC_BOOL, cpu).unwrap();
        flags.copy_from_bytes(&[1, 0, 1]).unwrap();
        let t = from_classic(&flags).unwrap();
        // SAFETY: a live tensor.
        let dt = unsafe { dltensor(t.as_ptr()) }.dtype;
        assert_eq!((dt.code, dt.bits, dt.lanes), (6, 8, 1));
        let back = to_classic(&t).unwrap();
        assert_eq!(back.dtype(), CLASSIC_BOOL);
        assert_eq!(back.to_bytes().unwrap(), [1, 0, 1]);
        let s = crate::containers::shape::make_shape(&[1]);
        assert_eq!(to_classic(&s).unwrap_err().kind(), "TypeError");
    }
}
