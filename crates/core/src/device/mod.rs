//! Devices: names and numbers, the [`DeviceApi`] trait every back end implements, and the
//! lookup from a device type to its API.
//!
//! The CPU's API is built in; the other back ends (CUDA, OpenCL, and the RPC device API behind
//! every remote device type) live in crates above this one and are installed once, by the
//! library's face when it is loaded ([`install`], [`install_remote`]). Lookup is a slot per
//! device type, never a call through a registry: the `device_api.<name>` globals exist only so
//! that registry listings and `runtime.RuntimeEnabled` behave as TVM's do.

pub mod cpu;
pub mod names;
pub mod workspace;

use crate::abi::{DLDataType, DLDevice, DLTensor};
use crate::dtype::element_bytes;
use crate::error::{Error, Result};
use std::ffi::c_void;
use std::sync::OnceLock;

/// The answer to a `DeviceAttrKind` query (a `TVMRetValue` in TVM: local back ends answer with
/// an integer, a string or nothing; a remote one may also send a float).
#[derive(Clone, Debug, PartialEq)]
pub enum Attr {
    /// No answer (`None` in Python).
    Null,
    /// An integer attribute (existence, sizes, clock rates, ...).
    Int(i64),
    /// A floating-point answer (only from a remote device).
    Float(f64),
    /// A string attribute (device name, compute version, max thread dimensions, ...).
    Str(String),
}

/// `kDLCPU`.
pub const CPU: i32 = 1;
/// `kDLCUDA`.
pub const CUDA: i32 = 2;
/// `kDLCUDAHost`.
pub const CUDA_HOST: i32 = 3;
/// `kDLOpenCL`.
pub const OPENCL: i32 = 4;
pub use names::RPC_SESS_MASK;

/// Alignment of NDArray data and workspaces.
pub const ALLOC_ALIGNMENT: usize = 128;

/// Alignment of a tensor's data: `max(128, bits / 8 * lanes)`.
pub fn data_alignment(dtype: DLDataType) -> usize {
    ALLOC_ALIGNMENT.max((dtype.bits as usize / 8) * dtype.lanes as usize)
}

/// TVM v0.8's name of a device type (`DeviceName`), or the `unknown type =<n>` error.
pub fn device_name(device_type: i32) -> Result<&'static str> {
    names::v08_name(device_type)
        .ok_or_else(|| Error::tvm(format!("unknown type ={device_type}{}", names::history_note(device_type))))
}

/// The operations of a device back end. Pointers are device memory handles.
pub trait DeviceApi: Send + Sync {
    /// Makes `dev` the calling thread's current device of this type.
    fn set_device(&self, dev: DLDevice) -> Result<()>;

    /// Answers a `DeviceAttrKind` query; [`Attr::Null`] means "no answer".
    fn get_attr(&self, dev: DLDevice, kind: i32) -> Result<Attr>;

    /// Flat allocation.
    fn alloc_data_space(
        &self,
        dev: DLDevice,
        nbytes: usize,
        alignment: usize,
        type_hint: DLDataType,
    ) -> Result<*mut c_void>;

    /// Shape allocation with an optional memory scope.
    fn alloc_data_space_scoped(
        &self,
        dev: DLDevice,
        shape: &[i64],
        dtype: DLDataType,
        scope: Option<&str>,
    ) -> Result<*mut c_void> {
        match scope {
            None | Some("global") => {
                self.alloc_data_space(dev, shape_bytes(shape, dtype)?, data_alignment(dtype), dtype)
            }
            Some(s) => Err(unsupported_scope(s)),
        }
    }

    /// Releases an allocation (NULL is a no-op).
    fn free_data_space(&self, dev: DLDevice, ptr: *mut c_void) -> Result<()>;

    /// Copies a whole tensor (checks sizes and contiguity, then [`DeviceApi::copy_flat`]).
    fn copy_data_from_to(&self, from: &DLTensor, to: &DLTensor, stream: *mut c_void) -> Result<()> {
        let nbytes = tensor_bytes(from)?;
        let to_bytes = tensor_bytes(to)?;
        if nbytes != to_bytes {
            return Err(Error::value(format!("Check failed: nbytes == GetDataSize(*to) ({nbytes} vs. {to_bytes})")));
        }
        if !is_contiguous(from) || !is_contiguous(to) {
            return Err(Error::value("CopyDataFromTo only support contiguous array for now"));
        }
        self.copy_flat(
            from.data,
            from.byte_offset,
            to.data,
            to.byte_offset,
            nbytes,
            from.device,
            to.device,
            from.dtype,
            stream,
        )
    }

    /// Copies `nbytes` between two memory handles (plus byte offsets).
    #[expect(clippy::too_many_arguments, reason = "mirrors TVM's DeviceAPI::CopyDataFromTo")]
    fn copy_flat(
        &self,
        from: *const c_void,
        from_offset: u64,
        to: *mut c_void,
        to_offset: u64,
        nbytes: usize,
        dev_from: DLDevice,
        dev_to: DLDevice,
        type_hint: DLDataType,
        stream: *mut c_void,
    ) -> Result<()>;

    /// Creates a stream (NULL where the device has none).
    fn create_stream(&self, _dev: DLDevice) -> Result<*mut c_void> {
        Ok(std::ptr::null_mut())
    }

    /// Frees a stream.
    fn free_stream(&self, _dev: DLDevice, _stream: *mut c_void) -> Result<()> {
        Ok(())
    }

    /// Waits for a stream (NULL = the default stream).
    fn stream_sync(&self, dev: DLDevice, stream: *mut c_void) -> Result<()>;

    /// Sets the calling thread's stream for later launches.
    fn set_stream(&self, _dev: DLDevice, _stream: *mut c_void) -> Result<()> {
        Ok(())
    }

