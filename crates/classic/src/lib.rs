//! The classic object model of tvm-runtime (TVM v0.8-v0.19's runtime) and what runs on it,
//! above the ABI-neutral core (crate `tvm-runtime-core`, re-exported under the paths the code
//! has always used: [`abi`], [`error`], [`io`], ...).
//!
//! - The object model: [`value`] (`TVMValue` + type code <-> typed values), [`object`] (the
//!   16-byte header, type table, containers), [`function`] (`PackedFunc`), [`registry`] (the
//!   global functions, passive: it starts with what the library's face installed),
//!   [`ndarray`], [`module`] (the module trait, DSO and system libraries, the serialized module
//!   trees: the classic blob and tvm-ffi's library_bin), [`device`] (the core's device API and
//!   what the GPU back ends share).
//! - What runs on it: [`executor`] (graph executor, debug executor, time evaluator), `aot`,
//!   `vm` (the Relay VM), `byoc`, `rpc`, `contrib`, [`cpp`] (globals the C++ headers need),
//!   [`compat`] (what later classic releases changed).
//! - [`globals`]: the `runtime.*` globals of this crate, for the face to install.
//!
//! Nothing here exports a C symbol or installs itself in a registry: the face crate
//! (`tvm-runtime`, which builds `libtvm_runtime.so`) does. The GPU back ends, the tvm-ffi object
//! model and the Relax VM are crates above this one.

#![warn(unreachable_pub)]

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
pub mod function;
pub mod globals;
pub mod module;
pub mod ndarray;
pub mod object;
pub mod registry;
#[cfg(feature = "rpc")]
pub mod rpc;
pub mod value;
#[cfg(feature = "vm")]
pub mod vm;

// The ABI-neutral core, under the paths the rest of the crate has always used.
pub use tvm_runtime_core::{abi, backend_env, error, io, mapped, memory, threading, timer};

/// The unit tests of this crate run with this crate's globals installed, as the library's face
/// installs them when it loads.
#[cfg(test)]
#[used]
#[link_section = ".init_array"]
static INSTALL_FOR_TESTS: extern "C" fn() = {
    extern "C" fn run() {
        registry::install_builtins(globals::register_builtins);
        #[cfg(feature = "rpc")]
        device::install_remote(rpc::device_api());
    }
    run
};
