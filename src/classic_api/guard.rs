//! The one guard around every export: panics and errors become TVM's return codes. It also
//! makes sure the library's built-ins are installed (see [`crate::init::ensure`]).

use crate::error::{set_last, set_last_error, Result};
use std::any::Any;
use std::ffi::c_int;
use std::panic::{catch_unwind, AssertUnwindSafe};

fn panic_message(payload: &(dyn Any + Send)) -> String {
    format!("InternalError: panic inside the TVM runtime: {}", crate::error::panic_payload_text(payload))
}

/// Runs `body`: 0 on success, -1 with the last error set on failure or panic, -2 when a
/// callback reported a pending frontend error (the error slot is left alone).
#[inline]
pub fn guard(body: impl FnOnce() -> Result<()>) -> c_int {
    crate::init::ensure();
    guard_hot(body)
}

/// [`guard`] without the install check, for the exports on the per-call path that cannot be a
/// program's first call into the library: `TVMFuncCall` and `TVMCFuncSetReturn` (a function
/// handle exists only through an export that checked), the parallel launch and barrier (the
/// thread pool, which needs nothing installed).
#[inline]
pub fn guard_hot(body: impl FnOnce() -> Result<()>) -> c_int {
    match catch_unwind(AssertUnwindSafe(body)) {
        Ok(Ok(())) => 0,
        Ok(Err(e)) if e.is_already_set() => -2,
        Ok(Err(e)) => {
            set_last(&e);
            -1
        }
        Err(payload) => {
            set_last_error(&panic_message(&*payload));
            -1
        }
    }
}

/// Like [`guard`] for exports that return a pointer: NULL on failure.
pub fn guard_ptr<T>(body: impl FnOnce() -> Result<*mut T>) -> *mut T {
    crate::init::ensure();
    match catch_unwind(AssertUnwindSafe(body)) {
        Ok(Ok(p)) => p,
        Ok(Err(e)) => {
            set_last(&e);
            std::ptr::null_mut()
        }
        Err(payload) => {
            set_last_error(&panic_message(&*payload));
            std::ptr::null_mut()
        }
    }
}

/// For exports without an error channel: runs `body`, swallowing a panic after recording it.
pub fn guard_void(body: impl FnOnce()) {
    crate::init::ensure();
    if let Err(payload) = catch_unwind(AssertUnwindSafe(body)) {
        set_last_error(&panic_message(&*payload));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::{last_error_message, Error};

    #[test]
    fn codes_and_messages() {
        assert_eq!(guard(|| Ok(())), 0);
        assert_eq!(guard(|| Err(Error::value("x"))), -1);
        assert_eq!(last_error_message(), "ValueError: x");
        assert_eq!(guard(|| Err(Error::already_set())), -2);
        assert_eq!(last_error_message(), "ValueError: x");
        assert_eq!(guard(|| panic!("boom")), -1);
        assert!(last_error_message().contains("boom"));
        assert!(guard_ptr::<u8>(|| Err(Error::value("y"))).is_null());
    }
}
