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
    /// Every address registered as a (prefixed) `__tvm_module_ctx`, with its name, in
    /// registration order.
    pub module_ctx: Vec<(String, usize)>,
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
    let is_ctx = name.ends_with("__tvm_module_ctx");
    if is_ctx && !t.module_ctx.iter().any(|(n, a)| n == name && *a == addr) {
        t.module_ctx.push((name.to_owned(), addr));
    }
    if let Some(old) = t.symbols.insert(name.to_owned(), addr) {
        if old != addr && !is_ctx {
            eprintln!("SystemLib symbol {name} get overriden to a different address {addr:#x}->{old:#x}");
        }
    }
}

/// The address registered under `name`.
pub fn lookup(name: &str) -> Option<*mut c_void> {
    table().lock().symbols.get(name).map(|&a| a as *mut c_void)
}

/// `name` with `prefix` first, then without (TVM v0.13+'s prefixed system libraries).
pub fn lookup_prefixed(prefix: &str, name: &str) -> Option<*mut c_void> {
    if !prefix.is_empty() {
        if let Some(p) = lookup(&format!("{prefix}{name}")) {
            return Some(p);
        }
    }
    lookup(name)
}
