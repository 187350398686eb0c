//! Errors of the runtime core and the thread-local "last error" slot.
//!
//! Every error carries a TVM error kind (`ValueError`, `TypeError`, ...) so that the text
//! reported through `TVMGetLastError` starts with `Kind: `, which TVM's Python FFI parses to pick
//! an exception class. The thread-local slot lives here (not in `ffi`) because the core needs it
//! too: the thread pool reads the message a failing task left on its worker thread.

use std::borrow::Cow;
use std::cell::RefCell;
use std::ffi::CString;
use std::fmt;

/// Result type of the runtime core.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// An error of the runtime: one pointer wide, so that `Result<T>` stays small on hot paths.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Error(Box<Repr>);

/// What an [`Error`] holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Repr {
    /// An error with a kind (`ValueError`) and a message.
    Kind { kind: Cow<'static, str>, msg: String },
    /// A message that already carries its own `Kind: ` prefix (set by a C callback through
    /// `TVMAPISetLastError`); reported verbatim.
    Raw(String),
    /// A callback returned -2: a frontend error is pending and the slot must not be touched.
    AlreadySet,
    /// An exception raised by a Python callback (`TVMAPISetLastPythonError`, TVM v0.14+): the
    /// object travels with the error back to the Python caller (`TVMGetLastPythonError`).
    Python {
        /// The exception object.
        obj: crate::backend_env::PyObject,
        /// What `TVMGetLastError` says meanwhile.
        msg: String,
    },
}

impl Error {
    /// An error of a given kind (`ValueError`, `TypeError`, `RuntimeError`, ...: what TVM's
    /// and tvm-ffi's Python packages map to exception classes).
    #[cold]
    pub fn new(kind: impl Into<Cow<'static, str>>, msg: impl Into<String>) -> Self {
        Error(Box::new(Repr::Kind { kind: kind.into(), msg: msg.into() }))
    }
    /// An error of a given kind.
    #[cold]
    pub fn with_kind(kind: &'static str, msg: impl Into<String>) -> Self {
        Error::new(kind, msg)
    }
    /// The kind (`TVMError` for a foreign message that names none, and for the pending marker).
    pub fn kind(&self) -> &str {
        match &*self.0 {
            Repr::Kind { kind, .. } => kind,
            Repr::Raw(m) => split_kind(m).0,
            Repr::Python { msg, .. } => split_kind(msg).0,
            Repr::AlreadySet => "TVMError",
        }
    }
    /// The message, without its kind.
    pub fn message(&self) -> &str {
        match &*self.0 {
            Repr::Kind { msg, .. } => msg,
            Repr::Raw(m) => split_kind(m).1,
            Repr::Python { msg, .. } => split_kind(msg).1,
            Repr::AlreadySet => ALREADY_SET_TEXT,
        }
    }
    /// The "frontend error already pending" marker (a callback returned -2).
    #[cold]
    pub fn already_set() -> Self {
        Error(Box::new(Repr::AlreadySet))
    }
    /// Whether this is the "already pending" marker.
    pub fn is_already_set(&self) -> bool {
        matches!(*self.0, Repr::AlreadySet)
    }
    /// What the error holds.
    pub fn repr(&self) -> &Repr {
        &self.0
    }
    /// `TVMError: msg`.
    pub fn tvm(msg: impl Into<String>) -> Self {
        Error::with_kind("TVMError", msg)
    }
    /// `ValueError: msg`.
    pub fn value(msg: impl Into<String>) -> Self {
        Error::with_kind("ValueError", msg)
    }
    /// `TypeError: msg`.
    pub fn type_error(msg: impl Into<String>) -> Self {
        Error::with_kind("TypeError", msg)
    }
    /// `IndexError: msg`.
    pub fn index(msg: impl Into<String>) -> Self {
        Error::with_kind("IndexError", msg)
    }
    /// `KeyError: msg`.
    pub fn key(msg: impl Into<String>) -> Self {
        Error::with_kind("KeyError", msg)
    }
    /// `AttributeError: msg`.
    pub fn attribute(msg: impl Into<String>) -> Self {
        Error::with_kind("AttributeError", msg)
    }
    /// `InternalError: msg`.
    pub fn internal(msg: impl Into<String>) -> Self {
        Error::with_kind("InternalError", msg)
    }
    /// A feature that arrives in a later version of this runtime.
    pub fn unsupported(what: &str) -> Self {
        Error::tvm(format!("{what} is not supported yet by this runtime"))
    }
    /// Wraps a message that came from a C callback or from generated code through the last
    /// error slot: kept verbatim if it already has a `Kind: ` prefix, else `TVMError: `.
    #[cold]
    pub fn from_foreign(msg: String) -> Self {
        Error(Box::new(Repr::Raw(msg)))
    }

