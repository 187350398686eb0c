//! `#[repr(C)]` types of the C ABI, shared by the core and `ffi`: DLPack 0.5 as TVM v0.8
//! vendors it, and TVM's `TVMValue`, `TVMByteArray` and type-code constants.
//!
//! Names are TVM's and DLPack's exactly, since the C headers are generated from them.
//! Enums that C can fill with any bit pattern are never stored as Rust enums: structs carry the
//! raw integer, and the C enum types exist for the header only.

use crate::error::{Error, Result};
use std::ffi::{c_char, c_int, c_void};

/// `DLPACK_VERSION` as the header spells it (`050`, an octal literal, numerically 40).
pub const DLPACK_VERSION_VALUE: c_int = 0o50;

/// `DLDeviceType`: the type of a device (DLPack 0.5 values plus TVM's additions in
/// [`TVMDeviceExtType`]).
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[expect(non_camel_case_types, reason = "DLPack C ABI names")]
pub enum DLDeviceType {
    /// CPU device.
    kDLCPU = 1,
    /// CUDA GPU device.
    kDLCUDA = 2,
    /// Pinned CUDA CPU memory allocated by cudaMallocHost.
    kDLCUDAHost = 3,
    /// OpenCL devices.
    kDLOpenCL = 4,
    /// Vulkan buffer for next generation graphics.
    kDLVulkan = 7,
    /// Metal for Apple GPU.
    kDLMetal = 8,
    /// Verilog simulator buffer.
    kDLVPI = 9,
    /// ROCm GPUs for AMD GPUs.
    kDLROCM = 10,
    /// Reserved extension device type, used for quickly test extension device.
    kDLExtDev = 12,
}

/// The raw device type as it travels in [`DLDevice`]; the header names it `DLDeviceType`.
pub type DLDeviceTypeRaw = i32;

/// A device: its type and its index among the devices of that type.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub struct DLDevice {
    /// The device type used in the device.
    pub device_type: DLDeviceTypeRaw,
    /// The device index.
    pub device_id: c_int,
}

/// `DLDataTypeCode`: the type code of a [`DLDataType`].
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[expect(non_camel_case_types, reason = "DLPack C ABI names")]
pub enum DLDataTypeCode {
    /// Signed integer.
    kDLInt = 0,
    /// Unsigned integer.
    kDLUInt = 1,
    /// IEEE floating point.
    kDLFloat = 2,
    /// Opaque handle type, reserved for testing purposes.
    kDLOpaqueHandle = 3,
    /// bfloat16.
    kDLBfloat = 4,
    /// Complex number (C/C++/Python layout: compact struct per complex number).
    kDLComplex = 5,
}

/// The data type of a tensor's elements.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub struct DLDataType {
    /// Type code of base types (`DLDataTypeCode`; stored as `uint8_t`).
    pub code: u8,
    /// Number of bits, common choices are 8, 16, 32.
    pub bits: u8,
    /// Number of lanes in the type, used for vector types.
    pub lanes: u16,
}

/// Plain C tensor object, does not manage memory.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct DLTensor {
    /// The opaque data pointer that points to the allocated data.
    pub data: *mut c_void,
    /// The device of the tensor.
    pub device: DLDevice,
    /// Number of dimensions.
    pub ndim: c_int,
    /// The data type of the pointer.
    pub dtype: DLDataType,
    /// The shape of the tensor.
    pub shape: *mut i64,
    /// Strides of the tensor (in number of elements); NULL means compact row-major.
    pub strides: *mut i64,
    /// The offset in bytes to the beginning pointer to data.
    pub byte_offset: u64,
}

/// A tensor managed by another framework: `deleter(self)` releases it.
#[repr(C)]
#[derive(Debug)]
pub struct DLManagedTensor {
    /// DLTensor which is being memory managed.
    pub dl_tensor: DLTensor,
    /// The context of the original host framework.
    pub manager_ctx: *mut c_void,
    /// Destructor: the consumer calls it exactly once, with this struct.
    pub deleter: Option<unsafe extern "C" fn(self_: *mut DLManagedTensor)>,
}

/// Device types TVM adds to DLPack's.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[expect(non_camel_case_types, reason = "TVM C ABI names")]
pub enum TVMDeviceExtType {
    /// Intel FPGA OpenCL.
    kDLAOCL = 5,
    /// Xilinx SDAccel.
    kDLSDAccel = 6,
    /// OpenGL.
    kOpenGL = 11,
    /// microTVM devices.
    kDLMicroDev = 13,
    /// Hexagon DSP.
    kDLHexagon = 14,
    /// WebGPU.
    kDLWebGPU = 15,
}

