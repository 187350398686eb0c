//! Exports the runtime's C API from this crate's tests and examples (`--export-dynamic`): TVM
//! v0.22+ model libraries call `TVMFFIErrorSetRaisedFromCStrParts` by name (see tvm-rt's build.rs).
fn main() {
    println!("cargo:rustc-link-arg-tests=-Wl,--export-dynamic");
    println!("cargo:rustc-link-arg-examples=-Wl,--export-dynamic");
    println!("cargo:rerun-if-changed=build.rs");
}