    /// A Python exception object travelling back to its caller.
    #[cold]
    pub fn python(obj: crate::backend_env::PyObject) -> Self {
        Error(Box::new(Repr::Python { obj, msg: PYTHON_ERROR_TEXT.to_owned() }))
    }

    /// Prepends context to the message, keeping the kind (used for "while loading X: ...").
    pub fn context(self, ctx: impl fmt::Display) -> Self {
        match *self.0 {
            Repr::Python { obj, msg } => Error(Box::new(Repr::Python { obj, msg: format!("{ctx}: {msg}") })),
            Repr::Kind { kind, msg } => Error::new(kind, format!("{ctx}: {msg}")),
            Repr::Raw(m) => {
                let (kind, rest) = split_kind(&m);
                Error::from_foreign(format!("{kind}: {ctx}: {rest}"))
            }
            Repr::AlreadySet => Error::already_set(),
        }
    }
}

/// Splits `Kind: rest` into its parts; a message without a valid kind gets `TVMError`.
pub fn split_kind(msg: &str) -> (&str, &str) {
    if let Some(pos) = msg.find(':') {
        let kind = &msg[..pos];
        let valid = !kind.is_empty()
            && kind.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'.')
            && !kind.contains('\n');
        if valid {
            let rest = msg[pos + 1..].strip_prefix(' ').unwrap_or(&msg[pos + 1..]);
            return (kind, rest);
        }
    }
    ("TVMError", msg)
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &*self.0 {
            Repr::Kind { kind, msg } => write!(f, "{kind}: {msg}"),
            Repr::Raw(m) => {
                let (kind, rest) = split_kind(m);
                write!(f, "{kind}: {rest}")
            }
            Repr::AlreadySet => write!(f, "TVMError: {ALREADY_SET_TEXT}"),
            Repr::Python { msg, .. } => f.write_str(msg),
        }
    }
}

impl std::error::Error for Error {}

/// An error's text followed by its sources' (`a: b: c`); libloading keeps the dynamic loader's
/// own message in the source.
pub fn source_chain(e: &dyn std::error::Error) -> String {
    let mut s = e.to_string();
    let mut cur = e.source();
    while let Some(c) = cur {
        s += &format!(": {c}");
        cur = c.source();
    }
    s
}

/// The message of a caught panic payload (`&str` or `String`; anything else is "unknown panic").
pub fn panic_payload_text(payload: &(dyn std::any::Any + Send)) -> String {
    payload
        .downcast_ref::<&str>()
        .map(|s| (*s).to_owned())
        .or_else(|| payload.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "unknown panic".to_owned())
}

/// What `TVMGetLastError` reports while a Python exception is the last error (TVM returns NULL
/// there; its Python reads `TVMGetLastPythonError` first).
/// What the pending marker says where a text is wanted.
const ALREADY_SET_TEXT: &str = "a frontend error is pending";

pub(crate) const PYTHON_ERROR_TEXT: &str =
    "TVMError: a Python callback raised an exception (TVMGetLastPythonError returns it)";

/// The Python exception of the last error, if it is one. Its destructor leaks the object
/// rather than calling into an interpreter that may be gone when the thread exits.
struct PySlot(Option<crate::backend_env::PyObject>);

impl Drop for PySlot {
    fn drop(&mut self) {
        if let Some(o) = self.0.take() {
            o.leak();
        }
    }
}

thread_local! {
    static LAST_ERROR: RefCell<CString> = RefCell::new(CString::default());
    static LAST_PY_ERROR: RefCell<PySlot> = const { RefCell::new(PySlot(None)) };
}

fn set_text(msg: &str) {
    let bytes = msg.as_bytes();
    let end = bytes.iter().position(|&b| b == 0).unwrap_or(bytes.len());
    let c = CString::new(&bytes[..end]).unwrap_or_default();
    LAST_ERROR.with(|slot| *slot.borrow_mut() = c);
}

