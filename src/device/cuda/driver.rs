//! The CUDA driver (`libcuda.so.1`), opened at run time through cudarc's bindings with dynamic
//! loading (devices.md §7.8, §9.2). The first CUDA operation checks that the library loads and
//! that every entry point this runtime calls is there (cudarc would otherwise panic at the first
//! call of a missing one), then calls `cuInit(0)`. The outcome, success or the reason for
//! failure, is kept for the life of the process.

use crate::error::{Error, Result};
pub use cudarc::driver::sys;
use std::ffi::{c_char, CStr};
use std::sync::OnceLock;

pub use sys::{CUcontext, CUdevice, CUdeviceptr, CUevent, CUfunction, CUmodule, CUresult, CUstream};

/// Every driver entry point the runtime calls (the `_v2` names where they exist).
pub const REQUIRED: &[&str] = &[
    "cuInit",
    "cuDriverGetVersion",
    "cuDeviceGetCount",
    "cuDeviceGet",
    "cuDeviceGetAttribute",
    "cuDeviceGetName",
    "cuGetErrorName",
    "cuGetErrorString",
    "cuDevicePrimaryCtxRetain",
    "cuCtxSetCurrent",
    "cuMemAlloc_v2",
    "cuMemFree_v2",
    "cuMemAllocHost_v2",
    "cuMemFreeHost",
    "cuMemGetInfo_v2",
    "cuMemsetD32_v2",
    "cuMemcpyHtoD_v2",
    "cuMemcpyDtoH_v2",
    "cuMemcpyDtoD_v2",
    "cuMemcpyHtoDAsync_v2",
    "cuMemcpyDtoHAsync_v2",
    "cuMemcpyDtoDAsync_v2",
    "cuMemcpyPeerAsync",
    "cuStreamCreate",
    "cuStreamDestroy_v2",
    "cuStreamSynchronize",
    "cuStreamWaitEvent",
    "cuEventCreate",
    "cuEventRecord",
    "cuEventDestroy_v2",
    "cuModuleLoadData",
    "cuModuleGetFunction",
    "cuModuleGetGlobal_v2",
    "cuModuleUnload",
    "cuLaunchKernel",
];

/// Names of the driver library, tried in order (for the error message; cudarc searches the
/// same names and more).
#[cfg(windows)]
const LIB_NAMES: &[&str] = &["nvcuda.dll"];
#[cfg(not(windows))]
const LIB_NAMES: &[&str] = &["libcuda.so.1", "libcuda.so"];

static STATE: OnceLock<std::result::Result<(), String>> = OnceLock::new();

fn open() -> std::result::Result<(), String> {
    // Our own attempt first: it gives the loader's message, and it spares cudarc's loader,
    // which panics when nothing is found.
    if let Err(errors) = crate::device::open_first_library(LIB_NAMES) {
        // SAFETY: only tries to open cudarc's candidate names.
        if !unsafe { sys::is_culib_present() } {
            return Err(format!("CUDA driver library could not be loaded ({errors})"));
        }
    }
    // SAFETY: the library is present (checked above), so cudarc's loader does not panic.
    let lib = unsafe { sys::culib() };
    for name in REQUIRED {
        let mut sym = name.as_bytes().to_vec();
        sym.push(0);
        // SAFETY: only the symbol's presence is checked; it is not called here.
        if unsafe { lib.get::<*const ()>(sym.as_slice()) }.is_err() {
            return Err(format!("the CUDA driver library lacks {name} (driver too old?)"));
        }
    }
    // SAFETY: every entry point is present; flags must be 0.
    let r = unsafe { sys::cuInit(0) };
    if r != CUresult::CUDA_SUCCESS {
        return Err(error_string(r));
    }
    Ok(())
}

/// The driver, ready; or `CUDA: <reason>`.
pub fn ready() -> Result<()> {
    match STATE.get_or_init(open) {
        Ok(()) => Ok(()),
        Err(why) => Err(Error::tvm(format!("CUDA: {why}"))),
    }
}

/// Whether the driver is ready (opens it on first use; never an error).
pub fn is_ready() -> bool {
    ready().is_ok()
}

/// `cuGetErrorName`, or `CUresult <n>` when the driver does not know the code.
pub fn error_name(r: CUresult) -> String {
    let mut p: *const c_char = std::ptr::null();
    // SAFETY: only called once the driver is loaded (a CUresult came from it); `p` is an
    // out-pointer to a static string.
    if is_ready() && unsafe { sys::cuGetErrorName(r, &mut p) } == CUresult::CUDA_SUCCESS && !p.is_null() {
        // SAFETY: the driver returns a static NUL-terminated string.
        return unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned();
    }
    format!("CUresult {}", r as i32)
}

/// `cuGetErrorString`, or the name.
pub fn error_string(r: CUresult) -> String {
    let mut p: *const c_char = std::ptr::null();
    // SAFETY: the driver library is loaded whenever a CUresult exists (cuInit included); `p`
    // is an out-pointer to a static string.
    if unsafe { sys::cuGetErrorString(r, &mut p) } == CUresult::CUDA_SUCCESS && !p.is_null() {
        // SAFETY: a static NUL-terminated string.
        return unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned();
    }
    format!("CUresult {}", r as i32)
}

/// Runtime-style check: `CUDA: <error string>` (devices.md 7.7).
pub fn check(r: CUresult) -> Result<()> {
    if r == CUresult::CUDA_SUCCESS {
        Ok(())
    } else {
        Err(Error::tvm(format!("CUDA: {}", error_string(r))))
    }
}

/// Driver-call check: `CUDAError: <call> failed with error: <name>`.
pub fn check_call(r: CUresult, call: &str) -> Result<()> {
    if r == CUresult::CUDA_SUCCESS {
        Ok(())
    } else {
        Err(Error::with_kind("CUDAError", format!("{call} failed with error: {}", error_name(r))))
    }
}

/// Whether a result is `CUDA_ERROR_DEINITIALIZED` (ignored in teardown paths).
pub fn is_deinitialized(r: CUresult) -> bool {
    r == CUresult::CUDA_ERROR_DEINITIALIZED
}
