//! The globals that TVM's C++ runtime API (the header-only C++ in `include/tvm/runtime/*.h`)
//! needs from this runtime beyond the C API. The library exports no C++ symbols: the headers
//! implement TVM's classes inline over the C API and these few globals, registered here like
//! any user's functions.
//!
//! * `runtime.ModuleFromPackedFunc(type_key: str, dispatch: PackedFunc) -> Module`: a module
//!   whose behaviour is given by one callback, so that a C++ `ModuleNode` subclass (or any
//!   foreign module) lives in this runtime's module tree. The module calls
//!   - `dispatch("get_function", name) -> PackedFunc | None` for its own functions (imports
//!     are this runtime's, searched after it),
//!   - `dispatch("save_to_file", path, format)`,
//!   - `dispatch("save_to_binary") -> bytes` (its `__tvm_dev_mblob` entry),
//!   - `dispatch("get_source", format) -> str`.
//!
//!   The callback owns whatever the module is made of (the C++ node); it is released when the
//!   module is.
//! * `runtime.ObjectGetOrAllocTypeIndex(key: str, static_index: int, parent_index: int,
//!   num_child_slots: int, child_slots_can_overflow: int) -> int`: TVM's
//!   `Object::GetOrAllocRuntimeTypeIndex`, for C++ object types: the index of `key`, registered
//!   under `parent_index` if new (`static_index` -1 or 9, TVM v0.8's `kDynamic`; another value
//!   is only accepted for a key the runtime has). Child slots are not reserved (the headers
//!   never decide derivation by index ranges, they ask `TVMObjectDerivedFrom`).
//! * (`NDArray::CreateView` uses `runtime.TVMArrayCreateView` of `crate::compat`.)
//! * `runtime.ModuleSaveToBinary(mod: Module) -> bytes`: `ModuleNode::SaveToBinary` of a module
//!   of this runtime.
//! * `runtime.EnvCheckSignals()`: `tvm::runtime::EnvCheckSignals`: fails with the "frontend
//!   error pending" status (-2) when the frontend's registered signal check reports one.

use crate::error::{Error, Result};
use crate::function::PackedFunc;
use crate::module::{Module, ModuleNode};
use crate::object::{self, index};
use crate::registry::Registrar;
use crate::value::{code_name, Args, Value};
use std::any::Any;

/// A module made of a dispatch callback (`runtime.ModuleFromPackedFunc`).
struct DispatchModule {
    type_key: String,
    dispatch: PackedFunc,
}

impl DispatchModule {
    fn call(&self, op: &str, rest: &[Value]) -> Result<Value> {
        let mut args = Vec::with_capacity(rest.len() + 1);
        args.push(Value::str(op));
        args.extend_from_slice(rest);
        self.dispatch.call(&args)
    }
}

impl ModuleNode for DispatchModule {
    fn type_key(&self) -> &str {
        &self.type_key
    }

    fn get_function(&self, name: &str, _this: &Module) -> Result<Option<PackedFunc>> {
        match self.call("get_function", &[Value::str(name)])? {
            Value::Func(f) => Ok(Some(*f)),
            Value::Null => Ok(None),
            other => Err(Error::type_error(format!(
                "Module[{}]: get_function returned {} instead of a function or None",
                self.type_key,
                code_name(other.type_code())
            ))),
        }
    }

    fn save_to_file(&self, path: &str, format: &str) -> Result<()> {
        self.call("save_to_file", &[Value::str(path), Value::str(format)]).map(drop)
    }

    fn save_to_binary(&self) -> Result<Vec<u8>> {
        match self.call("save_to_binary", &[])? {
            Value::Bytes(b) => Ok(*b),
            Value::Str(s) => Ok(s.into_bytes()),
            other => Err(Error::type_error(format!(
                "Module[{}]: save_to_binary returned {} instead of bytes",
                self.type_key,
                code_name(other.type_code())
            ))),
        }
    }

