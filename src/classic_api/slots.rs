//! The context function table of model libraries: the addresses of this
//! library's C functions that the loader stores into a DSO's `__TVMFuncCall`,
//! `__TVMBackendGetFuncFromEnv`, ... pointer variables.
//!
//! The loader (`crate::module::library`) never imports this face; the table is injected
//! instead: [`install`] hands it to the loader once (`set_context_slots`). `crate::init` does so
//! when the library loads; the C entry points through which a program reaches a module loader
//! (`TVMModLoadFromFile`, `TVMFuncGetGlobal`) call it too (one atomic load), which covers a
//! loader reached from a static initialiser that ran before ours.

use super::backend::{
    TVMBackendAllocWorkspace, TVMBackendFreeWorkspace, TVMBackendGetFuncFromEnv, TVMBackendParallelBarrier,
    TVMBackendParallelLaunch,
};
use super::runtime_api::{TVMAPISetLastError, TVMFuncCall};
use crate::error::Result;
use std::ffi::c_void;

/// Slot name -> address of the implementation stored there.
struct Table([(&'static str, *const c_void); 7]);

// SAFETY: the entries are addresses of functions (immutable code), usable from any thread.
unsafe impl Sync for Table {}

static TABLE: Table = Table([
    ("__TVMFuncCall", TVMFuncCall as *const c_void),
    ("__TVMAPISetLastError", TVMAPISetLastError as *const c_void),
    ("__TVMBackendGetFuncFromEnv", TVMBackendGetFuncFromEnv as *const c_void),
    ("__TVMBackendAllocWorkspace", TVMBackendAllocWorkspace as *const c_void),
    ("__TVMBackendFreeWorkspace", TVMBackendFreeWorkspace as *const c_void),
    ("__TVMBackendParallelLaunch", TVMBackendParallelLaunch as *const c_void),
    ("__TVMBackendParallelBarrier", TVMBackendParallelBarrier as *const c_void),
]);

/// The table: every context slot with the address of this library's implementation.
pub fn context_slots() -> &'static [(&'static str, *const c_void)] {
    &TABLE.0
}

/// Hands the table to the module loader (idempotent).
pub fn install() -> Result<()> {
    crate::module::library::set_context_slots(context_slots())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table_is_complete_and_installs() {
        let names: Vec<&str> = context_slots().iter().map(|e| e.0).collect();
        assert_eq!(names, crate::module::library::CONTEXT_SLOT_NAMES);
        assert!(install().is_ok());
        assert!(install().is_ok());
    }
}
