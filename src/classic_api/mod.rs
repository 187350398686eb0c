//! The C ABI: every `extern "C"` export of the library, and nothing else.
//!
//! Each export checks its arguments, calls the safe core and writes its outputs inside one
//! [`guard::guard`], which catches panics and turns errors into TVM's `-1` + last-error
//! convention. All pointer casts between C handles and core types live in [`handle`].
#![deny(clippy::unwrap_used, clippy::expect_used)]

pub mod backend;
pub mod device;
#[cfg(feature = "byoc")]
pub mod dnnl;
pub mod error_api;
pub mod f16;
pub mod guard;
pub mod handle;
pub mod ndarray;
pub mod object;
pub mod ret;
pub mod runtime_api;
pub mod slots;