/// Replaces the Python exception of the last error (dropping the old one outside the borrow).
fn set_python(obj: Option<crate::backend_env::PyObject>) {
    let old = LAST_PY_ERROR.with(|slot| std::mem::replace(&mut slot.borrow_mut().0, obj));
    drop(old);
}

/// Stores `msg` in this thread's last-error slot (interior NULs are cut off there); a pending
/// Python exception is forgotten, as a new error replaces it in TVM.
pub fn set_last_error(msg: &str) {
    set_python(None);
    set_text(msg);
}

/// Stores an error in this thread's last-error slot (nothing for [`Error::AlreadySet`]); a
/// Python exception goes to the Python slot, where `TVMGetLastPythonError` finds it.
pub fn set_last(err: &Error) {
    match err.repr() {
        Repr::AlreadySet => {}
        Repr::Python { obj, msg } => {
            set_python(Some(obj.clone()));
            set_text(msg);
        }
        _ => set_last_error(&err.to_string()),
    }
}

/// `TVMAPISetLastPythonError`: the last error becomes `obj` (already retained).
pub fn set_last_python_error(obj: crate::backend_env::PyObject) {
    set_python(Some(obj));
    set_text(PYTHON_ERROR_TEXT);
}

/// `TVMGetLastPythonError`: the `PyObject*` of the last error (borrowed), or NULL.
pub fn last_python_error_ptr() -> *mut std::ffi::c_void {
    LAST_PY_ERROR.with(|slot| slot.borrow().0.as_ref().map_or(std::ptr::null_mut(), |o| o.as_ptr()))
}

/// `TVMDropLastPythonError`: forgets a pending Python exception (the last error becomes "").
pub fn drop_last_python_error() {
    if LAST_PY_ERROR.with(|slot| slot.borrow().0.is_some()) {
        set_last_error("");
    }
}

/// The error a C callback or generated function reported by returning `ret != 0`: -2 is
/// "already set"; otherwise the pending Python exception (taken out of the slot, so that it
/// travels with the error) or the last error's text.
pub fn foreign_error(ret: std::ffi::c_int) -> Error {
    if ret == -2 {
        return Error::already_set();
    }
    match LAST_PY_ERROR.with(|slot| slot.borrow_mut().0.take()) {
        Some(obj) => Error::python(obj),
        None => Error::from_foreign(last_error_message()),
    }
}

/// A copy of this thread's last error message ("" when none was set).
pub fn last_error_message() -> String {
    LAST_ERROR.with(|slot| slot.borrow().to_string_lossy().into_owned())
}

/// Pointer to this thread's last error text: valid until the next error is set on this thread.
pub fn last_error_ptr() -> *const std::ffi::c_char {
    LAST_ERROR.with(|slot| slot.borrow().as_ptr())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kind_prefix_is_kept_or_added() {
        assert_eq!(Error::value("bad").to_string(), "ValueError: bad");
        assert_eq!(Error::from_foreign("KeyError: x".into()).to_string(), "KeyError: x");
        assert_eq!(Error::from_foreign("no kind here".into()).to_string(), "TVMError: no kind here");
        assert_eq!(Error::from_foreign("two words: x".into()).to_string(), "TVMError: two words: x");
        assert_eq!(Error::value("m").context("loading f").to_string(), "ValueError: loading f: m");
    }

    #[test]
    fn kind_and_message_of_every_form() {
        let parts = |e: &Error| (e.kind().to_owned(), e.message().to_owned());
        assert_eq!(parts(&Error::new(String::from("ffi.Custom"), "m")), ("ffi.Custom".into(), "m".into()));
        assert_eq!(parts(&Error::from_foreign("KeyError: x".into())), ("KeyError".into(), "x".into()));
        assert_eq!(parts(&Error::from_foreign("no kind".into())), ("TVMError".into(), "no kind".into()));
        assert_eq!(parts(&Error::already_set()), ("TVMError".into(), "a frontend error is pending".into()));
        assert_eq!(Error::already_set().to_string(), "TVMError: a frontend error is pending");
        assert_eq!(Error::new("RuntimeError", "m").context("c").to_string(), "RuntimeError: c: m");
    }

    #[test]
    fn last_error_is_thread_local() {
        set_last_error("ValueError: here");
        let other = std::thread::spawn(last_error_message).join().ok();
        assert_eq!(other.as_deref(), Some(""));
        assert_eq!(last_error_message(), "ValueError: here");
    }
}
