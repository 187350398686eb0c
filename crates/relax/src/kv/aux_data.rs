//! The auxiliary int32 arrays of a forward pass on the cache's device (TVM's
//! `CachedPagedKVCacheAuxDataManager`): staged on the host, one after the other at 16-byte
//! aligned offsets, copied to one device buffer in one copy, and handed to the kernels as
//! views into it. The layout is TVM's (the first array, the query RoPE positions, at offset 0,
//! which kernels and models reading it may require), so kernels see the same tensors.
//!
//! Unlike TVM's fixed 32 Mi-element buffers, the buffer grows with what a forward needs.

use tvm_runtime_classic::abi::{DLDataType, DLDevice, DLTensor};
use tvm_runtime_tvm_ffi::object::ObjectRef;
use tvm_runtime_tvm_ffi::{tensor, FfiResult};

/// int32, the auxiliary arrays' type.
pub(crate) const I32: DLDataType = DLDataType { code: 0, bits: 32, lanes: 1 };
const CPU: i32 = 1;

/// One staged array: its element offset and shape.
#[derive(Clone, Copy, Default, Debug)]
pub(crate) struct Slot {
    pub offset: usize,
    pub rows: i64,
    pub cols: i64,
}

/// A staging area and its device buffer.
pub(crate) struct Aux {
    device: DLDevice,
    host: Vec<i32>,
    buffer: Option<ObjectRef>,
    capacity: usize,
}

impl Aux {
    pub(crate) fn new(device: DLDevice) -> Aux {
        Aux { device, host: Vec::new(), buffer: None, capacity: 0 }
    }

    /// Starts a new set of arrays.
    pub(crate) fn reset(&mut self) {
        self.host.clear();
    }

    fn pad(&mut self) {
        let aligned = self.host.len().div_ceil(4) * 4;
        self.host.resize(aligned, 0);
    }

    /// Stages a 1-d array.
    pub(crate) fn push(&mut self, data: &[i32]) -> Slot {
        let offset = self.host.len();
        self.host.extend_from_slice(data);
        self.pad();
        Slot { offset, rows: data.len() as i64, cols: 0 }
    }

    /// Stages `n` copies of `value`.
    pub(crate) fn push_fill(&mut self, value: i32, n: usize) -> Slot {
        let offset = self.host.len();
        self.host.resize(offset + n, value);
        self.pad();
        Slot { offset, rows: n as i64, cols: 0 }
    }

    /// Stages a `(k, n)` array from `k` rows of `n` values.
    pub(crate) fn push_rows(&mut self, rows: &[&[i32]]) -> Slot {
        let offset = self.host.len();
        let n = rows.first().map_or(0, |r| r.len());
        for r in rows {
            self.host.extend_from_slice(r);
        }
        self.pad();
        Slot { offset, rows: rows.len() as i64, cols: n as i64 }
    }

    /// Copies the staged arrays to the device (growing the buffer if needed) and returns the
    /// buffer the views are taken from.
    pub(crate) fn commit(&mut self) -> FfiResult<ObjectRef> {
        let need = self.host.len().max(4);
        if self.buffer.is_none() || self.capacity < need {
            let cap = need.next_power_of_two().max(1024);
            self.buffer = Some(tensor::empty(&[cap as i64], I32, self.device)?);
            self.capacity = cap;
        }
        let buf = self.buffer.clone().expect("allocated above");
        // SAFETY: a live tensor we allocated.
        let dst = unsafe { tensor::dltensor(buf.as_ptr()) };
        if self.device.device_type == CPU {
            // SAFETY: the buffer holds `capacity >= host.len()` int32 values on the host.
            unsafe {
                std::ptr::copy_nonoverlapping(
                    self.host.as_ptr(),
                    (dst.data as *mut u8).add(dst.byte_offset as usize).cast::<i32>(),
                    self.host.len(),
                )
            };
        } else if !self.host.is_empty() {
            let mut shape = [self.host.len() as i64];
            let src = DLTensor {
                data: self.host.as_mut_ptr().cast(),
                device: DLDevice { device_type: CPU, device_id: 0 },
                ndim: 1,
                dtype: I32,
                shape: shape.as_mut_ptr(),
                strides: std::ptr::null_mut(),
                byte_offset: 0,
            };
            let mut d = *dst;
            d.shape = shape.as_mut_ptr();
            d.strides = std::ptr::null_mut();
            tvm_runtime_classic::ndarray::copy_tensor(&src, &d, std::ptr::null_mut())?;
        }
        Ok(buf)
    }

    /// A view of a committed slot: 1-d, or `(rows, cols)` for [`Aux::push_rows`].
    pub(crate) fn view(&self, buf: &ObjectRef, s: Slot) -> ObjectRef {
        // SAFETY: a live tensor we allocated.
        let d = unsafe { tensor::dltensor(buf.as_ptr()) };
        let off = d.byte_offset + 4 * s.offset as u64;
        if s.cols == 0 && s.rows >= 0 {
            tensor::in_owner(buf.clone(), d.data, off, &[s.rows], I32, d.device)
        } else {
            tensor::in_owner(buf.clone(), d.data, off, &[s.rows, s.cols], I32, d.device)
        }
    }

    /// A view of a committed slot with an explicit shape (its elements staged).
    pub(crate) fn view_shaped(&self, buf: &ObjectRef, s: Slot, shape: &[i64]) -> ObjectRef {
        // SAFETY: a live tensor we allocated.
        let d = unsafe { tensor::dltensor(buf.as_ptr()) };
        tensor::in_owner(buf.clone(), d.data, d.byte_offset + 4 * s.offset as u64, shape, I32, d.device)
    }
}

/// A host (CPU) int32 tensor holding `data` (for FlashInfer's plan functions, which read the
/// host copies of the arrays).
pub(crate) fn host_tensor(data: &[i32]) -> FfiResult<ObjectRef> {
    let t = tensor::empty(&[data.len() as i64], I32, DLDevice { device_type: CPU, device_id: 0 })?;
    // SAFETY: a live CPU tensor of `data.len()` int32 values.
    unsafe {
        let d = tensor::dltensor(t.as_ptr());
        std::ptr::copy_nonoverlapping(
            data.as_ptr(),
            (d.data as *mut u8).add(d.byte_offset as usize).cast(),
            data.len(),
        );
    }
    Ok(t)
}
