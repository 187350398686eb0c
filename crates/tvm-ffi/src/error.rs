//! Errors: the `ffi.Error` object (header, `TVMFFIErrorCell`, then its own storage), the error
//! type of the Rust core, and the per-thread "raised" slot of `TVMFFIErrorSetRaised` /
//! `TVMFFIErrorMoveFromRaised`.

use super::object::{make_object, ObjectRef};
use super::{ti, TVMFFIByteArray};
use std::borrow::Cow;
use std::cell::RefCell;
use std::ffi::c_void;
use tvm_runtime_classic::error::Error;

/// The result type of the tvm-ffi core.
pub type FfiResult<T> = Result<T, FfiError>;

/// An error of the tvm-ffi object model: the core's error (a kind and a message, or the marker
/// that a frontend signal is pending, `-2`), or an `ffi.Error` object that travels unchanged
/// (raised by a callee, keeping its backtrace, cause and context).
#[derive(Debug, Clone)]
pub struct FfiError(Box<Repr>);

#[derive(Debug, Clone)]
enum Repr {
    Core(Error),
    Object(ObjectRef),
}

/// What tvm-ffi calls the pending-signal marker.
const ENV_SIGNAL_KIND: &str = "EnvErrorAlreadySet";

impl FfiError {
    /// An error of `kind` (`ValueError`, `TypeError`, ...).
    #[cold]
    pub fn new(kind: impl Into<Cow<'static, str>>, msg: impl Into<String>) -> Self {
        FfiError(Box::new(Repr::Core(Error::new(kind, msg))))
    }
    /// `ValueError`.
    #[cold]
    pub fn value(msg: impl Into<String>) -> Self {
        Self::new("ValueError", msg)
    }
    /// `TypeError`.
    #[cold]
    pub fn type_error(msg: impl Into<String>) -> Self {
        Self::new("TypeError", msg)
    }
    /// `RuntimeError`.
    #[cold]
    pub fn runtime(msg: impl Into<String>) -> Self {
        Self::new("RuntimeError", msg)
    }
    /// `IndexError`.
    #[cold]
    pub fn index(msg: impl Into<String>) -> Self {
        Self::new("IndexError", msg)
    }
    /// `KeyError`.
    #[cold]
    pub fn key(msg: impl Into<String>) -> Self {
        Self::new("KeyError", msg)
    }
    /// `AttributeError`.
    #[cold]
    pub fn attribute(msg: impl Into<String>) -> Self {
        Self::new("AttributeError", msg)
    }
    /// A frontend signal is pending (the callee returned -2): the core's marker.
    pub(crate) fn env_signal() -> Self {
        FfiError(Box::new(Repr::Core(Error::already_set())))
    }
    /// Whether this is the pending-signal marker.
    pub(crate) fn is_env_signal(&self) -> bool {
        matches!(&*self.0, Repr::Core(e) if e.is_already_set())
    }
    /// Wraps an `ffi.Error` object.
    pub fn from_object(o: ObjectRef) -> Self {
        FfiError(Box::new(Repr::Object(o)))
    }
    /// The error a callee raised on this thread (after it returned non-zero).
    pub fn take_raised(code: i32) -> Self {
        if code == -2 {
            return Self::env_signal();
        }
        match take_raised() {
            Some(o) => Self::from_object(o),
            None => Self::runtime(format!("a function returned {code} without raising an error")),
        }
    }
    /// The kind.
    pub fn kind(&self) -> String {
        match &*self.0 {
            Repr::Core(e) if e.is_already_set() => ENV_SIGNAL_KIND.into(),
            Repr::Core(e) => e.kind().to_owned(),
            Repr::Object(o) => String::from_utf8_lossy(cell_bytes(o, |c| c.kind)).into_owned(),
        }
    }
    /// The message.
    pub fn message(&self) -> String {
        match &*self.0 {
            Repr::Core(e) if e.is_already_set() => String::new(),
            Repr::Core(e) => e.message().to_owned(),
            Repr::Object(o) => String::from_utf8_lossy(cell_bytes(o, |c| c.message)).into_owned(),
        }
    }
    /// The error as an `ffi.Error` object.
    pub fn into_object(self) -> ObjectRef {
        match *self.0 {
            Repr::Core(e) if e.is_already_set() => make_error(ENV_SIGNAL_KIND, "", "", None, None),
            Repr::Core(e) => make_error(e.kind(), e.message(), "", None, None),
            Repr::Object(o) => o,
        }
    }
    /// Raises it on this thread; the return code to report (-1, or -2 for a pending signal).
    pub fn raise(self) -> i32 {
        if self.is_env_signal() {
            return -2;
        }
        set_raised(Some(self.into_object()));
        -1
    }
}

