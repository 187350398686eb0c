//! The OpenCL ICD loader, opened at run time: `libOpenCL.so.1` (then
//! `libOpenCL.so`) is opened once, on the first OpenCL operation, and every entry point the
//! runtime uses is resolved then, so a missing one makes the driver unavailable with the symbol
//! named, instead of failing later. Success or failure is cached for the life of the process.
//! (`cl_int` is `i32`, `cl_uint` is `u32`.)
//! The environment variable `TVM_OPENCL_LIBRARY` names another library to open instead.

use std::ffi::{c_char, c_void};
use std::sync::OnceLock;
use tvm_runtime_classic::error::{Error, Result};

/// Opaque OpenCL object handles.
pub type Handle = *mut c_void;

/// `CL_SUCCESS`.
pub const SUCCESS: i32 = 0;
/// `CL_DEVICE_TYPE_CPU`.
pub(crate) const DEVICE_TYPE_CPU: u64 = 2;
/// `CL_DEVICE_TYPE_GPU`.
pub(crate) const DEVICE_TYPE_GPU: u64 = 4;
/// `CL_MEM_READ_WRITE`.
pub(crate) const MEM_READ_WRITE: u64 = 1;
/// `CL_PLATFORM_NAME`.
pub(crate) const PLATFORM_NAME: u32 = 0x0902;
/// `CL_PLATFORM_VERSION`.
pub(crate) const PLATFORM_VERSION: u32 = 0x0901;
/// `CL_DEVICE_MAX_COMPUTE_UNITS`.
pub(crate) const DEVICE_MAX_COMPUTE_UNITS: u32 = 0x1002;
/// `CL_DEVICE_MAX_WORK_GROUP_SIZE`.
pub(crate) const DEVICE_MAX_WORK_GROUP_SIZE: u32 = 0x1004;
/// `CL_DEVICE_MAX_WORK_ITEM_SIZES`.
pub(crate) const DEVICE_MAX_WORK_ITEM_SIZES: u32 = 0x1005;
/// `CL_DEVICE_MAX_CLOCK_FREQUENCY`.
pub(crate) const DEVICE_MAX_CLOCK_FREQUENCY: u32 = 0x100C;
/// `CL_DEVICE_LOCAL_MEM_SIZE`.
pub(crate) const DEVICE_LOCAL_MEM_SIZE: u32 = 0x1023;
/// `CL_DEVICE_NAME`.
pub(crate) const DEVICE_NAME: u32 = 0x102B;
/// `CL_DRIVER_VERSION`.
pub(crate) const DRIVER_VERSION: u32 = 0x102D;
/// `CL_DEVICE_VERSION`.
pub(crate) const DEVICE_VERSION: u32 = 0x102F;
/// `CL_PROGRAM_BUILD_LOG`.
pub(crate) const PROGRAM_BUILD_LOG: u32 = 0x1183;
/// `CL_PROGRAM_BINARY_SIZES`.
pub(crate) const PROGRAM_BINARY_SIZES: u32 = 0x1165;
/// `CL_PROGRAM_BINARIES`.
pub(crate) const PROGRAM_BINARIES: u32 = 0x1166;

pub(crate) type InfoFn = unsafe extern "system" fn(Handle, u32, usize, *mut c_void, *mut usize) -> i32;
pub(crate) type BuildNotify = Option<unsafe extern "system" fn(Handle, *mut c_void)>;

