//! The library stands in for NVIDIA's driver: its soname is the driver's, so that a program that
//! preloads it (or opens it by path) finds it again under the name `libcuda.so.1`.
fn main() {
    println!("cargo:rustc-cdylib-link-arg=-Wl,-soname,libcuda.so.1");
    println!("cargo:rerun-if-changed=build.rs");
}