impl std::fmt::Display for FfiError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.kind(), self.message())
    }
}

/// A core error is a tvm-ffi error as it is, its kind and message kept apart; but the classic
/// API's "a frontend error is pending" (its `-2`) is not tvm-ffi's pending signal: it crosses as
/// a `TVMError` saying so, as it always has.
impl From<Error> for FfiError {
    fn from(e: Error) -> Self {
        if e.is_already_set() {
            return FfiError::new("TVMError", e.message().to_owned());
        }
        FfiError(Box::new(Repr::Core(e)))
    }
}

/// `TVMFFIErrorCell`.
#[repr(C)]
pub(crate) struct TVMFFIErrorCell {
    /// Kind.
    pub kind: TVMFFIByteArray,
    /// Message.
    pub message: TVMFFIByteArray,
    /// Backtrace.
    pub backtrace: TVMFFIByteArray,
    /// Replaces or extends the backtrace.
    pub update_backtrace: unsafe extern "C" fn(obj: *mut c_void, bt: *const TVMFFIByteArray, mode: i32),
    /// The cause (an `ffi.Error`) or null.
    pub cause_chain: *mut c_void,
    /// Extra context (an object) or null.
    pub extra_context: *mut c_void,
}

/// Replaces the `extra_context` of an `ffi.Error` object (made here or in C++: the cell follows
/// the header either way), handing back the old one; what tvm-ffi's `UpdateVisitErrorContext`
/// does in place.
pub(crate) fn swap_extra_context(error: &ObjectRef, new: Option<ObjectRef>) -> FfiResult<Option<ObjectRef>> {
    if error.type_index() != super::ti::ERROR {
        return Err(FfiError::type_error("expected an ffi.Error"));
    }
    let new = new.map_or(std::ptr::null_mut(), |o| o.into_raw().cast::<c_void>());
    // SAFETY: an ffi.Error object holds a TVMFFIErrorCell right after its header; the cell owns
    // one reference to its extra context, which moves to the caller.
    unsafe {
        let cell = (error.as_ptr() as *mut u8).add(24).cast::<TVMFFIErrorCell>();
        let old = std::mem::replace(&mut (*cell).extra_context, new);
        Ok(ObjectRef::from_raw(old.cast()))
    }
}

/// The `extra_context` of an `ffi.Error` object (a new reference), if any.
pub(crate) fn extra_context(error: &ObjectRef) -> Option<ObjectRef> {
    if error.type_index() != super::ti::ERROR {
        return None;
    }
    // SAFETY: as in swap_extra_context; the pointer is borrowed and retained.
    unsafe {
        let cell = (error.as_ptr() as *const u8).add(24).cast::<TVMFFIErrorCell>();
        ObjectRef::from_borrowed((*cell).extra_context.cast())
    }
}

/// The error object's payload: the cell, then the storage it points into.
#[repr(C)]
pub(crate) struct ErrorPayload {
    cell: TVMFFIErrorCell,
    kind: Box<[u8]>,
    message: Box<[u8]>,
    backtrace: std::sync::Mutex<Vec<u8>>,
}

impl Drop for ErrorPayload {
    fn drop(&mut self) {
        // The cell owns one reference to each of its cause and context, whatever they are by
        // now: C++ code (tvm-ffi's UpdateVisitErrorContext) swaps `extra_context` in place.
        for p in [self.cell.cause_chain, self.cell.extra_context] {
            if !p.is_null() {
                // SAFETY: the cell holds a strong reference to each non-null pointer.
                unsafe { super::object::dec_ref(p.cast()) };
            }
        }
    }
}