/// The entry points, resolved all at once. Field names are the C names without `cl`.
#[allow(non_snake_case, reason = "the OpenCL names")]
pub struct Driver {
    pub GetPlatformIDs: unsafe extern "system" fn(u32, *mut Handle, *mut u32) -> i32,
    pub GetPlatformInfo: InfoFn,
    pub GetDeviceIDs: unsafe extern "system" fn(Handle, u64, u32, *mut Handle, *mut u32) -> i32,
    pub GetDeviceInfo: InfoFn,
    pub CreateContext: unsafe extern "system" fn(
        *const isize,
        u32,
        *const Handle,
        Option<unsafe extern "system" fn(*const c_char, *const c_void, usize, *mut c_void)>,
        *mut c_void,
        *mut i32,
    ) -> Handle,
    pub CreateCommandQueue: unsafe extern "system" fn(Handle, Handle, u64, *mut i32) -> Handle,
    pub CreateBuffer: unsafe extern "system" fn(Handle, u64, usize, *mut c_void, *mut i32) -> Handle,
    pub ReleaseMemObject: unsafe extern "system" fn(Handle) -> i32,
    pub EnqueueReadBuffer: unsafe extern "system" fn(
        Handle,
        Handle,
        u32,
        usize,
        usize,
        *mut c_void,
        u32,
        *const Handle,
        *mut Handle,
    ) -> i32,
    pub EnqueueWriteBuffer: unsafe extern "system" fn(
        Handle,
        Handle,
        u32,
        usize,
        usize,
        *const c_void,
        u32,
        *const Handle,
        *mut Handle,
    ) -> i32,
    pub EnqueueCopyBuffer:
        unsafe extern "system" fn(Handle, Handle, Handle, usize, usize, usize, u32, *const Handle, *mut Handle) -> i32,
    pub Finish: unsafe extern "system" fn(Handle) -> i32,
    pub CreateProgramWithSource:
        unsafe extern "system" fn(Handle, u32, *const *const c_char, *const usize, *mut i32) -> Handle,
    pub CreateProgramWithBinary: unsafe extern "system" fn(
        Handle,
        u32,
        *const Handle,
        *const usize,
        *const *const u8,
        *mut i32,
        *mut i32,
    ) -> Handle,
    pub BuildProgram:
        unsafe extern "system" fn(Handle, u32, *const Handle, *const c_char, BuildNotify, *mut c_void) -> i32,
    pub GetProgramBuildInfo: unsafe extern "system" fn(Handle, Handle, u32, usize, *mut c_void, *mut usize) -> i32,
    pub GetProgramInfo: InfoFn,
    pub ReleaseProgram: unsafe extern "system" fn(Handle) -> i32,
    pub CreateKernel: unsafe extern "system" fn(Handle, *const c_char, *mut i32) -> Handle,
    pub ReleaseKernel: unsafe extern "system" fn(Handle) -> i32,
    pub SetKernelArg: unsafe extern "system" fn(Handle, u32, usize, *const c_void) -> i32,
    pub EnqueueNDRangeKernel: unsafe extern "system" fn(
        Handle,
        Handle,
        u32,
        *const usize,
        *const usize,
        *const usize,
        u32,
        *const Handle,
        *mut Handle,
    ) -> i32,
    /// Keeps the library mapped (never unloaded).
    _lib: libloading::Library,
}

/// Names tried, in order.
#[cfg(target_os = "macos")]
const LIB_NAMES: &[&str] = &["/System/Library/Frameworks/OpenCL.framework/OpenCL"];
#[cfg(windows)]
const LIB_NAMES: &[&str] = &["OpenCL.dll"];
#[cfg(not(any(target_os = "macos", windows)))]
const LIB_NAMES: &[&str] = &["libOpenCL.so.1", "libOpenCL.so"];

impl Driver {
    fn open() -> std::result::Result<Driver, String> {
        let custom = std::env::var("TVM_OPENCL_LIBRARY").ok().filter(|s| !s.is_empty());
        let names: Vec<&str> = match &custom {
            Some(path) => vec![path.as_str()],
            None => LIB_NAMES.to_vec(),
        };
        let lib = tvm_runtime_classic::device::open_first_library(&names)
            .map_err(|errors| format!("{} could not be loaded: {errors}", names[0]))?;
        macro_rules! sym {
            ($name:literal) => {
                // SAFETY: the field's type is the C prototype of this OpenCL 1.2 entry point.
                *unsafe { lib.get(concat!($name, "\0").as_bytes()) }.map_err(|e| {
                    format!("the OpenCL library lacks {}: {}", $name, tvm_runtime_classic::error::source_chain(&e))
                })?
            };
        }
        Ok(Driver {
            GetPlatformIDs: sym!("clGetPlatformIDs"),
            GetPlatformInfo: sym!("clGetPlatformInfo"),
            GetDeviceIDs: sym!("clGetDeviceIDs"),
            GetDeviceInfo: sym!("clGetDeviceInfo"),
            CreateContext: sym!("clCreateContext"),
            CreateCommandQueue: sym!("clCreateCommandQueue"),
            CreateBuffer: sym!("clCreateBuffer"),
            ReleaseMemObject: sym!("clReleaseMemObject"),
            EnqueueReadBuffer: sym!("clEnqueueReadBuffer"),
            EnqueueWriteBuffer: sym!("clEnqueueWriteBuffer"),
            EnqueueCopyBuffer: sym!("clEnqueueCopyBuffer"),
            Finish: sym!("clFinish"),
            CreateProgramWithSource: sym!("clCreateProgramWithSource"),
            CreateProgramWithBinary: sym!("clCreateProgramWithBinary"),
            BuildProgram: sym!("clBuildProgram"),
            GetProgramBuildInfo: sym!("clGetProgramBuildInfo"),
            GetProgramInfo: sym!("clGetProgramInfo"),
            ReleaseProgram: sym!("clReleaseProgram"),
            CreateKernel: sym!("clCreateKernel"),
            ReleaseKernel: sym!("clReleaseKernel"),
            SetKernelArg: sym!("clSetKernelArg"),
            EnqueueNDRangeKernel: sym!("clEnqueueNDRangeKernel"),
            _lib: lib,
        })
    }
}

