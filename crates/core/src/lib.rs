//! The ABI-neutral core of tvm-runtime, below both faces (the classic C API of TVM v0.8 and
//! the tvm-ffi ABI of TVM v0.20+) and both object models: what neither ABI owns.
//!
//! - [`abi`]: the `#[repr(C)]` types of DLPack and of the classic value ABI.
//! - [`device`]: the device API every back end implements, the CPU's, device names and
//!   numbers, the workspace pools of generated code.
//! - [`dtype`]: `DLDataType` text forms and size rules.
//! - [`error`]: the error type and the thread's last-error slot.
//! - [`formats`]: the serialized forms of a model library that need no object model (tvm-ffi's
//!   library binary, the import tree, the ELF check, module kinds).
//! - [`backend_env`]: the frontend callbacks of `TVMBackendRegisterEnvCAPI` and the Python
//!   objects held with them.
//! - [`io`]: byte streams in dmlc::Stream conventions, bounds-checked.
//! - [`library`]: shared libraries (`dlopen`, from memory), the system library's symbol table,
//!   the context function slots both loaders fill.
//! - [`mapped`]: giving back the pages of a read-only file mapping once copied out.
//! - [`memory`]: the allocators of both VMs (naive and pooled).
//! - [`passive`]: a table that starts from what the face installed in it (the registries).
//! - [`threading`]: the thread pool behind the parallel launch of compiled kernels.
//! - [`timer`]: the time evaluator's measurement loop.
//!
//! Nothing here exports a C symbol or registers a global function: the face crate does.

#![warn(unreachable_pub)]

pub mod abi;
pub mod backend_env;
pub mod device;
pub mod dtype;
pub mod error;
pub mod formats;
pub mod io;
pub mod library;
pub mod mapped;
pub mod memory;
pub mod passive;
pub mod threading;
pub mod timer;
