//! The global function table (`TVMFFIFunctionSetGlobal` / `GetGlobal`), shared by C, C++ and
//! Python callers. The library's own `ffi.*` functions are put in on first use.

use super::any::Any;
use super::error::{FfiError, FfiResult};
use super::object::ObjectRef;
use super::ti;
use parking_lot::RwLock;
use std::collections::HashMap;
use std::sync::OnceLock;

struct Entry {
    func: ObjectRef,
    metadata: Option<String>,
}

fn table() -> &'static RwLock<HashMap<String, Entry>> {
    static T: OnceLock<RwLock<HashMap<String, Entry>>> = OnceLock::new();
    T.get_or_init(|| {
        let mut b = Builder { map: HashMap::new() };
        super::globals::register_all(&mut b);
        RwLock::new(b.map)
    })
}

/// Collects the library's own globals at start-up.
pub struct Builder {
    map: HashMap<String, Entry>,
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
    /// Adds a global made of a Rust closure.
    pub fn add(
        &mut self,
        name: &str,
        f: impl Fn(&[super::TVMFFIAny]) -> FfiResult<Any> + Send + Sync + 'static,
    ) -> &mut Self {
        self.map.insert(name.into(), Entry { func: super::function::from_fn(f), metadata: None });
        self
    }
    /// Adds a global with its metadata (JSON text).
    pub fn add_with_metadata(
        &mut self,
        name: &str,
        metadata: &str,
        f: impl Fn(&[super::TVMFFIAny]) -> FfiResult<Any> + Send + Sync + 'static,
    ) -> &mut Self {
        self.map.insert(name.into(), Entry { func: super::function::from_fn(f), metadata: Some(metadata.into()) });
        self
    }
}

/// Sets a global function.
pub fn set(name: &str, func: ObjectRef, allow_override: bool, metadata: Option<String>) -> FfiResult<()> {
    if func.type_index() != ti::FUNCTION {
        return Err(FfiError::type_error(format!("global `{name}` must be a function")));
    }
    let old = {
        let mut t = table().write();
        if !allow_override && t.contains_key(name) {
            return Err(FfiError::runtime(format!("Global Function `{name}` is already registered")));
        }
        t.insert(name.into(), Entry { func, metadata })
    };
    drop(old);
    Ok(())
}

/// Gets a global function.
pub fn get(name: &str) -> Option<ObjectRef> {
    table().read().get(name).map(|e| e.func.clone())
}

/// A global's metadata.
pub fn metadata(name: &str) -> Option<String> {
    table().read().get(name).and_then(|e| e.metadata.clone())
}

/// Removes a global; whether it was there.
pub fn remove(name: &str) -> bool {
    let old = table().write().remove(name);
    old.is_some()
}

/// All global names.
pub fn names() -> Vec<String> {
    let mut v: Vec<String> = table().read().keys().cloned().collect();
    v.sort();
    v
}