static DRIVER: OnceLock<std::result::Result<Driver, String>> = OnceLock::new();

/// The driver, opened on first use; `Err` says why it is unavailable (cached).
pub fn driver() -> std::result::Result<&'static Driver, &'static str> {
    match DRIVER.get_or_init(Driver::open) {
        Ok(d) => Ok(d),
        Err(e) => Err(e.as_str()),
    }
}

/// The name of an OpenCL error code (informative only).
pub fn error_name(code: i32) -> &'static str {
    const NAMES_0: [&str; 13] = [
        "CL_SUCCESS",
        "CL_DEVICE_NOT_FOUND",
        "CL_DEVICE_NOT_AVAILABLE",
        "CL_COMPILER_NOT_AVAILABLE",
        "CL_MEM_OBJECT_ALLOCATION_FAILURE",
        "CL_OUT_OF_RESOURCES",
        "CL_OUT_OF_HOST_MEMORY",
        "CL_PROFILING_INFO_NOT_AVAILABLE",
        "CL_MEM_COPY_OVERLAP",
        "CL_IMAGE_FORMAT_MISMATCH",
        "CL_IMAGE_FORMAT_NOT_SUPPORTED",
        "CL_BUILD_PROGRAM_FAILURE",
        "CL_MAP_FAILURE",
    ];
    const NAMES_30: [&str; 34] = [
        "CL_INVALID_VALUE",
        "CL_INVALID_DEVICE_TYPE",
        "CL_INVALID_PLATFORM",
        "CL_INVALID_DEVICE",
        "CL_INVALID_CONTEXT",
        "CL_INVALID_QUEUE_PROPERTIES",
        "CL_INVALID_COMMAND_QUEUE",
        "CL_INVALID_HOST_PTR",
        "CL_INVALID_MEM_OBJECT",
        "CL_INVALID_IMAGE_FORMAT_DESCRIPTOR",
        "CL_INVALID_IMAGE_SIZE",
        "CL_INVALID_SAMPLER",
        "CL_INVALID_BINARY",
        "CL_INVALID_BUILD_OPTIONS",
        "CL_INVALID_PROGRAM",
        "CL_INVALID_PROGRAM_EXECUTABLE",
        "CL_INVALID_KERNEL_NAME",
        "CL_INVALID_KERNEL_DEFINITION",
        "CL_INVALID_KERNEL",
        "CL_INVALID_ARG_INDEX",
        "CL_INVALID_ARG_VALUE",
        "CL_INVALID_ARG_SIZE",
        "CL_INVALID_KERNEL_ARGS",
        "CL_INVALID_WORK_DIMENSION",
        "CL_INVALID_WORK_GROUP_SIZE",
        "CL_INVALID_WORK_ITEM_SIZE",
        "CL_INVALID_GLOBAL_OFFSET",
        "CL_INVALID_EVENT_WAIT_LIST",
        "CL_INVALID_EVENT",
        "CL_INVALID_OPERATION",
        "CL_INVALID_GL_OBJECT",
        "CL_INVALID_BUFFER_SIZE",
        "CL_INVALID_MIP_LEVEL",
        "CL_INVALID_GLOBAL_WORK_SIZE",
    ];
    match code {
        c if (-12..=0).contains(&c) => NAMES_0[(-c) as usize],
        c if (-63..=-30).contains(&c) => NAMES_30[(-30 - c) as usize],
        -1001 => "CL_PLATFORM_NOT_FOUND_KHR",
        _ => "Unknown OpenCL error code",
    }
}

/// `OpenCL Error, code=<n>: <NAME>` for a failed call.
pub fn check(code: i32) -> Result<()> {
    if code == SUCCESS {
        Ok(())
    } else {
        Err(Error::tvm(format!("OpenCL Error, code={code}: {}", error_name(code))))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn error_names() {
        assert_eq!(error_name(-54), "CL_INVALID_WORK_GROUP_SIZE");
        assert_eq!(error_name(-1), "CL_DEVICE_NOT_FOUND");
        assert_eq!(error_name(-11), "CL_BUILD_PROGRAM_FAILURE");
        assert_eq!(error_name(-46), "CL_INVALID_KERNEL_NAME");
        assert_eq!(error_name(-62), "CL_INVALID_MIP_LEVEL");
        assert_eq!(error_name(-1001), "CL_PLATFORM_NOT_FOUND_KHR");
        assert_eq!(error_name(-15), "Unknown OpenCL error code");
        assert_eq!(error_name(-70), "Unknown OpenCL error code");
        assert_eq!(check(-54).unwrap_err().to_string(), "TVMError: OpenCL Error, code=-54: CL_INVALID_WORK_GROUP_SIZE");
        assert!(check(0).is_ok());
    }
}
