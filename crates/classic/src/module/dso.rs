//! Loading a model library: `runtime.module.loadfile_so`.
//!
//! 1. `dlopen(path, RTLD_NOW | RTLD_LOCAL)`.
//! 2. Fill the context function slots (`__TVMFuncCall`, ...).
//! 3. If the library has a `__tvm_dev_mblob`, build the module tree from it ([`super::blob`]),
//!    giving the blob's pages back to the kernel as they are copied out ([`crate::mapped`]);
//!    otherwise the root is one `library` module for the DSO. A library with tvm-ffi's
//!    `__tvm_ffi__library_bin` instead (TVM v0.22+) is refused, naming the release.
//! 4. Write the DSO's own module (the `_lib` one) into `__tvm_module_ctx`.
//! 5. Return the root.
//!
//! Deviation from TVM v0.8 (which uses `RTLD_LAZY`): every undefined symbol is resolved at load
//! time, so a library that needs a symbol nobody provides fails here with the loader's message
//! (`undefined symbol: ...`) instead of killing the process at its first call.
//!
//! Every step either completes or leaves nothing behind: on error the partly built tree is
//! dropped and the library is closed again (`__tvm_module_ctx` is written last).

use super::blob;
use super::library::{self, LibraryModule, Symbols};
use super::Module;
use crate::error::{Error, Result};
use crate::mapped::Region;
use std::sync::Arc;

/// The symbol of a TVM v0.22+ export's module tree (tvm-ffi's `__tvm_ffi__library_bin`).
use super::library_bin::LIBRARY_BIN_SYMBOL as TVM_FFI_LIBRARY_BIN;
// The shared library itself and its symbols are the core's.
pub use tvm_runtime_core::library::dso::{
    blob_at, blob_capacity, readable_extent, symbol_info, Dso, SymbolInfo, SymbolKind,
};

/// `runtime.module.loadfile_so(path, ...)`: loads a model library and builds its module tree.
pub fn load(path: &str) -> Result<Module> {
    load_opened(Dso::open(path)?)
}

/// Builds the module tree of a library already opened (steps 2 to 5 of the module doc).
pub fn load_opened(dso: Arc<Dso>) -> Result<Module> {
    let path = dso.path().to_owned();
    if dso.symbol(blob::BLOB_SYMBOL).is_none() && dso.symbol(TVM_FFI_LIBRARY_BIN).is_some() {
        // Its module tree (a Relax VM executable, device code) is tvm-ffi's, which this loader
        // would drop, leaving an empty library.
        return Err(Error::tvm(format!(
            "{path} is an export of TVM v0.22 or later: its module tree is in {TVM_FFI_LIBRARY_BIN} \
             (tvm-ffi's format), which the classic loader does not read; load it through the tvm-ffi ABI \
             (ffi.ModuleLoadFromFile, tvm.runtime.load_module of TVM v0.20+; in Rust tvm_rt::RelaxModule::load)"
        )));
    }
    library::fill_context_slots(&|name| dso.symbol(name))?;
    let make_lib = || Module::new(LibraryModule::new(Symbols::Dso(dso.clone())));
    let (root, dso_module) = match dso.symbol(blob::BLOB_SYMBOL) {
        Some(addr) => {
            // SAFETY: `addr` is the blob symbol of the loaded library, which stays mapped while
            // `dso` lives; at most `blob_capacity` bytes (its symbol size or readable extent)
            // are read.
            let bytes = unsafe { library::blob_at(addr, blob_capacity(addr)) }
                .map_err(|e| e.context(format_args!("{path}")))?;
            // The blob's pages are given back as its entries are copied out (weights held once);
            // aligned weights may be used in place, which keeps the library loaded.
            let region = Region::new(bytes, Some(dso.clone()));
            let tree = blob::process_in(blob::frame(bytes)?, &make_lib, Some(&region))
                .map_err(|e| e.context(format_args!("{path}")))?;
            region.release_rest();
            (tree.root, tree.dso_module)
        }
        None => {
            let m = make_lib();
            (m.clone(), Some(m))
        }
    };
    if let (Some(m), Some(slot)) = (dso_module, dso.symbol(library::MODULE_CTX_SYMBOL)) {
        // SAFETY: `slot` is the library's `__tvm_module_ctx`, which `m` keeps loaded.
        unsafe { library::attach_module_ctx(&m, slot) }?;
    }
    Ok(root)
}
