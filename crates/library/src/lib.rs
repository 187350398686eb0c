//! `libtvm_runtime.so` and `libtvm_runtime.a`: the face crate (`tvm-runtime`: the C exports of
//! both ABIs and what the library installs when it loads) and every crate below it, linked into
//! one library with link-time optimisation. Nothing is written here: the exports are the face's
//! `#[no_mangle]` functions, which a C library exports from any crate it links.
//!
//! A package of its own because Cargo applies `lto` only to a library that is not also an
//! rlib, and the face must be one: the Rust API, the tools and the tests link it.

pub use face::*;
