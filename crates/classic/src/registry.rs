//! The global function registry (`TVMFuncRegisterGlobal`, `TVMFuncGetGlobal`, ...).
//!
//! The registry is passive: it holds what it is given. The runtime's own globals (see
//! [`crate::globals`]) are chosen by the library's face, which hands their registration to
//! [`install_builtins`] when the library loads; they go in when the registry starts (or at
//! once, should something have started it before: a static initializer that ran first). Safe under concurrent use: a `parking_lot::RwLock`
//! guards the map and no lock is held while a function runs.
//!
//! `TVMBackendGetFuncFromEnv` hands generated code a borrowed pointer to the registry's own
//! entry, which it caches for the life of the process, so an entry that was handed out that way
//! stays valid (and keeps calling the old function) after it is overridden or removed, as in TVM
//! v0.8: it moves to a list of retired entries that is never freed. Other entries are freed.

use crate::error::{Error, Result};
use crate::function::PackedFunc;
use crate::value::Value;
use parking_lot::{Mutex, RwLock};
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use tvm_runtime_core::passive::Passive;

/// A registered function; boxed so that its address is stable while it is in the map.
struct Entry {
    func: Box<PackedFunc>,
    borrowed: AtomicBool,
}

impl Entry {
    fn new(f: PackedFunc) -> Entry {
        Entry { func: Box::new(f), borrowed: AtomicBool::new(false) }
    }
}

type Map = HashMap<String, Entry>;

/// Entries replaced or removed after a borrowed pointer to them was handed out.
#[expect(clippy::vec_box, reason = "the boxes keep the addresses handed to generated code")]
static RETIRED: Mutex<Vec<Box<PackedFunc>>> = Mutex::new(Vec::new());

fn retire(old: Option<Entry>) {
    if let Some(e) = old {
        if e.borrowed.load(Ordering::Acquire) {
            RETIRED.lock().push(e.func);
        }
    }
}

/// The registry, and the registration of the built-in globals the face installed.
static REGISTRY: Passive<RwLock<Map>, fn(&mut Registrar<'_>)> = Passive::new();

fn registry() -> &'static RwLock<Map> {
    REGISTRY.get(|built_ins| {
        crate::value::dtype::install_custom_types(crate::value::dtype::CustomTypes {
            name: custom_type_name,
            code: custom_type_code,
        });
        let mut m = Map::new();
        if let Some(register) = built_ins {
            register(&mut Registrar(&mut m));
        }
        RwLock::new(m)
    })
}

/// Installs the registration of the built-in globals (once; later calls are ignored): they are
/// added when the registry starts, or now if it has (a name registered by then keeps its
/// function).
pub fn install_builtins(register: fn(&mut Registrar<'_>)) {
    REGISTRY.install(register, |r, register| {
        let mut fresh = Map::new();
        register(&mut Registrar(&mut fresh));
        let mut m = r.write();
        for (name, e) in fresh {
            m.entry(name).or_insert(e);
        }
    });
}

/// Registration target handed to the built-in registration functions.
pub struct Registrar<'a>(&'a mut Map);

impl Registrar<'_> {
    /// Registers a built-in global.
    pub fn add(&mut self, name: &str, f: PackedFunc) {
        self.0.insert(name.to_owned(), Entry::new(f));
    }
    /// Registers a built-in global made from a closure returning its value.
    pub fn func(&mut self, name: &str, f: impl Fn(&crate::value::Args<'_>) -> Result<Value> + Send + Sync + 'static) {
        self.add(name, PackedFunc::from_fn(f));
    }
}

/// Registers `f` under `name`; an existing name is an error unless `override_` is set.
pub fn register(name: &str, f: PackedFunc, override_: bool) -> Result<()> {
    let mut m = registry().write();
    if !override_ && m.contains_key(name) {
        return Err(Error::tvm(format!("Global PackedFunc {name} is already registered")));
    }
    let old = m.insert(name.to_owned(), Entry::new(f));
    drop(m);
    retire(old);
    Ok(())
}

/// The function registered under `name`.
pub fn get(name: &str) -> Option<PackedFunc> {
    registry().read().get(name).map(|e| (*e.func).clone())
}

/// The registry's own entry for `name`: valid for the life of the process, even after the name
/// is overridden or removed.
pub(crate) fn get_static(name: &str) -> Option<&'static PackedFunc> {
    let m = registry().read();
    let e = m.get(name)?;
    e.borrowed.store(true, Ordering::Release);
    let p: *const PackedFunc = &*e.func;
    // SAFETY: a borrowed entry's box is never freed: while in the map it stays put, and once
    // replaced or removed it moves (as a box, without moving its contents) to RETIRED forever.
    Some(unsafe { &*p })
}

