//! The external-library kernels that TVM's default runtime build carries and that compiled
//! models call through `TVMBackendGetFuncFromEnv`: `tvm.contrib.sort.*` and
//! `tvm.contrib.random.*`.

pub mod random;
pub mod sort;

use crate::abi::DLTensor;
use crate::device::{self, CPU};
use crate::error::{Error, Result};
use crate::registry::Registrar;
use crate::value::Args;

/// Registers the globals.
pub fn register(r: &mut Registrar<'_>) {
    sort::register(r);
    random::register(r);
}

/// A checked view of a compact CPU tensor argument.
pub(crate) struct Tensor {
    /// Address of element 0 (data + byte offset).
    pub ptr: *mut u8,
    /// Extents.
    pub shape: Vec<i64>,
    /// Element type.
    pub dtype: crate::abi::DLDataType,
    /// Number of elements.
    pub len: usize,
}

impl Tensor {
    /// Argument `i` as a tensor; `what` names the function in errors.
    pub(crate) fn arg(a: &Args<'_>, i: usize, what: &str) -> Result<Tensor> {
        let t = a.dltensor(i)?;
        if t.is_null() {
            return Err(Error::value(format!("{what}: argument {i} is a NULL tensor")));
        }
        // SAFETY: a tensor argument points to a live DLTensor for the call (the caller's
        // contract for codes 7 and 13, which `dltensor` checked).
        let t: &DLTensor = unsafe { &*t };
        Tensor::of(t, what)
    }

    /// Views `t`, which must be a compact CPU tensor.
    pub(crate) fn of(t: &DLTensor, what: &str) -> Result<Tensor> {
        if t.device.device_type != CPU {
            return Err(Error::value(format!("{what}: tensors must be on the CPU")));
        }
        if !device::is_contiguous(t) {
            return Err(Error::value(format!("{what}: tensors must be compact")));
        }
        let shape = device::tensor_shape(t)?.to_vec();
        device::shape_bytes(&shape, t.dtype)?;
        let len = shape.iter().product::<i64>() as usize;
        if len > 0 && t.data.is_null() {
            return Err(Error::value(format!("{what}: tensor data is NULL")));
        }
        Ok(Tensor { ptr: t.data.cast::<u8>().wrapping_add(t.byte_offset as usize), shape, dtype: t.dtype, len })
    }

    /// The dtype as text (`float32`, ...).
    pub(crate) fn dtype_name(&self) -> String {
        crate::value::dtype::format(self.dtype).unwrap_or_else(|_| format!("{:?}", self.dtype))
    }
}
