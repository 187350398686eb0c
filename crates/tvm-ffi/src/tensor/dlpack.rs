//! DLPack 1.x types that the classic API (DLPack 0.5, [`tvm_runtime_classic::abi`]) lacks: the versioned
//! managed tensor and the allocator callback of `c_env_api.h`.

use std::ffi::{c_char, c_int, c_void};
use tvm_runtime_classic::abi::DLTensor;

/// `DLPACK_MAJOR_VERSION` of the headers tvm-ffi 0.1.15 ships.
pub(crate) const DLPACK_MAJOR_VERSION: u32 = 1;
/// `DLPACK_MINOR_VERSION` of the same headers.
pub(crate) const DLPACK_MINOR_VERSION: u32 = 3;
/// `DLPACK_FLAG_BITMASK_READ_ONLY`.
pub const FLAG_READ_ONLY: u64 = 1;
/// `DLPACK_FLAG_BITMASK_IS_COPIED`.
pub const FLAG_IS_COPIED: u64 = 1 << 1;
/// `DLPACK_FLAG_BITMASK_IS_SUBBYTE_TYPE_PADDED`.
pub(crate) const FLAG_IS_SUBBYTE_TYPE_PADDED: u64 = 1 << 2;

/// `DLPackVersion`.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DLPackVersion {
    /// Major version.
    pub major: u32,
    /// Minor version.
    pub minor: u32,
}

/// `DLManagedTensorVersioned`.
#[repr(C)]
#[derive(Debug)]
pub struct DLManagedTensorVersioned {
    /// The producer's DLPack version.
    pub version: DLPackVersion,
    /// The producer's context.
    pub manager_ctx: *mut c_void,
    /// Destructor: the consumer calls it exactly once, with this struct.
    pub deleter: Option<unsafe extern "C" fn(self_: *mut DLManagedTensorVersioned)>,
    /// `DLPACK_FLAG_BITMASK_*`.
    pub flags: u64,
    /// The tensor.
    pub dl_tensor: DLTensor,
}

const _: () = assert!(std::mem::size_of::<DLManagedTensorVersioned>() == 80);
const _: () = assert!(std::mem::offset_of!(DLManagedTensorVersioned, dl_tensor) == 32);

/// The error callback handed to a [`DLPackManagedTensorAllocator`].
pub(crate) type SetErrorFn = unsafe extern "C" fn(error_ctx: *mut c_void, kind: *const c_char, message: *const c_char);

/// `DLPackManagedTensorAllocator`: makes a tensor like `prototype` (its data pointer ignored).
pub type DLPackManagedTensorAllocator = unsafe extern "C" fn(
    prototype: *mut DLTensor,
    out: *mut *mut DLManagedTensorVersioned,
    error_ctx: *mut c_void,
    set_error: SetErrorFn,
) -> c_int;
