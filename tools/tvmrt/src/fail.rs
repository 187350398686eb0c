//! Why a command failed, and with which exit code.

use std::fmt;

/// Exit codes: 0 success, 1 an error (bad file, bad input, device not present, runtime error),
/// 2 bad command-line usage (clap's own), 3 `run --expect` found outputs that differ.
pub const EXIT_ERROR: u8 = 1;
/// Outputs differ from `--expect`.
pub const EXIT_MISMATCH: u8 = 3;

/// A failure: its message (printed as one line) and exit code.
#[derive(Debug)]
pub struct Fail {
    /// The exit code.
    pub code: u8,
    /// The message.
    pub msg: String,
}

/// The result type of commands.
pub type Result<T, E = Fail> = std::result::Result<T, E>;

impl Fail {
    /// An error of the user's input (files, names, shapes).
    pub fn input(msg: impl Into<String>) -> Fail {
        Fail { code: EXIT_ERROR, msg: msg.into() }
    }

    /// Outputs differ from what was expected.
    pub fn mismatch(msg: impl Into<String>) -> Fail {
        Fail { code: EXIT_MISMATCH, msg: msg.into() }
    }

    /// The message as one line.
    pub fn one_line(&self) -> String {
        self.msg.split_whitespace().collect::<Vec<_>>().join(" ")
    }
}

impl From<tvm_rt::Error> for Fail {
    fn from(e: tvm_rt::Error) -> Fail {
        Fail::input(e.to_string())
    }
}

impl fmt::Display for Fail {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.one_line())
    }
}
