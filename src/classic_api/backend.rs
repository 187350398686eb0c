//! The backend API of `c_backend_api.h`: what compiled kernels call back into.

use super::guard::{guard, guard_hot, guard_ptr};
use super::handle::{self, cstr, out};
use super::runtime_api::TVMFunctionHandle;
use crate::abi::DLDevice;
use crate::module::{self, system_lib};
use crate::object::ObjectRef;
use crate::threading::{self, FTVMParallelLambda, TVMParallelGroupEnv};
use crate::value::dtype::dtype;
use crate::{backend_env, device};
use std::ffi::{c_char, c_int, c_void};

/// Signature of every function in a compiled model library.
pub type TVMBackendPackedCFunc = Option<
    unsafe extern "C" fn(
        args: *mut crate::abi::TVMValue,
        type_codes: *mut c_int,
        num_args: c_int,
        out_ret_value: *mut crate::abi::TVMValue,
        out_ret_tcode: *mut c_int,
        resource_handle: *mut c_void,
    ) -> c_int,
>;

/// Looks a function up for generated code: the imports of the module in `mod_node` (the value
/// of the library's `__tvm_module_ctx`), then the global registry.
/// # Ownership
/// `*out`: borrowed; valid while the module lives (registry entries: forever). Never free it.
/// # Safety
/// `mod_node` is NULL or a live module handle; `func_name` is NUL-terminated; `out` writable.
#[no_mangle]
pub unsafe extern "C" fn TVMBackendGetFuncFromEnv(
    mod_node: *mut c_void,
    func_name: *const c_char,
    out: *mut TVMFunctionHandle,
) -> c_int {
    guard(|| {
        // SAFETY: per contract.
        let name = unsafe { cstr(func_name, "func_name")? };
        // SAFETY: per contract.
        let slot = unsafe { handle::out(out, "out")? };
        // SAFETY: per contract: NULL or a live module handle.
        let m = unsafe { ObjectRef::from_borrowed(handle::object_ptr(mod_node)) }.and_then(module::Module::from_object);
        slot.write(module::env_lookup(m.as_ref(), name)?);
        Ok(())
    })
}

/// Records a symbol of a `--system-lib` object for `runtime.SystemLib`. Always 0.
/// # Safety
/// `name` is NUL-terminated.
#[no_mangle]
pub unsafe extern "C" fn TVMBackendRegisterSystemLibSymbol(name: *const c_char, ptr: *mut c_void) -> c_int {
    guard(|| {
        // SAFETY: per contract.
        system_lib::register_symbol(unsafe { cstr(name, "name")? }, ptr);
        Ok(())
    })
}

/// A temporary buffer for generated code, 128-byte aligned; NULL (with the last error set) on
/// failure.
/// # Ownership
/// Owned by caller: free with `TVMBackendFreeWorkspace` on the same thread and device.
#[no_mangle]
pub extern "C" fn TVMBackendAllocWorkspace(
    device_type: c_int,
    device_id: c_int,
    nbytes: u64,
    dtype_code_hint: c_int,
    dtype_bits_hint: c_int,
) -> *mut c_void {
    guard_ptr(|| {
        let dev = DLDevice { device_type, device_id };
        let hint = dtype(dtype_code_hint as u8, dtype_bits_hint as u8, 1);
        device::api(device_type)?.alloc_workspace(dev, nbytes, hint)
    })
}

/// Returns a workspace buffer (NULL is a no-op); -1 for a pointer this thread did not allocate.
/// # Safety
/// `ptr` is NULL or came from `TVMBackendAllocWorkspace` on this thread and device.
#[no_mangle]
pub unsafe extern "C" fn TVMBackendFreeWorkspace(device_type: c_int, device_id: c_int, ptr: *mut c_void) -> c_int {
    guard(|| {
        if ptr.is_null() {
            return Ok(());
        }
        device::api(device_type)?.free_workspace(DLDevice { device_type, device_id }, ptr)
    })
}

/// Registers a frontend function: `PyErr_CheckSignals` (TVM v0.8), and `Py_IncRef`,
/// `Py_DecRef`, `PyGILState_Ensure`, `PyGILState_Release` (TVM v0.14+, for holding Python
/// exceptions).
/// # Safety
/// `name` is NUL-terminated; `ptr` is the named Python C-API function.
#[no_mangle]
pub unsafe extern "C" fn TVMBackendRegisterEnvCAPI(name: *const c_char, ptr: *mut c_void) -> c_int {
    guard(|| {
        // SAFETY: per contract.
        let name = unsafe { cstr(name, "name")? };
        backend_env::register(name, ptr)
    })
}

/// Runs `flambda(task_id, env, cdata)` for every task and waits for all of them; num_task 0
/// means the pool's size. Non-zero when a task failed (the last error lists each failure).
/// # Safety
/// `flambda` is a valid task function; `cdata` is what it expects.
#[no_mangle]
pub unsafe extern "C" fn TVMBackendParallelLaunch(
    flambda: FTVMParallelLambda,
    cdata: *mut c_void,
    num_task: c_int,
) -> c_int {
    guard_hot(|| threading::parallel_launch(Some(flambda), cdata, num_task))
}

/// Waits until every task of the current launch has reached this barrier.
/// # Safety
/// Called from a task with the `penv` it received.
#[no_mangle]
pub unsafe extern "C" fn TVMBackendParallelBarrier(task_id: c_int, penv: *mut TVMParallelGroupEnv) -> c_int {
    guard_hot(|| threading::parallel_barrier(task_id, penv))
}

/// Calls `f(cdata)` only the first time (`*handle` NULL), race-free.
/// # Safety
/// `handle` points to a pointer-sized variable that lives as long as the program uses it.
#[no_mangle]
pub unsafe extern "C" fn TVMBackendRunOnce(
    handle: *mut *mut c_void,
    f: Option<unsafe extern "C" fn(*mut c_void) -> c_int>,
    cdata: *mut c_void,
    nbytes: c_int,
) -> c_int {
    guard(|| {
        // SAFETY: per contract (only checked for NULL here; the pool does the atomic work).
        let _ = unsafe { out(handle, "handle")? };
        threading::run_once(handle, f, cdata, nbytes)
    })
}
