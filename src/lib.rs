//! A Rust re-implementation of Apache TVM v0.8's runtime, built as a drop-in
//! `libtvm_runtime.so`: the C API of `c_runtime_api.h` and `c_backend_api.h` over a safe core.
//!
//! Layering: [`ffi`] is the only place with `extern "C"` exports; it decodes arguments and calls
//! the core ([`value`], [`object`], [`function`], [`registry`], [`ndarray`], [`module`],
//! [`device`], [`threading`]), which never imports `ffi`.

#[cfg(feature = "aot")]
pub mod aot;
#[cfg(feature = "byoc")]
pub mod byoc;
pub mod compat;
#[cfg(feature = "contrib")]
pub mod contrib;
pub mod cpp;
pub mod device;
pub mod executor;
pub mod ffi;
pub mod function;
pub mod globals;
pub mod init;
pub mod module;
pub mod ndarray;
pub mod object;
pub mod registry;
#[cfg(feature = "relax")]
pub mod relax;
#[cfg(feature = "rpc")]
pub mod rpc;
#[cfg(feature = "tvm-ffi")]
pub mod tvmffi;
pub mod value;
#[cfg(feature = "vm")]
pub mod vm;

// The ABI-neutral core, under the paths the rest of the library has always used.
pub use tvm_runtime_core::{abi, backend_env, error, io, mapped, memory, threading, timer};
