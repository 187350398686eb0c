//! The face's test programs export the C API as a program linked against the library has it:
//! TVM v0.20+ kernel libraries they load call `TVMFFIErrorSetRaisedFromCStrParts` as an
//! undefined symbol. (The shared library's own link settings are `crates/library/build.rs`'s.)
fn main() {
    println!("cargo:rustc-link-arg-tests=-Wl,--export-dynamic");
    println!("cargo:rerun-if-changed=build.rs");
}