unsafe extern "C" fn update_backtrace(obj: *mut c_void, bt: *const TVMFFIByteArray, mode: i32) {
    if obj.is_null() || bt.is_null() {
        return;
    }
    let _ = std::panic::catch_unwind(|| {
        // SAFETY: called by tvm-ffi clients on an error object with a valid byte array.
        unsafe {
            let p = (obj as *mut u8).add(24).cast::<ErrorPayload>();
            let add = (*bt).as_slice();
            let mut b = (*p).backtrace.lock().unwrap_or_else(|e| e.into_inner());
            b.pop();
            if mode == 0 {
                b.clear();
            }
            b.extend_from_slice(add);
            b.push(0);
            (*p).cell.backtrace = TVMFFIByteArray::of(&b[..b.len() - 1]);
        }
    });
}

/// Makes an `ffi.Error`.
pub(crate) fn make_error(
    kind: &str,
    message: &str,
    backtrace: &str,
    cause: Option<ObjectRef>,
    extra: Option<ObjectRef>,
) -> ObjectRef {
    make_error_bytes(kind.as_bytes(), message.as_bytes(), backtrace.as_bytes(), cause, extra)
}

/// Makes an `ffi.Error` from bytes.
pub fn make_error_bytes(
    kind: &[u8],
    message: &[u8],
    backtrace: &[u8],
    cause: Option<ObjectRef>,
    extra: Option<ObjectRef>,
) -> ObjectRef {
    // Each text is kept NUL-terminated (C++ clients read `data` as a C string).
    let z = |b: &[u8]| -> Box<[u8]> { b.iter().copied().chain([0]).collect() };
    let kind = z(kind);
    let message = z(message);
    let mut bt = backtrace.to_vec();
    bt.push(0);
    let cell = TVMFFIErrorCell {
        kind: TVMFFIByteArray::of(&kind[..kind.len() - 1]),
        message: TVMFFIByteArray::of(&message[..message.len() - 1]),
        backtrace: TVMFFIByteArray::of(&bt[..bt.len() - 1]),
        update_backtrace,
        // The references move into the cell (released by ErrorPayload's drop).
        cause_chain: cause.map_or(std::ptr::null_mut(), |c| c.into_raw().cast()),
        extra_context: extra.map_or(std::ptr::null_mut(), |c| c.into_raw().cast()),
    };
    make_object(ti::ERROR, ErrorPayload { cell, kind, message, backtrace: std::sync::Mutex::new(bt) })
}

fn cell_bytes(o: &ObjectRef, pick: impl Fn(&TVMFFIErrorCell) -> TVMFFIByteArray) -> &[u8] {
    // SAFETY: an ffi.Error object (ours or a foreign one) has the cell right after the header.
    unsafe { pick(o.payload::<TVMFFIErrorCell>()).as_slice() }
}

/// The kind, message and backtrace of an error object.
#[cfg(test)]
pub(crate) fn error_parts(o: &ObjectRef) -> (String, String, String) {
    let s = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
    (s(cell_bytes(o, |c| c.kind)), s(cell_bytes(o, |c| c.message)), s(cell_bytes(o, |c| c.backtrace)))
}

thread_local! {
    static RAISED: RefCell<Option<ObjectRef>> = const { RefCell::new(None) };
}

/// Sets (or clears) this thread's raised error.
pub fn set_raised(e: Option<ObjectRef>) {
    // Drop the old one outside the borrow: its deleter may run arbitrary code.
    let old = RAISED.with(|r| std::mem::replace(&mut *r.borrow_mut(), e));
    drop(old);
}

/// Takes this thread's raised error.
pub fn take_raised() -> Option<ObjectRef> {
    RAISED.with(|r| r.borrow_mut().take())
}

/// Runs `body` as the body of a C export: 0, or -1 with the error raised (a panic becomes an
/// `InternalError`), or -2 for a pending signal.
#[inline]
pub fn safe_call(body: impl FnOnce() -> FfiResult<()>) -> i32 {
    match std::panic::catch_unwind(std::panic::AssertUnwindSafe(body)) {
        Ok(Ok(())) => 0,
        Ok(Err(e)) => e.raise(),
        Err(p) => FfiError::new("InternalError", tvm_runtime_classic::error::panic_payload_text(&*p)).raise(),
    }
}
