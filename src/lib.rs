//! A Rust re-implementation of Apache TVM's runtime, built as a drop-in `libtvm_runtime.so`
//! (and `libtvm_ffi.so`): the classic C API of TVM v0.8 (`c_runtime_api.h`, `c_backend_api.h`)
//! and the tvm-ffi ABI of TVM v0.20+ over one core.
//!
//! Layering, from the bottom: the ABI-neutral core (crate `tvm-runtime-core`, re-exported here:
//! [`abi`], [`error`], [`device`]'s API, [`memory`], [`threading`], ...); the classic object
//! model ([`value`], [`object`], [`function`], [`registry`], [`ndarray`], [`module`]) and what
//! runs on it (executors, the Relay VM, BYOC, RPC); the tvm-ffi object model and the Relax VM
//! ([`tvm_ffi`], `relax`); the two faces, the only places with `extern "C"` exports:
//! [`classic_api`] and `tvm_ffi::exports`. [`init`] decides what is registered.

pub mod classic_api;
pub mod device;
pub mod init;
#[cfg(feature = "relax")]
pub mod relax;
#[cfg(feature = "tvm-ffi")]
pub mod tvm_ffi;

// The classic object model and what runs on it (crate `tvm-runtime-classic`), under the paths
// the library has always used.
#[cfg(feature = "aot")]
pub use tvm_runtime_classic::aot;
#[cfg(feature = "byoc")]
pub use tvm_runtime_classic::byoc;
#[cfg(feature = "contrib")]
pub use tvm_runtime_classic::contrib;
#[cfg(feature = "rpc")]
pub use tvm_runtime_classic::rpc;
#[cfg(feature = "vm")]
pub use tvm_runtime_classic::vm;
pub use tvm_runtime_classic::{compat, cpp, executor, function, globals, module, ndarray, object, registry, value};

// The ABI-neutral core, under the paths the rest of the library has always used.
pub use tvm_runtime_core::{abi, backend_env, error, io, mapped, memory, threading, timer};