/// The function registered under `name`, or an error naming it.
pub fn get_required(name: &str) -> Result<PackedFunc> {
    get(name).ok_or_else(|| Error::tvm(format!("Function {name} not found in the global registry")))
}

/// Whether `name` is registered.
pub fn contains(name: &str) -> bool {
    registry().read().contains_key(name)
}

/// Removes `name` if present.
pub fn remove(name: &str) -> bool {
    let old = registry().write().remove(name);
    let found = old.is_some();
    retire(old);
    found
}

/// All registered names.
pub fn list_names() -> Vec<String> {
    registry().read().keys().cloned().collect()
}

/// The name of custom data type `code` (through the compiler's `runtime._datatype_get_type_name`).
pub(crate) fn custom_type_name(code: u8) -> Result<String> {
    let f = get("runtime._datatype_get_type_name")
        .ok_or_else(|| Error::tvm("Function runtime._datatype_get_type_name not found"))?;
    f.call(&[Value::Int(i64::from(code))])?
        .as_str()
        .ok_or_else(|| Error::tvm("runtime._datatype_get_type_name did not return a string"))
}

/// The code of custom data type `name` (through the compiler's `runtime._datatype_get_type_code`).
pub(crate) fn custom_type_code(name: &str) -> Result<u8> {
    let f = get("runtime._datatype_get_type_code")
        .ok_or_else(|| Error::tvm("Function runtime._datatype_get_type_code not found"))?;
    match f.call(&[Value::str(name.to_owned())])? {
        Value::Int(c) => u8::try_from(c).map_err(|_| Error::value(format!("custom type code {c} out of range"))),
        _ => Err(Error::tvm("runtime._datatype_get_type_code did not return an int")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn register_get_override_remove() {
        let f = PackedFunc::from_fn(|_| Ok(Value::Int(1)));
        let g = PackedFunc::from_fn(|_| Ok(Value::Int(2)));
        register("test.registry.f", f.clone(), false).unwrap();
        let e = register("test.registry.f", g.clone(), false).unwrap_err();
        assert!(e.to_string().contains("already registered"));
        let old = get("test.registry.f").unwrap();
        register("test.registry.f", g, true).unwrap();
        assert!(matches!(get("test.registry.f").unwrap().call(&[]).unwrap(), Value::Int(2)));
        assert!(matches!(old.call(&[]).unwrap(), Value::Int(1)));
        assert!(list_names().iter().any(|n| n == "test.registry.f"));
        let borrowed = get_static("test.registry.f").unwrap();
        assert!(remove("test.registry.f"));
        assert!(!remove("test.registry.f"));
        assert!(get("test.registry.f").is_none());
        assert!(matches!(borrowed.call(&[]).unwrap(), Value::Int(2)));
    }

    #[test]
    fn concurrent_use() {
        let threads: Vec<_> = (0..4)
            .map(|t| {
                std::thread::spawn(move || {
                    for i in 0..200 {
                        let name = format!("test.conc.{t}.{i}");
                        register(&name, PackedFunc::from_fn(move |_| Ok(Value::Int(i))), false).unwrap();
                        assert!(matches!(get(&name).unwrap().call(&[]).unwrap(), Value::Int(x) if x == i));
                        assert!(get("runtime.String").is_some());
                        remove(&name);
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
    }

    #[test]
    fn custom_data_types_are_named_by_the_registered_globals() {
        use crate::value::dtype;
        // What TVM's compiler registers for `custom[posit]` (code 131).
        let name = PackedFunc::from_fn(|a| match a.i64(0)? {
            131 => Ok(Value::str("posit")),
            c => Err(Error::value(format!("no custom type {c}"))),
        });
        let code = PackedFunc::from_fn(|a| match a.string(0)?.as_str() {
            "posit" => Ok(Value::Int(131)),
            n => Err(Error::value(format!("no custom type {n}"))),
        });
        register("runtime._datatype_get_type_name", name, true).unwrap();
        register("runtime._datatype_get_type_code", code, true).unwrap();
        let t = dtype::parse("custom[posit]16x4").unwrap();
        assert_eq!((t.code, t.bits, t.lanes), (131, 16, 4));
        assert_eq!(dtype::format(t).unwrap(), "custom[posit]16x4");
        assert!(dtype::parse("custom[unum]8").unwrap_err().to_string().contains("no custom type unum"));
        assert!(dtype::format(dtype::dtype(140, 8, 1)).is_err());
        remove("runtime._datatype_get_type_name");
        remove("runtime._datatype_get_type_code");
        let e = dtype::format(t).unwrap_err().to_string();
        assert!(e.contains("runtime._datatype_get_type_name not found"), "{e}");
    }
}
