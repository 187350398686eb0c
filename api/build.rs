//! Exports the runtime's C API from this crate's tests and examples (`--export-dynamic`), as a
//! program linked against libtvm_runtime.so has it: exports of TVM v0.22+ call
//! `TVMFFIErrorSetRaisedFromCStrParts` (and C-backend libraries `TVMAPISetLastError`, ...) as
//! undefined symbols that the dynamic loader resolves from the program. A program of yours that
//! loads such exports needs the same line for its binaries (`cargo:rustc-link-arg-bins=...`).
fn main() {
    println!("cargo:rustc-link-arg-tests=-Wl,--export-dynamic");
    println!("cargo:rustc-link-arg-examples=-Wl,--export-dynamic");
    println!("cargo:rerun-if-changed=build.rs");
}
