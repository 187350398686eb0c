//! The global function table (`TVMFFIFunctionSetGlobal` / `GetGlobal`), shared by C, C++ and
//! Python callers.
//!
//! The table is passive: it holds what it is given. The library's own `ffi.*` functions are
//! chosen by the library's face, which hands their registration to [`install_builtins`] when
//! the library loads; they go in when the table starts (or at once, should something have
//! started it before: a static initializer that ran first).

use super::any::Any;
use super::error::{FfiError, FfiResult};
use super::object::ObjectRef;
use super::ti;
use parking_lot::RwLock;
use std::collections::HashMap;
use std::sync::OnceLock;
use tvm_runtime_core::passive::Passive;

struct Entry {
    func: ObjectRef,
    metadata: Option<String>,
}

/// Where names the table does not hold are looked up (and listed) at each call: the globals of
/// another registry seen through this one, e.g. the classic runtime's, bridged.
#[derive(Clone, Copy)]
pub struct Fallback {
    /// The function for a name, if the other registry has one to show here.
    pub get: fn(&str) -> Option<ObjectRef>,
    /// The names it shows here now.
    pub names: fn() -> Vec<String>,
}

struct Table {
    map: RwLock<HashMap<String, Entry>>,
    fallback: OnceLock<Fallback>,
}

/// The table, and the registration of the built-in globals the face installed.
static TABLE: Passive<Table, fn(&mut Builder)> = Passive::new();

fn built_ins(register: fn(&mut Builder)) -> Builder {
    let mut b = Builder { map: HashMap::new(), fallback: None };
    register(&mut b);
    b
}

fn table() -> &'static Table {
    TABLE.get(|register| {
        let b = register.map_or_else(|| Builder { map: HashMap::new(), fallback: None }, built_ins);
        let fallback = OnceLock::new();
        if let Some(f) = b.fallback {
            let _ = fallback.set(f);
        }
        Table { map: RwLock::new(b.map), fallback }
    })
}

/// Installs the registration of the built-in globals (once; later calls are ignored): they are
/// added when the table starts, or now if it has (a name registered by then keeps its function).
pub fn install_builtins(register: fn(&mut Builder)) {
    TABLE.install(register, |t, register| {
        let b = built_ins(register);
        if let Some(f) = b.fallback {
            let _ = t.fallback.set(f);
        }
        let mut m = t.map.write();
        for (name, e) in b.map {
            m.entry(name).or_insert(e);
        }
    });
}

/// Collects the library's own globals at start-up.
pub struct Builder {
    map: HashMap<String, Entry>,
    fallback: Option<Fallback>,
}

impl Builder {
    /// Whether a global of this name was added.
    pub fn has(&self, name: &str) -> bool {
        self.map.contains_key(name)
    }
    /// The function added under `name`.
    pub fn get(&self, name: &str) -> Option<ObjectRef> {
        self.map.get(name).map(|e| e.func.clone())
    }
    /// Sets where names the table does not hold are looked up, live (see [`Fallback`]).
    pub fn fallback(&mut self, f: Fallback) -> &mut Self {
        self.fallback = Some(f);
        self
    }
    /// Adds a global made of a Rust closure.
    pub fn add(
        &mut self,
        name: &str,
        f: impl Fn(&[super::TVMFFIAny]) -> FfiResult<Any> + Send + Sync + 'static,
    ) -> &mut Self {
        self.map.insert(name.into(), Entry { func: super::function::from_fn(f), metadata: None });
        self
    }
}

/// Sets a global function.
pub fn set(name: &str, func: ObjectRef, allow_override: bool, metadata: Option<String>) -> FfiResult<()> {
    if func.type_index() != ti::FUNCTION {
        return Err(FfiError::type_error(format!("global `{name}` must be a function")));
    }
    // Asked before the lock: the fallback reads another registry.
    let shown_by_fallback = !allow_override && fallback_get(name).is_some();
    let old = {
        let mut t = table().map.write();
        if !allow_override && (t.contains_key(name) || shown_by_fallback) {
            return Err(FfiError::runtime(format!("Global Function `{name}` is already registered")));
        }
        t.insert(name.into(), Entry { func, metadata })
    };
    drop(old);
    Ok(())
}

fn fallback_get(name: &str) -> Option<ObjectRef> {
    table().fallback.get().and_then(|f| (f.get)(name))
}

/// Gets a global function: the table's, else the fallback's.
pub fn get(name: &str) -> Option<ObjectRef> {
    let found = table().map.read().get(name).map(|e| e.func.clone());
    found.or_else(|| fallback_get(name))
}

/// A global's metadata.
pub fn metadata(name: &str) -> Option<String> {
    table().map.read().get(name).and_then(|e| e.metadata.clone())
}

/// Removes a global of the table; whether it was there (the fallback's are its own to remove).
pub fn remove(name: &str) -> bool {
    let old = table().map.write().remove(name);
    old.is_some()
}

/// All global names: the table's and the fallback's.
pub fn names() -> Vec<String> {
    let mut v: Vec<String> = table().map.read().keys().cloned().collect();
    if let Some(f) = table().fallback.get() {
        v.extend((f.names)());
    }
    v.sort();
    v.dedup();
    v
}
