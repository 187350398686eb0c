//! Exports the runtime's C API from the tvmrt executable (`--export-dynamic`), as a program
//! linked against libtvm_runtime.so has it: model libraries built with TVM's C backend call
//! `TVMBackendAllocWorkspace`, `TVMAPISetLastError`, ... as undefined symbols that the dynamic
//! loader resolves from the program.
fn main() {
    println!("cargo:rustc-link-arg-bins=-Wl,--export-dynamic");
    println!("cargo:rerun-if-changed=build.rs");
}