/// The type code carried next to every [`TVMValue`].
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[expect(non_camel_case_types, reason = "TVM C ABI names")]
pub enum TVMArgTypeCode {
    /// `int64_t` in `v_int64` (same value as `kDLInt`).
    kTVMArgInt = 0,
    /// `double` in `v_float64` (same value as `kDLFloat`).
    kTVMArgFloat = 2,
    /// Opaque pointer in `v_handle`.
    kTVMOpaqueHandle = 3,
    /// NULL.
    kTVMNullptr = 4,
    /// `DLDataType` in `v_type`.
    kTVMDataType = 5,
    /// `DLDevice` in `v_device`.
    kDLDevice = 6,
    /// `DLTensor*` in `v_handle` (no ownership).
    kTVMDLTensorHandle = 7,
    /// Object handle.
    kTVMObjectHandle = 8,
    /// Module handle.
    kTVMModuleHandle = 9,
    /// PackedFunc handle.
    kTVMPackedFuncHandle = 10,
    /// NUL-terminated string in `v_str`.
    kTVMStr = 11,
    /// `TVMByteArray*` in `v_handle`.
    kTVMBytes = 12,
    /// NDArray handle (`DLTensor*` into the container).
    kTVMNDArrayHandle = 13,
    /// `Object**`: the callee may move the object out.
    kTVMObjectRValueRefArg = 14,
    /// First extension code.
    kTVMExtBegin = 15,
    /// First NNVM extension code.
    kTVMNNVMFirst = 16,
    /// Last NNVM extension code.
    kTVMNNVMLast = 20,
    /// End of the reserved extension codes.
    kTVMExtReserveEnd = 64,
    /// End of the extension codes.
    kTVMExtEnd = 128,
}

/// Union type of values passed through the PackedFunc C ABI.
#[repr(C)]
#[derive(Clone, Copy)]
pub union TVMValue {
    /// Integer value.
    pub v_int64: i64,
    /// Floating point value.
    pub v_float64: f64,
    /// Pointer value.
    pub v_handle: *mut c_void,
    /// NUL-terminated string.
    pub v_str: *const c_char,
    /// Data type.
    pub v_type: DLDataType,
    /// Device.
    pub v_device: DLDevice,
}

impl TVMValue {
    /// A value with all bits zero.
    pub const ZERO: TVMValue = TVMValue { v_int64: 0 };
}

impl Default for TVMValue {
    fn default() -> Self {
        Self::ZERO
    }
}

impl std::fmt::Debug for TVMValue {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // SAFETY: every bit pattern of the 8 bytes is a valid i64.
        write!(f, "TVMValue({:#x})", unsafe { self.v_int64 })
    }
}

/// Byte array of the PackedFunc ABI (code `kTVMBytes`); `data` may hold NUL bytes.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct TVMByteArray {
    /// The bytes.
    pub data: *const c_char,
    /// Their number.
    pub size: usize,
}

/// Group environment of a parallel launch (`c_backend_api.h`).
pub use crate::threading::{FTVMParallelLambda, TVMParallelGroupEnv};

/// Builds a slice from a C pointer and length, mapping `len == 0` to an empty slice.
///
/// # Safety
/// When `len > 0`, `ptr` points to `len` readable elements valid for `'a`.
#[inline]
pub unsafe fn slice_from_raw<'a, T>(ptr: *const T, len: usize) -> Result<&'a [T]> {
    if len == 0 {
        return Ok(&[]);
    }
    if ptr.is_null() {
        return Err(Error::value("null array pointer with a non-zero length"));
    }
    // SAFETY: the caller promises `len` readable elements at `ptr` for `'a`; it is not null.
    Ok(unsafe { std::slice::from_raw_parts(ptr, len) })
}

// Layout facts of the C ABI, checked at compile time.
const _: () = {
    use std::mem::{align_of, offset_of, size_of};
    assert!(size_of::<DLDevice>() == 8);
    assert!(size_of::<DLDataType>() == 4);
    assert!(size_of::<DLTensor>() == 48);
    assert!(offset_of!(DLTensor, device) == 8);
    assert!(offset_of!(DLTensor, ndim) == 16);
    assert!(offset_of!(DLTensor, dtype) == 20);
    assert!(offset_of!(DLTensor, shape) == 24);
    assert!(offset_of!(DLTensor, strides) == 32);
    assert!(offset_of!(DLTensor, byte_offset) == 40);
    assert!(size_of::<DLManagedTensor>() == 64);
    assert!(size_of::<TVMValue>() == 8 && align_of::<TVMValue>() == 8);
    assert!(size_of::<TVMByteArray>() == 16);
    assert!(size_of::<DLDeviceType>() == 4 && size_of::<TVMArgTypeCode>() == 4);
};
