//! Frontend callbacks registered through `TVMBackendRegisterEnvCAPI`, and the Python objects
//! held with them.
//!
//! TVM v0.8's Python registers `PyErr_CheckSignals`; from v0.14 on it also registers
//! `Py_IncRef` and `Py_DecRef` (and from v0.15 on `PyGILState_Ensure` and
//! `PyGILState_Release`), so that the runtime can hold the exception object a Python callback
//! raised (`TVMAPISetLastPythonError`) until the Python caller takes it back
//! (`TVMGetLastPythonError` / `TVMDropLastPythonError`). A [`PyObject`] holds one reference to
//! such an object and touches its count with the GIL held (ctypes calls into this library
//! release the GIL) when the GIL functions are registered.

use crate::error::{Error, Result};
use std::ffi::{c_int, c_void};
use std::ptr::NonNull;
use std::sync::atomic::{AtomicPtr, Ordering};

static CHECK_SIGNALS: AtomicPtr<c_void> = AtomicPtr::new(std::ptr::null_mut());
static INC_REF: AtomicPtr<c_void> = AtomicPtr::new(std::ptr::null_mut());
static DEC_REF: AtomicPtr<c_void> = AtomicPtr::new(std::ptr::null_mut());
static GIL_ENSURE: AtomicPtr<c_void> = AtomicPtr::new(std::ptr::null_mut());
static GIL_RELEASE: AtomicPtr<c_void> = AtomicPtr::new(std::ptr::null_mut());

/// The names `TVMBackendRegisterEnvCAPI` knows, with their slots.
fn slot(name: &str) -> Option<&'static AtomicPtr<c_void>> {
    Some(match name {
        "PyErr_CheckSignals" => &CHECK_SIGNALS,
        "Py_IncRef" => &INC_REF,
        "Py_DecRef" => &DEC_REF,
        "PyGILState_Ensure" => &GIL_ENSURE,
        "PyGILState_Release" => &GIL_RELEASE,
        _ => return None,
    })
}

/// `TVMBackendRegisterEnvCAPI(name, ptr)`: stores a frontend function (TVM's `Unknown env API`
/// error for other names; replacing a different function warns, as TVM does).
pub fn register(name: &str, ptr: *mut c_void) -> Result<()> {
    let s = slot(name).ok_or_else(|| Error::value(format!("Unknown env API {name}")))?;
    let old = s.swap(ptr, Ordering::AcqRel);
    if !old.is_null() && old != ptr {
        eprintln!("tvm.runtime.RegisterEnvCAPI overrides an existing function {name}");
    }
    Ok(())
}

/// The GIL held for a scope (`PyGILState_Ensure` / `PyGILState_Release`).
struct Gil {
    release: unsafe extern "C" fn(c_int),
    state: c_int,
}

impl Gil {
    /// Takes the GIL, or `None` when the frontend did not register the GIL functions.
    fn ensure() -> Option<Gil> {
        let (e, r) = (GIL_ENSURE.load(Ordering::Acquire), GIL_RELEASE.load(Ordering::Acquire));
        if e.is_null() || r.is_null() {
            return None;
        }
        // SAFETY: registered by the frontend as Python's `PyGILState_STATE PyGILState_Ensure(void)`
        // and `void PyGILState_Release(PyGILState_STATE)` (an enum, passed as an int).
        let (ensure, release) = unsafe {
            (
                std::mem::transmute::<*mut c_void, unsafe extern "C" fn() -> c_int>(e),
                std::mem::transmute::<*mut c_void, unsafe extern "C" fn(c_int)>(r),
            )
        };
        // SAFETY: PyGILState_Ensure may be called from any thread, with or without the GIL.
        let state = unsafe { ensure() };
        Some(Gil { release, state })
    }
}

impl Drop for Gil {
    fn drop(&mut self) {
        // SAFETY: releases what `ensure` took, on the same thread.
        unsafe { (self.release)(self.state) };
    }
}

