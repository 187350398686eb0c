//! The CUDA driver (`libcuda.so.1`), opened at run time through cudarc's bindings with dynamic
//! loading. The first CUDA operation checks that the library loads and
//! that every entry point this runtime calls is there (cudarc would otherwise panic at the first
//! call of a missing one), then calls `cuInit(0)`. The outcome, success or the reason for
//! failure, is kept for the life of the process.
//!
//! `TVM_CUDA_LIBRARY=<path>` names the driver to use instead (another driver build, or the
//! simulated driver of `tools/cudasim`). cudarc opens its driver by a list of names only, so
//! the named file is loaded first: the dynamic loader then hands it to cudarc when cudarc asks
//! for `libcuda.so.1`, the driver's soname (which the file must have, as drivers and cudasim
//! do). If cudarc ends up with another library (one found under an earlier name of its list),
//! the first CUDA operation fails and says so: never a silent switch of drivers.

pub use cudarc::driver::sys;
use std::ffi::{c_char, CStr};
use std::sync::OnceLock;
use tvm_runtime_classic::error::{Error, Result};

pub use sys::{CUcontext, CUdevice, CUdeviceptr, CUevent, CUfunction, CUmodule, CUresult, CUstream};

/// Every driver entry point the runtime calls (the `_v2` names where they exist).
pub(crate) const REQUIRED: &[&str] = &[
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
    "cuModuleLoadDataEx",
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

/// The library named by `TVM_CUDA_LIBRARY`, kept loaded for the life of the process.
static NAMED: OnceLock<libloading::Library> = OnceLock::new();

/// Loads the driver `TVM_CUDA_LIBRARY` names, globally, so that cudarc finds it by its soname.
fn load_named(path: &str) -> std::result::Result<&'static libloading::Library, String> {
    use libloading::os::unix::{Library, RTLD_GLOBAL, RTLD_NOW};
    // SAFETY: loading a driver library runs its initialisers, which have no preconditions.
    let lib = unsafe { Library::open(Some(path), RTLD_NOW | RTLD_GLOBAL) }.map_err(|e| {
        format!(
            "CUDA driver library {path} (TVM_CUDA_LIBRARY) could not be loaded ({})",
            tvm_runtime_classic::error::source_chain(&e)
        )
    })?;
    Ok(NAMED.get_or_init(|| lib.into()))
}

/// The address of `name` in `lib`.
fn address(lib: &libloading::Library, name: &[u8]) -> Option<usize> {
    // SAFETY: only the symbol's address is read; nothing is called.
    unsafe { lib.get::<*const ()>(name) }.ok().map(|s| *s as usize)
}

