//! Loading a model library from memory: `runtime.ModuleLoadFromMemory(bytes[, format])`.
//!
//! An application that keeps its models encrypted decrypts one into memory and loads it from
//! there, without ever writing the plain library to a file that someone else could read. On
//! Linux the bytes go into an anonymous file (`memfd_create`, close-on-exec, sealed against
//! further writes once filled), which is `dlopen`ed through `/proc/self/fd/N` and closed again
//! (the loaded mapping keeps its memory). The file has no name in any directory; only this
//! process (and whoever may trace it) can reach it. Everything after the `dlopen` is the usual
//! loader ([`super::dso::load_opened`]): context slots, the blob's module tree, the module
//! context.
//!
//! The dynamic loader recognises an already loaded library by the path string first, and an
//! fd number is reused once closed; so the path is first checked with `RTLD_NOLOAD`, and a
//! path that names a library still loaded (an earlier memory load whose fd had that number) is
//! spelled differently (`/proc/self/fd/./N`, ...), which the kernel resolves to the same file.
//!
//! Where the platform has no anonymous files (not Linux), loading from memory is a clear error.

use super::Module;
use crate::error::{Error, Result};
use crate::registry::Registrar;
use crate::value::Value;
// Opening the library is the core's.
pub use tvm_runtime_core::library::memfd::open_bytes;

/// Loads the model library whose bytes (a whole exported `.so`) are `bytes`; `name` appears in
/// messages (`<memory:NAME>`).
pub fn load_from_bytes(bytes: &[u8], name: &str) -> Result<Module> {
    super::dso::load_opened(open_bytes(bytes, name)?)
}

/// Registers `runtime.ModuleLoadFromMemory(bytes[, format])`.
pub fn register(r: &mut Registrar<'_>) {
    r.func("runtime.ModuleLoadFromMemory", |a| {
        a.expect_at_least("runtime.ModuleLoadFromMemory", 1)?;
        let format = if a.len() > 1 { a.string(1)? } else { String::new() };
        if !matches!(format.as_str(), "" | "so" | "dso" | "dll" | "dylib") {
            return Err(Error::value(format!(
                "runtime.ModuleLoadFromMemory: format {format} cannot be loaded from memory (only shared libraries, so)"
            )));
        }
        let bytes = a.bytes(0)?;
        Ok(Value::Module(load_from_bytes(&bytes, "bytes")?))
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rejects_what_is_not_a_library() {
        let e = load_from_bytes(b"hello", "x").unwrap_err().to_string();
        assert!(e.starts_with("ValueError: <memory:x>: the 5 bytes given are not a shared library"), "{e}");
        let mut fake = b"\x7fELF".to_vec();
        fake.resize(256, 0);
        let e = load_from_bytes(&fake, "y").unwrap_err().to_string();
        assert!(e.contains("Failed to load dynamic shared library <memory:y>"), "{e}");
    }
}
