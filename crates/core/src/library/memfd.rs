//! Opening a model library from its bytes (`runtime.ModuleLoadFromMemory`, tvm-ffi's
//! `ffi.Module.load_from_bytes.so`).
//!
//! An application that keeps its models encrypted decrypts one into memory and loads it from
//! there, without ever writing the plain library to a file that someone else could read. On
//! Linux the bytes go into an anonymous file (`memfd_create`, close-on-exec, sealed against
//! further writes once filled), which is `dlopen`ed through `/proc/self/fd/N` and closed again
//! (the loaded mapping keeps its memory). The file has no name in any directory; only this
//! process (and whoever may trace it) can reach it. Everything after the `dlopen` is the usual
//! loader's (the classic crate's `module::dso::load_opened`, or tvm-ffi's): context slots, the
//! module tree, the module context.
//!
//! The dynamic loader recognises an already loaded library by the path string first, and an
//! fd number is reused once closed; so the path is first checked with `RTLD_NOLOAD`, and a
//! path that names a library still loaded (an earlier memory load whose fd had that number) is
//! spelled differently (`/proc/self/fd/./N`, ...), which the kernel resolves to the same file.
//!
//! Where the platform has no anonymous files (not Linux), loading from memory is a clear error.

use super::dso::Dso;
use crate::error::{Error, Result};

/// The largest library accepted (the memory for it is the caller's already; this bounds only
/// the anonymous file's size against a nonsense length).
const MAX_BYTES: usize = 1 << 40;

/// `dlopen`s the shared library whose bytes are `bytes` (checked first: an ELF library whose
/// sections lie within the bytes), without loading anything from it: the classic and the tvm-ffi
/// loaders continue from here.
pub fn open_bytes(bytes: &[u8], name: &str) -> Result<std::sync::Arc<Dso>> {
    if bytes.len() < 64 || &bytes[..4] != b"\x7fELF" {
        return Err(Error::value(format!(
            "{}: the {} bytes given are not a shared library (no ELF header)",
            label(name),
            bytes.len()
        )));
    }
    if bytes.len() > MAX_BYTES {
        return Err(Error::value(format!("{}: {} bytes is too large for a library", label(name), bytes.len())));
    }
    crate::formats::elf::check_bytes(bytes, &label(name))?;
    imp::open(bytes, &label(name))
}

fn label(name: &str) -> String {
    format!("<memory:{name}>")
}

#[cfg(target_os = "linux")]
mod imp {
    use super::super::dso::Dso;
    use crate::error::{Error, Result};
    use std::ffi::CString;
    use std::fs::File;
    use std::io::Write;
    use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
    use std::sync::Arc;

    fn os_error(what: &str, label: &str) -> Error {
        Error::tvm(format!("{label}: {what} failed: {}", std::io::Error::last_os_error()))
    }

    /// Whether a library is loaded under exactly this path (`RTLD_NOLOAD` loads nothing).
    fn loaded_as(path: &str) -> bool {
        // SAFETY: with RTLD_NOLOAD, dlopen only looks the name up among loaded libraries and
        // runs no initialiser; the extra reference it takes is dropped at once.
        unsafe { libloading::os::unix::Library::open(Some(path), libc::RTLD_NOLOAD | libc::RTLD_LAZY) }.is_ok()
    }

    pub(super) fn open(bytes: &[u8], label: &str) -> Result<Arc<Dso>> {
        // memfd names are for /proc listings only; keep it short and NUL-free.
        let short: String = label.chars().filter(|&c| c != '\0').take(200).collect();
        let cname = CString::new(short).unwrap_or_default();
        // SAFETY: `cname` is a valid NUL-terminated string; the flags are defined by Linux.
        let fd = unsafe { libc::memfd_create(cname.as_ptr(), libc::MFD_CLOEXEC | libc::MFD_ALLOW_SEALING) };
        if fd < 0 {
            return Err(os_error("memfd_create", label));
        }
        // SAFETY: `fd` was just created and is owned by nothing else.
        let owned = unsafe { OwnedFd::from_raw_fd(fd) };
        let mut file = File::from(owned);
        file.write_all(bytes).map_err(|e| Error::tvm(format!("{label}: writing the anonymous file failed: {e}")))?;
        let seals = libc::F_SEAL_SHRINK | libc::F_SEAL_GROW | libc::F_SEAL_WRITE | libc::F_SEAL_SEAL;
        // SAFETY: fcntl on our own open descriptor with an integer argument.
        if unsafe { libc::fcntl(file.as_raw_fd(), libc::F_ADD_SEALS, seals) } != 0 {
            return Err(os_error("sealing the anonymous file", label));
        }
        let n = file.as_raw_fd();
        let path = (0..64)
            .map(|k| format!("/proc/self/fd/{}{n}", "./".repeat(k)))
            .find(|p| !loaded_as(p))
            .ok_or_else(|| Error::internal(format!("{label}: no free path for /proc/self/fd/{n}")))?;
        let dso = Dso::open_as(&path, label);
        drop(file);
        dso
    }
}

#[cfg(not(target_os = "linux"))]
mod imp {
    use super::super::dso::Dso;
    use crate::error::{Error, Result};
    use std::sync::Arc;

    pub(super) fn open(_bytes: &[u8], label: &str) -> Result<Arc<Dso>> {
        Err(Error::tvm(format!(
            "{label}: loading a library from memory needs anonymous files (memfd_create), which only \
             Linux has; on this platform write the library to a private file and load that"
        )))
    }
}
