//! Sets the soname of the shared library, so that programs linked against it record
//! `libtvm_runtime.so` as TVM's own runtime does.
fn main() {
    println!("cargo:rustc-cdylib-link-arg=-Wl,-soname,libtvm_runtime.so");
    println!("cargo:rerun-if-changed=build.rs");
}
