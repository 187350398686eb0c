//! A Rust re-implementation of Apache TVM's runtime, built as a drop-in `libtvm_runtime.so`
//! (and `libtvm_ffi.so`): the classic C API of TVM v0.8 (`c_runtime_api.h`, `c_backend_api.h`)
//! and the tvm-ffi ABI of TVM v0.20+ over one core.
//!
//! This crate is the face: the only place with `extern "C"` exports ([`classic_api`] for the
//! classic C API, `tvm_ffi_api` for tvm-ffi's) and the one that decides what is registered
//! ([`init`]). It is built of crates that Cargo keeps layered (each re-exported here under the
//! paths the library has always used), from the bottom:
//! - `tvm-runtime-core`, ABI-neutral: [`abi`], [`error`], the device API, [`memory`],
//!   [`threading`], [`io`], ...;
//! - `tvm-runtime-classic`, the classic object model ([`value`], [`object`], [`function`],
//!   [`registry`], [`ndarray`], [`module`], [`device`]) and what runs on it ([`executor`], the
//!   AOT executor, the Relay VM, BYOC, RPC, `tvm.contrib`);
//! - `tvm-runtime-opencl`, `tvm-runtime-cuda`, the GPU back ends (`device::opencl`,
//!   `device::cuda`), on the classic crate;
//! - `tvm-runtime-tvm-ffi`, the tvm-ffi object model (`tvm_ffi`), on the classic crate (its
//!   bridge to the classic globals and values);
//! - `tvm-runtime-relax`, the Relax VM and the LLM state (`relax`), on both object models.

#![warn(unreachable_pub)]

pub mod classic_api;
pub mod device;
pub mod init;
#[cfg(feature = "tvm-ffi")]
pub mod tvm_ffi_api;

// The tvm-ffi object model and the Relax VM (crates `tvm-runtime-tvm-ffi`, `tvm-runtime-relax`).
#[cfg(feature = "relax")]
pub use tvm_runtime_relax as relax;
#[cfg(feature = "tvm-ffi")]
pub use tvm_runtime_tvm_ffi as tvm_ffi;

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
