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

#[cfg(feature = "aot")]
pub mod aot;
#[cfg(feature = "byoc")]
pub mod byoc;
pub mod classic_api;
pub mod compat;
#[cfg(feature = "contrib")]
pub mod contrib;
pub mod cpp;
pub mod device;
pub mod executor;
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
pub mod tvm_ffi;
pub mod value;
#[cfg(feature = "vm")]
pub mod vm;

// The ABI-neutral core, under the paths the rest of the library has always used.
pub use tvm_runtime_core::{abi, backend_env, error, io, mapped, memory, threading, timer};