    fn get_source(&self, format: &str) -> Result<String> {
        self.call("get_source", &[Value::str(format)])?
            .as_str()
            .ok_or_else(|| Error::type_error(format!("Module[{}]: get_source did not return a string", self.type_key)))
    }

    fn as_any(&self) -> &dyn Any {
        self
    }
}

fn int_arg(a: &Args<'_>, i: usize, what: &str) -> Result<u32> {
    let v = a.i64(i)?;
    u32::try_from(v).map_err(|_| Error::value(format!("{what} {v} is out of range")))
}

fn get_or_alloc_type_index(a: &Args<'_>) -> Result<Value> {
    a.expect_len("runtime.ObjectGetOrAllocTypeIndex", 5)?;
    let key = a.string(0)?;
    // A static index is only a claim about a key the runtime already has; -1 (or TVM v0.8's
    // kDynamic) asks for a new index.
    let static_index = a.i64(1)?;
    let parent = int_arg(a, 2, "parent type index")?;
    // Arguments 3 and 4 (child slots) only tune TVM's index allocation; see the module doc.
    a.i64(3)?;
    a.i64(4)?;
    if key.is_empty() {
        return Err(Error::value("an object type key must not be empty"));
    }
    if let Ok(i) = object::type_key2index(&key) {
        return Ok(Value::Int(i64::from(i)));
    }
    if key == "runtime.Object" {
        return Ok(Value::Int(i64::from(index::ROOT)));
    }
    if static_index >= 0 && static_index != i64::from(index::DYNAMIC) {
        return Err(Error::value(format!(
            "type {key} claims static type index {static_index}, which this runtime does not know"
        )));
    }
    let parent_key = object::type_index2key(parent)?;
    Ok(Value::Int(i64::from(object::register_type(&key, &parent_key))))
}

fn module_arg(a: &Args<'_>, i: usize) -> Result<Module> {
    a.module(i)?.ok_or_else(|| Error::value(format!("argument {i}: expected a module, got None")))
}