fn open() -> std::result::Result<(), String> {
    let named = match std::env::var("TVM_CUDA_LIBRARY").ok().filter(|s| !s.is_empty()) {
        Some(path) => {
            let lib = load_named(&path)?;
            // SAFETY: only tries to open cudarc's candidate names.
            if !unsafe { sys::is_culib_present() } {
                return Err(format!(
                    "TVM_CUDA_LIBRARY={path} is loaded, but not under any name cudarc opens (its soname must be libcuda.so.1)"
                ));
            }
            Some((path, lib))
        }
        None => {
            // Our own attempt first: it gives the loader's message, and it spares cudarc's
            // loader, which panics when nothing is found.
            if let Err(errors) = tvm_runtime_classic::device::open_first_library(LIB_NAMES) {
                // SAFETY: only tries to open cudarc's candidate names.
                if !unsafe { sys::is_culib_present() } {
                    return Err(format!("CUDA driver library could not be loaded ({errors})"));
                }
            }
            None
        }
    };
    // SAFETY: the library is present (checked above), so cudarc's loader does not panic.
    let lib = unsafe { sys::culib() };
    if let Some((path, named)) = named {
        if address(named, b"cuInit\0") != address(lib, b"cuInit\0") {
            return Err(format!(
                "TVM_CUDA_LIBRARY={path} is loaded, but cudarc opened another CUDA driver (found under a name it tries first, such as libcuda.so)"
            ));
        }
    }
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
pub(crate) fn is_ready() -> bool {
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
pub(crate) fn error_string(r: CUresult) -> String {
    let mut p: *const c_char = std::ptr::null();
    // SAFETY: the driver library is loaded whenever a CUresult exists (cuInit included); `p`
    // is an out-pointer to a static string.
    if unsafe { sys::cuGetErrorString(r, &mut p) } == CUresult::CUDA_SUCCESS && !p.is_null() {
        // SAFETY: a static NUL-terminated string.
        return unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned();
    }
    format!("CUresult {}", r as i32)
}

/// Runtime-style check: `CUDA: <error string>`, with [`sticky_note`].
pub fn check(r: CUresult) -> Result<()> {
    if r == CUresult::CUDA_SUCCESS {
        Ok(())
    } else {
        Err(Error::tvm(format!("CUDA: {}{}", error_string(r), sticky_note(r))))
    }
}

/// For the errors a faulting kernel leaves behind (sticky: the context cannot be used
/// again), a note saying so, naming the last kernel this thread launched and its device;
/// otherwise empty.
pub(crate) fn sticky_note(r: CUresult) -> String {
    use CUresult::*;
    let sticky = matches!(
        r,
        CUDA_ERROR_ILLEGAL_ADDRESS
            | CUDA_ERROR_LAUNCH_FAILED
            | CUDA_ERROR_ILLEGAL_INSTRUCTION
            | CUDA_ERROR_MISALIGNED_ADDRESS
            | CUDA_ERROR_INVALID_ADDRESS_SPACE
            | CUDA_ERROR_INVALID_PC
            | CUDA_ERROR_HARDWARE_STACK_ERROR
            | CUDA_ERROR_ASSERT
            | CUDA_ERROR_LAUNCH_TIMEOUT
    );
    if !sticky {
        return String::new();
    }
    let last = match super::module::last_kernel() {
        Some((k, d)) => format!("; the last kernel this thread launched: {k} on cuda({d})"),
        None => String::new(),
    };
    format!(
        " [{}: a kernel fault, which poisons the CUDA context: every later CUDA call of this process fails{last}]",
        error_name(r)
    )
}

/// [`check`] with what was asked: `CUDA: <error string> (<what>: <name>)`, e.g. the size and
/// device of an allocation the driver refused.
pub(crate) fn check_with(r: CUresult, what: impl FnOnce() -> String) -> Result<()> {
    if r == CUresult::CUDA_SUCCESS {
        Ok(())
    } else {
        Err(Error::tvm(format!("CUDA: {} ({}: {}){}", error_string(r), what(), error_name(r), sticky_note(r))))
    }
}

/// Driver-call check: `CUDAError: <call> failed with error: <name>`.
pub(crate) fn check_call(r: CUresult, call: &str) -> Result<()> {
    if r == CUresult::CUDA_SUCCESS {
        Ok(())
    } else {
        Err(Error::with_kind("CUDAError", format!("{call} failed with error: {}{}", error_name(r), sticky_note(r))))
    }
}

/// Whether a result is `CUDA_ERROR_DEINITIALIZED` (ignored in teardown paths).
pub(crate) fn is_deinitialized(r: CUresult) -> bool {
    r == CUresult::CUDA_ERROR_DEINITIALIZED
}

#[cfg(test)]
mod tests {
    use super::REQUIRED;

    /// Every driver entry point the CUDA code calls through cudarc is checked up front (cudarc
    /// resolves each one lazily, at its first call, and panics when it is missing).
    #[test]
    fn every_entry_point_called_is_required() {
        let sources = [include_str!("api.rs"), include_str!("module.rs"), include_str!("driver.rs")];
        let mut called = std::collections::BTreeSet::new();
        for src in sources {
            for (i, _) in src.match_indices("sys::cu") {
                let name: String =
                    src[i + 5..].chars().take_while(|c| c.is_ascii_alphanumeric() || *c == '_').collect();
                // Calls only: the name is followed by its argument list.
                if src[i + 5 + name.len()..].starts_with('(') {
                    called.insert(name);
                }
            }
        }
        // cudarc's loader functions, not driver entry points.
        called.remove("culib");
        assert!(called.len() > 20, "{called:?}");
        for name in &called {
            assert!(REQUIRED.contains(&name.as_str()), "{name} is called but not in REQUIRED");
        }
    }
}
