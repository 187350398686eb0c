//! Exports the runtime's C API from the executable, so that libraries the server loads which
//! call it by name (plugins registering globals, C blob loaders) find it, as they would find it
//! in `libtvm_runtime.so` next to TVM's own server.
fn main() {
    println!("cargo:rustc-link-arg-bins=-rdynamic");
    println!("cargo:rerun-if-changed=build.rs");
}
