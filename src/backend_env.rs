//! Frontend callbacks registered through `TVMBackendRegisterEnvCAPI`.

use std::ffi::{c_int, c_void};
use std::sync::atomic::{AtomicPtr, Ordering};

static CHECK_SIGNALS: AtomicPtr<c_void> = AtomicPtr::new(std::ptr::null_mut());

/// Stores the `PyErr_CheckSignals` callback.
pub fn set_check_signals(ptr: *mut c_void) {
    let old = CHECK_SIGNALS.swap(ptr, Ordering::AcqRel);
    if !old.is_null() && old != ptr {
        eprintln!("tvm.runtime.RegisterEnvCAPI overrides an existing function PyErr_CheckSignals");
    }
}

/// Calls the registered callback: `Err(AlreadySet)` when it reports a pending signal.
pub fn check_signals() -> crate::error::Result<()> {
    let p = CHECK_SIGNALS.load(Ordering::Acquire);
    if p.is_null() {
        return Ok(());
    }
    // SAFETY: registered as an `int (*)(void)` callback by the frontend.
    let f: unsafe extern "C" fn() -> c_int = unsafe { std::mem::transmute(p) };
    // SAFETY: as above.
    if unsafe { f() } != 0 {
        return Err(crate::error::Error::already_set());
    }
    Ok(())
}
