//! The process-wide system-library symbol table (`TVMBackendRegisterSystemLibSymbol`).
//!
//! Usable before anything else is initialised: objects built with `--system-lib` register their
//! symbols from static constructors.

use parking_lot::Mutex;
use std::collections::HashMap;
use std::ffi::c_void;
use std::sync::OnceLock;

/// Registered symbols, plus every address registered as `__tvm_module_ctx` (each system-lib
/// object registers its own).
#[derive(Default)]
pub struct SymbolTable {
    /// name -> address.
    pub symbols: HashMap<String, usize>,
    /// All `__tvm_module_ctx` addresses, in registration order.
    pub module_ctx: Vec<usize>,
}

/// The table.
pub fn table() -> &'static Mutex<SymbolTable> {
    static T: OnceLock<Mutex<SymbolTable>> = OnceLock::new();
    T.get_or_init(Mutex::default)
}

/// Records `name -> ptr`; a different address for a known name replaces it with a warning.
pub fn register_symbol(name: &str, ptr: *mut c_void) {
    let mut t = table().lock();
    let addr = ptr as usize;
    if name == "__tvm_module_ctx" && !t.module_ctx.contains(&addr) {
        t.module_ctx.push(addr);
    }
    if let Some(old) = t.symbols.insert(name.to_owned(), addr) {
        if old != addr && name != "__tvm_module_ctx" {
            eprintln!("SystemLib symbol {name} get overriden to a different address {addr:#x}->{old:#x}");
        }
    }
}

/// The address registered under `name`.
pub fn lookup(name: &str) -> Option<*mut c_void> {
    table().lock().symbols.get(name).map(|&a| a as *mut c_void)
}
