//! The error functions that TVM's C API gained after v0.8 (v0.14 for the Python ones), which
//! the Python packages of v0.14..v0.19 call on every failure.
//!
//! A Python callback that raises hands its exception object to `TVMAPISetLastPythonError`
//! and returns -1; the object then travels with the error ([`crate::error::Repr::Python`])
//! through every frame of this runtime back to the outermost call, whose Python caller takes it
//! with `TVMGetLastPythonError` and re-raises it unchanged (same class, same traceback), then
//! lets go of it with `TVMDropLastPythonError`.

use super::guard::guard_void;
use crate::backend_env::PyObject;
use crate::error;
use std::ffi::{c_char, c_void};

/// Sets this thread's last error to a Python exception object (TVM v0.14+). The runtime
/// takes a reference with the `Py_IncRef` and GIL functions registered through
/// `TVMBackendRegisterEnvCAPI`; without them (or for NULL) the last error becomes a message
/// saying so instead.
/// # Ownership
/// `py_object`: borrowed; the runtime keeps its own reference until the error is replaced or
/// dropped.
/// # Safety
/// `py_object` is NULL or a live `PyObject*` of the interpreter that registered the functions.
#[no_mangle]
pub unsafe extern "C" fn TVMAPISetLastPythonError(py_object: *mut c_void) {
    guard_void(|| {
        // SAFETY: per contract.
        match unsafe { PyObject::retain(py_object) } {
            Ok(obj) => error::set_last_python_error(obj),
            Err(e) => error::set_last(&e.context("TVMAPISetLastPythonError")),
        }
    })
}

/// The Python exception object of this thread's last error, or NULL when the last error is not
/// one (TVM v0.14+).
/// # Ownership
/// Borrowed: valid until the last error changes on this thread or `TVMDropLastPythonError`.
#[no_mangle]
pub extern "C" fn TVMGetLastPythonError() -> *mut c_void {
    error::last_python_error_ptr()
}

/// Lets go of the Python exception of this thread's last error, if any (its message becomes
/// ""), so the exception's frames can be collected (TVM v0.14+).
#[no_mangle]
pub extern "C" fn TVMDropLastPythonError() {
    guard_void(error::drop_last_python_error)
}

/// The backtrace of the last error (TVM v0.14+): always NULL, this runtime records none (TVM
/// returns NULL too when an error carries no backtrace).
#[no_mangle]
pub extern "C" fn TVMGetLastBacktrace() -> *const c_char {
    std::ptr::null()
}

/// TVM v0.14+ re-throws the last error as a C++ exception here. This runtime is not C++ and
/// cannot unwind its caller's frames: the call keeps the last error as it is and returns, so a
/// C++ caller must read `TVMGetLastError` / `TVMGetLastPythonError` and throw itself.
#[no_mangle]
pub extern "C" fn TVMThrowLastError() {}
