//! `libtriton_tvm.so`: a Triton Inference Server backend (backend name `tvm`) that serves
//! models exported by Apache TVM (graph executor factories, AOT executor factories, Relay VM
//! executables) on this repository's runtime, linked in as its rlib (one runtime per process).
//!
//! * [`config`]: the model configuration: reading, checking against the model, auto-complete;
//! * [`model`]: a loaded export and the executors its instances make from it;
//! * [`batch`]: requests to model runs (checks, batching) and outputs back;
//! * `backend` / `ffi`: the backend API's entry points and our declarations of the Triton
//!   functions they call (not built into the unit tests, which have no server to link with).

pub mod batch;
pub mod config;
pub mod model;

#[cfg(not(test))]
mod backend;
#[cfg(not(test))]
#[allow(non_camel_case_types, reason = "Triton's C names")]
mod ffi;