/// Registers the globals.
pub fn register(r: &mut Registrar<'_>) {
    r.func("runtime.ModuleFromPackedFunc", |a| {
        a.expect_len("runtime.ModuleFromPackedFunc", 2)?;
        let type_key = a.string(0)?;
        let dispatch =
            a.func(1)?.ok_or_else(|| Error::value("runtime.ModuleFromPackedFunc: the dispatch function is None"))?;
        Ok(Value::Module(Module::new(DispatchModule { type_key, dispatch })))
    });
    r.func("runtime.ObjectGetOrAllocTypeIndex", get_or_alloc_type_index);
    r.func("runtime.ModuleSaveToBinary", |a| {
        a.expect_len("runtime.ModuleSaveToBinary", 1)?;
        Ok(Value::bytes(module_arg(a, 0)?.node().save_to_binary()?))
    });
    r.func("runtime.EnvCheckSignals", |_| crate::backend_env::check_signals().map(|()| Value::Null));
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::registry;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;

    fn global(name: &str, args: &[Value]) -> Result<Value> {
        registry::get_required(name)?.call(args)
    }

    /// Counts how often it is dropped (the dispatch callback's resource).
    struct Drops(Arc<AtomicUsize>);
    impl Drop for Drops {
        fn drop(&mut self) {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }

    #[test]
    fn dispatch_module_calls_back_and_releases_its_callback() {
        let dropped = Arc::new(AtomicUsize::new(0));
        let keep = Drops(dropped.clone());
        let dispatch = PackedFunc::from_fn(move |a| {
            let _ = &keep;
            match a.string(0)?.as_str() {
                "get_function" if a.string(1)? == "answer" => {
                    Ok(Value::func(PackedFunc::from_fn(|_| Ok(Value::Int(42)))))
                }
                "get_function" => Ok(Value::Null),
                "get_source" => Ok(Value::str(format!("source:{}", a.string(1)?))),
                "save_to_binary" => Ok(Value::bytes(vec![1, 2, 3])),
                "save_to_file" => Err(Error::value(format!("cannot save {}", a.string(1)?))),
                op => Err(Error::value(format!("unknown op {op}"))),
            }
        });
        let m = match global("runtime.ModuleFromPackedFunc", &[Value::str("cpp_test"), Value::func(dispatch)]).unwrap()
        {
            Value::Module(m) => m,
            other => panic!("not a module: {other:?}"),
        };
        assert_eq!(m.type_key(), "cpp_test");
        let f = m.get_function("answer", false).unwrap().unwrap();
        assert!(matches!(f.call(&[]).unwrap(), Value::Int(42)));
        assert!(m.get_function("missing", true).unwrap().is_none());
        assert_eq!(m.node().get_source("asm").unwrap(), "source:asm");
        let bin = global("runtime.ModuleSaveToBinary", &[Value::Module(m.clone())]).unwrap();
        assert!(matches!(bin, Value::Bytes(b) if *b == [1, 2, 3]));
        let e = global("runtime.ModuleSaveToFile", &[Value::Module(m.clone()), Value::str("p"), Value::str("")]);
        assert_eq!(e.unwrap_err().to_string(), "ValueError: cannot save p");
        assert_eq!(dropped.load(Ordering::SeqCst), 0);
        drop(m);
        assert_eq!(dropped.load(Ordering::SeqCst), 1);

        let bad = PackedFunc::from_fn(|_| Ok(Value::Int(1)));
        let m = match global("runtime.ModuleFromPackedFunc", &[Value::str("bad"), Value::func(bad)]).unwrap() {
            Value::Module(m) => m,
            other => panic!("not a module: {other:?}"),
        };
        let e = m.get_function("x", false).unwrap_err().to_string();
        assert!(e.contains("instead of a function"), "{e}");
        assert!(global("runtime.ModuleFromPackedFunc", &[Value::str("k"), Value::Null]).is_err());
    }

    #[test]
    fn type_indices_for_cpp_types() {
        // u32::MAX stands for -1 (dynamic).
        let alloc = |key: &str, st: u32, parent: u32| {
            let st = if st == u32::MAX { -1 } else { i64::from(st) };
            global(
                "runtime.ObjectGetOrAllocTypeIndex",
                &[Value::str(key), Value::Int(st), Value::Int(parent.into()), Value::Int(0), Value::Int(1)],
            )
        };
        let base = match alloc("test.cpp.Base", u32::MAX, 0).unwrap() {
            Value::Int(i) => i as u32,
            v => panic!("{v:?}"),
        };
        let child = match alloc("test.cpp.Child", index::DYNAMIC, base).unwrap() {
            Value::Int(i) => i as u32,
            v => panic!("{v:?}"),
        };
        assert!(child > base);
        assert!(object::derived_from(child, base).unwrap());
        assert!(!object::derived_from(base, child).unwrap());
        assert!(matches!(alloc("test.cpp.Child", index::DYNAMIC, 0).unwrap(), Value::Int(i) if i as u32 == child));
        assert!(matches!(alloc("runtime.String", index::STRING, 0).unwrap(), Value::Int(3)));
        assert!(matches!(alloc("runtime.Object", 0, 0).unwrap(), Value::Int(0)));
        assert!(
            matches!(alloc("runtime.Closure", index::DYNAMIC, 0).unwrap(), Value::Int(i) if i as u32 == index::CLOSURE)
        );
        assert!(alloc("test.cpp.Static", 5, 0).is_err());
        assert!(alloc("test.cpp.Orphan", index::DYNAMIC, 1_000_000).is_err());
        assert!(alloc("", index::DYNAMIC, 0).is_err());
    }

    #[test]
    fn env_check_signals_without_a_frontend() {
        assert!(matches!(global("runtime.EnvCheckSignals", &[]).unwrap(), Value::Null));
    }
}
