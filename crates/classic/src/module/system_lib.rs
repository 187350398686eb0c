//! The system library module (`runtime.SystemLib([prefix])`) over the process-wide symbol table
//! (`TVMBackendRegisterSystemLibSymbol`), which is the core's.

use parking_lot::Mutex;
use std::ffi::c_void;
pub use tvm_runtime_core::library::symbols::{lookup, lookup_prefixed, register_symbol, table, SymbolTable};

thread_local! {
    /// Set while this thread builds a system library (a blob loader calling
    /// `runtime.SystemLib` would otherwise wait for itself).
    static BUILDING: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// `runtime.SystemLib()`: the process-wide system library module.
pub fn system_lib() -> crate::error::Result<super::Module> {
    system_lib_prefixed("")
}

/// `runtime.SystemLib(prefix)`: the system library module of `prefix` (TVM v0.13+; "" is
/// v0.8's single system library), built on the first successful call and then returned
/// forever. Objects built with `--system-lib` and a prefix register their symbols under
/// prefixed names (`<prefix>__tvm_dev_mblob`, `<prefix>__tvm_module_ctx`, their functions);
/// the module looks every name up with the prefix first, then without.
///
/// Building follows the DSO loading sequence with the symbol table for `dlsym`: the context
/// slots registered in the table are filled, a registered blob is processed (its length checked
/// against the readable memory at its address), and the library's module is written into every
/// variable registered as the prefix's `__tvm_module_ctx` (each `--system-lib` object registers
/// its own). The module's function lookups consult the table at call time, so symbols
/// registered later are found; their objects' `__tvm_module_ctx` stays NULL, which
/// `TVMBackendGetFuncFromEnv` treats as "global registry only". A failed build is not cached.
pub(crate) fn system_lib_prefixed(prefix: &str) -> crate::error::Result<super::Module> {
    use super::library::{self, LibraryModule, Symbols};
    use super::{blob, dso, Module};
    use crate::error::Error;
    use std::collections::HashMap;

    static LIBS: Mutex<Option<HashMap<String, Module>>> = Mutex::new(None);
    if BUILDING.with(|b| b.get()) {
        return Err(Error::tvm("runtime.SystemLib was called while a system library is being built"));
    }
    let mut libs = LIBS.lock();
    if let Some(m) = libs.as_ref().and_then(|l| l.get(prefix)) {
        return Ok(m.clone());
    }
    struct Building;
    impl Drop for Building {
        fn drop(&mut self) {
            BUILDING.with(|b| b.set(false));
        }
    }
    BUILDING.with(|b| b.set(true));
    let _building = Building;

    let find = |name: &str| lookup_prefixed(prefix, name);
    library::fill_context_slots(&find)?;
    let make_lib = || Module::new(LibraryModule::new(Symbols::SystemLib(prefix.to_owned())));
    let (root, dso_module) = match find(super::blob::BLOB_SYMBOL) {
        Some(addr) => {
            // SAFETY: a registered blob is a static of a linked `--system-lib` object, alive for
            // the whole process; at most its readable extent is read.
            let bytes = unsafe { library::blob_at(addr, dso::readable_extent(addr)) }?;
            // Pages are given back as entries are copied out; nothing is used in place (the
            // registering object may be unloaded by its owner).
            let region = crate::mapped::Region::new(bytes, None);
            let tree = blob::process_in(blob::frame(bytes)?, &make_lib, Some(&region))
                .map_err(|e| e.context("system library"))?;
            region.release_rest();
            (tree.root, tree.dso_module)
        }
        None => {
            let m = make_lib();
            (m.clone(), Some(m))
        }
    };
    if let Some(m) = &dso_module {
        let ctx_name = format!("{prefix}{}", library::MODULE_CTX_SYMBOL);
        let ctx_vars: Vec<usize> =
            table().lock().module_ctx.iter().filter(|(n, _)| *n == ctx_name).map(|&(_, a)| a).collect();
        for addr in ctx_vars {
            // SAFETY: registered as the prefix's `__tvm_module_ctx` by a `--system-lib` object.
            unsafe { library::write_module_ctx(addr as *mut c_void, m) }?;
        }
    }
    libs.get_or_insert_with(HashMap::new).insert(prefix.to_owned(), root.clone());
    Ok(root)
}