    /// Makes `dst` wait for the work queued on `src`.
    fn sync_stream_from_to(&self, _dev: DLDevice, _src: *mut c_void, _dst: *mut c_void) -> Result<()> {
        Ok(())
    }

    /// A temporary buffer for generated code.
    fn alloc_workspace(&self, dev: DLDevice, nbytes: u64, type_hint: DLDataType) -> Result<*mut c_void> {
        let n =
            usize::try_from(nbytes).map_err(|_| Error::value(format!("workspace of {nbytes} bytes is too large")))?;
        self.alloc_data_space(dev, n, ALLOC_ALIGNMENT, type_hint)
    }

    /// Returns a temporary buffer.
    fn free_workspace(&self, dev: DLDevice, ptr: *mut c_void) -> Result<()> {
        self.free_data_space(dev, ptr)
    }
}

/// Device APIs installed beside the CPU one (CUDA, OpenCL), by device type.
static INSTALLED: [OnceLock<&'static dyn DeviceApi>; 16] = [const { OnceLock::new() }; 16];

/// The API of every remote device type (`RPC_SESS_MASK` and up: the session is in the number).
static REMOTE: OnceLock<&'static dyn DeviceApi> = OnceLock::new();

/// Installs the API of a local device type other than the CPU (once; a second call for the
/// same type is ignored, as is a type outside 0..16).
pub fn install(device_type: i32, api: &'static dyn DeviceApi) {
    if let Some(slot) = usize::try_from(device_type).ok().and_then(|t| INSTALLED.get(t)) {
        let _ = slot.set(api);
    }
}

/// Installs the API of remote devices (once).
pub fn install_remote(api: &'static dyn DeviceApi) {
    let _ = REMOTE.set(api);
}

/// The device API of a type: `Ok(None)` when it is not available and `allow_missing` is set.
pub fn get_api(device_type: i32, allow_missing: bool) -> Result<Option<&'static dyn DeviceApi>> {
    let name = device_name(device_type)?;
    let api: Option<&'static dyn DeviceApi> = match device_type {
        CPU => Some(&cpu::CPU_API),
        t if t >= RPC_SESS_MASK => REMOTE.get().copied(),
        t if (0..16).contains(&t) => INSTALLED[t as usize].get().copied(),
        _ => None,
    };
    match api {
        Some(a) => Ok(Some(a)),
        None if allow_missing => Ok(None),
        None => Err(Error::tvm(format!("Device API {name} is not enabled{}.", names::history_note(device_type)))),
    }
}

/// The device API of a type, or the error saying it is missing.
pub fn api(device_type: i32) -> Result<&'static dyn DeviceApi> {
    get_api(device_type, false)?.ok_or_else(|| Error::tvm("Device API is not enabled."))
}

/// The error for a memory scope a device does not support.
pub fn unsupported_scope(scope: &str) -> Error {
    Error::value(format!("Device does not support allocate data space with specified memory scope: {scope}"))
}

/// `prod(shape) * element bytes`, checked for overflow and negative extents.
pub fn shape_bytes(shape: &[i64], dtype: DLDataType) -> Result<usize> {
    let mut n: usize = 1;
    for &d in shape {
        let d = usize::try_from(d).map_err(|_| Error::value(format!("negative extent {d} in shape {shape:?}")))?;
        n = n.checked_mul(d).ok_or_else(|| Error::value(format!("shape {shape:?} is too large")))?;
    }
    n.checked_mul(element_bytes(dtype)).ok_or_else(|| Error::value(format!("shape {shape:?} is too large")))
}

/// The shape of a tensor as a slice.
///
/// The tensor's `shape` points to `ndim` extents (a `DLTensor` invariant that callers of the
/// C API promise).
pub fn tensor_shape(t: &DLTensor) -> Result<&[i64]> {
    let n = usize::try_from(t.ndim).map_err(|_| Error::value(format!("negative ndim {}", t.ndim)))?;
    // SAFETY: a DLTensor's `shape` holds `ndim` extents.
    unsafe { crate::abi::slice_from_raw(t.shape, n) }
}

/// Byte size of a tensor.
pub fn tensor_bytes(t: &DLTensor) -> Result<usize> {
    shape_bytes(tensor_shape(t)?, t.dtype)
}

/// Whether a tensor is compact row-major (NULL strides, or strides equal to the compact ones).
pub fn is_contiguous(t: &DLTensor) -> bool {
    if t.strides.is_null() {
        return true;
    }
    let Ok(shape) = tensor_shape(t) else { return false };
    // SAFETY: non-NULL strides hold `ndim` entries, like `shape`.
    let Ok(strides) = (unsafe { crate::abi::slice_from_raw(t.strides, shape.len()) }) else {
        return false;
    };
    let mut expect: i64 = 1;
    for k in (0..shape.len()).rev() {
        if strides[k] != expect {
            return false;
        }
        expect = expect.saturating_mul(shape[k]);
    }
    true
}

/// Device operations of the C API that first resolve the device's API.
pub fn device_of(device_type: i32, device_id: i32) -> DLDevice {
    DLDevice { device_type, device_id }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_and_lookup() {
        assert_eq!(device_name(1).unwrap(), "cpu");
        assert_eq!(device_name(130).unwrap(), "rpc");
        for bad in [0, 11, 13, 16, 64, 127, -1] {
            // Numbers that v0.9 renumbered also say what they meant in each release.
            assert!(device_name(bad).unwrap_err().to_string().starts_with(&format!("TVMError: unknown type ={bad}")));
        }
        assert!(get_api(1, false).unwrap().is_some());
        assert!(get_api(7, true).unwrap().is_none());
        let e = get_api(7, false).err().unwrap().to_string();
        assert_eq!(e, "TVMError: Device API vulkan is not enabled.");
    }
}