/// Calls `Py_IncRef` / `Py_DecRef` (whichever `slot` holds) on `obj` with the GIL held. TVM
/// v0.14's Python registers no GIL functions: then the call is made without it, as TVM v0.14
/// itself makes it.
fn with_gil_call(slot: &AtomicPtr<c_void>, obj: NonNull<c_void>) -> Result<()> {
    let f = slot.load(Ordering::Acquire);
    if f.is_null() {
        return Err(Error::tvm(
            "holding a Python object needs Py_IncRef and Py_DecRef (and, from TVM v0.15 on, PyGILState_Ensure \
             and PyGILState_Release) registered through TVMBackendRegisterEnvCAPI",
        ));
    }
    let gil = Gil::ensure();
    // SAFETY: registered by the frontend as Python's `void Py_IncRef(PyObject*)` /
    // `void Py_DecRef(PyObject*)`; the GIL is held for the call.
    let f = unsafe { std::mem::transmute::<*mut c_void, unsafe extern "C" fn(*mut c_void)>(f) };
    // SAFETY: as above; `obj` is a live Python object (the caller's promise).
    unsafe { f(obj.as_ptr()) };
    drop(gil);
    Ok(())
}

/// One counted reference to a Python object, taken and released with the GIL held.
#[derive(Debug, PartialEq, Eq)]
pub struct PyObject(NonNull<c_void>);

// SAFETY: the reference count is only touched with the GIL held, from any thread.
unsafe impl Send for PyObject {}
// SAFETY: as above; the pointer itself is never dereferenced here.
unsafe impl Sync for PyObject {}

impl PyObject {
    /// Takes a new reference to `obj`; fails (holding nothing) when `obj` is NULL or the
    /// frontend did not register the functions this needs.
    ///
    /// # Safety
    /// `obj` is a live `PyObject*` of the interpreter that registered the functions.
    pub unsafe fn retain(obj: *mut c_void) -> Result<PyObject> {
        let p = NonNull::new(obj).ok_or_else(|| Error::value("the Python object must not be NULL"))?;
        if DEC_REF.load(Ordering::Acquire).is_null() {
            return Err(Error::tvm("Py_DecRef is not registered through TVMBackendRegisterEnvCAPI"));
        }
        with_gil_call(&INC_REF, p)?;
        Ok(PyObject(p))
    }

    /// The `PyObject*` (borrowed).
    pub fn as_ptr(&self) -> *mut c_void {
        self.0.as_ptr()
    }

    /// Gives the reference up without `Py_DecRef` (for thread exit, when the interpreter may
    /// already be gone; leaking one object then is harmless).
    pub fn leak(self) {
        std::mem::forget(self);
    }
}

impl Clone for PyObject {
    fn clone(&self) -> Self {
        // `retain` checked the functions when this object was made, and they are never
        // unregistered; a failure here could only leave the clone without a reference.
        let _ = with_gil_call(&INC_REF, self.0);
        PyObject(self.0)
    }
}

impl Drop for PyObject {
    fn drop(&mut self) {
        let _ = with_gil_call(&DEC_REF, self.0);
    }
}

/// Calls the registered callback: `Err(AlreadySet)` when it reports a pending signal.
pub fn check_signals() -> Result<()> {
    let p = CHECK_SIGNALS.load(Ordering::Acquire);
    if p.is_null() {
        return Ok(());
    }
    // SAFETY: registered as an `int (*)(void)` callback by the frontend.
    let f: unsafe extern "C" fn() -> c_int = unsafe { std::mem::transmute(p) };
    // Python requires the GIL for PyErr_CheckSignals; v0.8's frontend registers no GIL
    // functions, and then the call is made as TVM v0.8 makes it.
    let gil = Gil::ensure();
    // SAFETY: as above.
    let pending = unsafe { f() } != 0;
    drop(gil);
    if pending {
        return Err(Error::already_set());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unknown_names_are_refused() {
        assert!(register("Py_Something", std::ptr::null_mut()).unwrap_err().to_string().contains("Unknown env API"));
    }
}
