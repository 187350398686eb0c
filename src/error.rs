//! Errors of the runtime core and the thread-local "last error" slot.
//!
//! Every error carries a TVM error kind (`ValueError`, `TypeError`, ...) so that the text
//! reported through `TVMGetLastError` starts with `Kind: `, which TVM's Python FFI parses to pick
//! an exception class. The thread-local slot lives here (not in `ffi`) because the core needs it
//! too: the thread pool reads the message a failing task left on its worker thread.

use std::cell::RefCell;
use std::ffi::CString;
use std::fmt;

/// Result type of the runtime core.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// An error of the runtime.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Error {
    /// An error with a kind (`ValueError`) and a message.
    Kind { kind: &'static str, msg: String },
    /// A message that already carries its own `Kind: ` prefix (set by a C callback through
    /// `TVMAPISetLastError`); reported verbatim.
    Raw(String),
    /// A callback returned -2: a frontend error is pending and the slot must not be touched.
    AlreadySet,
}

impl Error {
    /// `TVMError: msg`.
    pub fn tvm(msg: impl Into<String>) -> Self {
        Error::Kind { kind: "TVMError", msg: msg.into() }
    }
    /// `ValueError: msg`.
    pub fn value(msg: impl Into<String>) -> Self {
        Error::Kind { kind: "ValueError", msg: msg.into() }
    }
    /// `TypeError: msg`.
    pub fn type_error(msg: impl Into<String>) -> Self {
        Error::Kind { kind: "TypeError", msg: msg.into() }
    }
    /// `IndexError: msg`.
    pub fn index(msg: impl Into<String>) -> Self {
        Error::Kind { kind: "IndexError", msg: msg.into() }
    }
    /// `KeyError: msg`.
    pub fn key(msg: impl Into<String>) -> Self {
        Error::Kind { kind: "KeyError", msg: msg.into() }
    }
    /// `AttributeError: msg`.
    pub fn attribute(msg: impl Into<String>) -> Self {
        Error::Kind { kind: "AttributeError", msg: msg.into() }
    }
    /// `InternalError: msg`.
    pub fn internal(msg: impl Into<String>) -> Self {
        Error::Kind { kind: "InternalError", msg: msg.into() }
    }
    /// A feature that arrives in a later version of this runtime.
    pub fn unsupported(what: &str) -> Self {
        Error::tvm(format!("{what} is not supported yet by this runtime"))
    }
    /// Wraps a message that came from a C callback or from generated code through the last
    /// error slot: kept verbatim if it already has a `Kind: ` prefix, else `TVMError: `.
    pub fn from_foreign(msg: String) -> Self {
        Error::Raw(msg)
    }

    /// Prepends context to the message, keeping the kind (used for "while loading X: ...").
    pub fn context(self, ctx: impl fmt::Display) -> Self {
        match self {
            Error::Kind { kind, msg } => Error::Kind { kind, msg: format!("{ctx}: {msg}") },
            Error::Raw(m) => {
                let (kind, rest) = split_kind(&m);
                Error::Raw(format!("{kind}: {ctx}: {rest}"))
            }
            Error::AlreadySet => Error::AlreadySet,
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
        match self {
            Error::Kind { kind, msg } => write!(f, "{kind}: {msg}"),
            Error::Raw(m) => {
                let (kind, rest) = split_kind(m);
                write!(f, "{kind}: {rest}")
            }
            Error::AlreadySet => f.write_str("TVMError: a frontend error is pending"),
        }
    }
}

impl std::error::Error for Error {}

thread_local! {
    static LAST_ERROR: RefCell<CString> = RefCell::new(CString::default());
}

/// Stores `msg` in this thread's last-error slot (interior NULs are cut off there).
pub fn set_last_error(msg: &str) {
    let bytes = msg.as_bytes();
    let end = bytes.iter().position(|&b| b == 0).unwrap_or(bytes.len());
    let c = CString::new(&bytes[..end]).unwrap_or_default();
    LAST_ERROR.with(|slot| *slot.borrow_mut() = c);
}

/// Stores an error in this thread's last-error slot (nothing for [`Error::AlreadySet`]).
pub fn set_last(err: &Error) {
    if *err != Error::AlreadySet {
        set_last_error(&err.to_string());
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
        assert_eq!(Error::Raw("KeyError: x".into()).to_string(), "KeyError: x");
        assert_eq!(Error::Raw("no kind here".into()).to_string(), "TVMError: no kind here");
        assert_eq!(Error::Raw("two words: x".into()).to_string(), "TVMError: two words: x");
        assert_eq!(Error::value("m").context("loading f").to_string(), "ValueError: loading f: m");
    }

    #[test]
    fn last_error_is_thread_local() {
        set_last_error("ValueError: here");
        let other = std::thread::spawn(last_error_message).join().ok();
        assert_eq!(other.as_deref(), Some(""));
        assert_eq!(last_error_message(), "ValueError: here");
    }
}
