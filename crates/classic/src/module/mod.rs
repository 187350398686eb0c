//! The module system: the [`ModuleNode`] trait every module kind implements, the module object
//! (type index 1) with its import list, and loading by format through the registry's
//! `runtime.module.loadfile_<fmt>` loaders.

pub mod blob;
// The formats that need no object model are the core's, under the paths they always had.
pub use tvm_runtime_core::formats::{elf, import_tree, kinds, library_bin};
pub mod device_code;
pub mod dso;
pub mod library;
pub mod loaders;
pub mod memory;
pub mod system_lib;

use crate::error::{Error, Result};
use crate::function::PackedFunc;
use crate::object::{index, ObjectBody, ObjectRef};
use crate::registry;
use crate::value::Value;
use parking_lot::{Mutex, RwLock};
use std::any::Any;
use std::collections::HashMap;
use std::ffi::c_void;

/// One kind of module (library, graph executor, CUDA, ...).
pub trait ModuleNode: Send + Sync + 'static {
    /// The module kind (`library`, `GraphExecutor`, ...); selects the blob loader.
    fn type_key(&self) -> &str;

    /// Looks up a function of this module itself (not its imports). `this` is the module
    /// object, which a returned function should keep alive.
    fn get_function(&self, name: &str, this: &Module) -> Result<Option<PackedFunc>>;

    /// Writes the module to a file (`runtime.ModuleSaveToFile`).
    fn save_to_file(&self, _path: &str, _format: &str) -> Result<()> {
        Err(Error::tvm(format!("Module[{}] does not support SaveToFile", self.type_key())))
    }

    /// Serializes the module for a `__tvm_dev_mblob` entry.
    fn save_to_binary(&self) -> Result<Vec<u8>> {
        Err(Error::tvm(format!("Module[{}] does not support SaveToBinary", self.type_key())))
    }

    /// The module's source (`runtime.ModuleGetSource`).
    fn get_source(&self, _format: &str) -> Result<String> {
        Err(Error::tvm(format!("Module[{}] does not support GetSource", self.type_key())))
    }

    /// For downcasting to the concrete module kind.
    fn as_any(&self) -> &dyn Any;
}

/// The body of a module object.
pub struct ModuleObj {
    node: Box<dyn ModuleNode>,
    imports: RwLock<Vec<Module>>,
    /// Functions found in the imports by `TVMBackendGetFuncFromEnv`; boxed so that the
    /// borrowed handles given to generated code stay put while the module lives.
    env_cache: Mutex<HashMap<String, Box<PackedFunc>>>,
}

impl ObjectBody for ModuleObj {
    fn type_index() -> u32 {
        index::MODULE
    }
}

/// A counted reference to a module.
#[derive(Clone, Debug)]
pub struct Module(ObjectRef);

impl Module {
    /// Makes a module object from a module kind.
    pub fn new(node: impl ModuleNode) -> Module {
        Module(ObjectRef::new(ModuleObj {
            node: Box::new(node),
            imports: RwLock::new(Vec::new()),
            env_cache: Mutex::new(HashMap::new()),
        }))
    }

    /// Views an object as a module (type index 1).
    pub fn from_object(obj: ObjectRef) -> Option<Module> {
        obj.downcast::<ModuleObj>().is_some().then_some(Module(obj))
    }

    fn obj(&self) -> &ModuleObj {
        // The constructors only make `Module` from objects with a `ModuleObj` body.
        self.0.downcast::<ModuleObj>().unwrap_or_else(|| unreachable!("module object without module body"))
    }

    /// The object.
    pub fn as_object(&self) -> &ObjectRef {
        &self.0
    }

    /// The object, by value.
    pub fn into_object(self) -> ObjectRef {
        self.0
    }

    /// The module kind.
    pub fn node(&self) -> &dyn ModuleNode {
        &*self.obj().node
    }

    /// The module's type key.
    pub fn type_key(&self) -> &str {
        self.node().type_key()
    }

    /// The concrete module kind, if it is `T`.
    pub fn downcast<T: 'static>(&self) -> Option<&T> {
        self.node().as_any().downcast_ref::<T>()
    }

    /// A function of this module whose node is a `T`, made from one of its methods: the function
    /// keeps the module alive and finds the node at each call (`get_function`'s usual shape).
    pub fn method<T: 'static>(
        &self,
        f: impl Fn(&T, &Module, &crate::value::Args<'_>) -> Result<Value> + Send + Sync + 'static,
    ) -> PackedFunc {
        let m = self.clone();
        PackedFunc::from_fn(move |args| match m.downcast::<T>() {
            Some(node) => f(node, &m, args),
            None => {
                Err(Error::internal(format!("{} module expected, not {}", std::any::type_name::<T>(), m.type_key())))
            }
        })
    }

    /// Looks up `name` in this module, then (if asked) in its imports, depth first in order.
    pub fn get_function(&self, name: &str, query_imports: bool) -> Result<Option<PackedFunc>> {
        if let Some(f) = self.node().get_function(name, self)? {
            return Ok(Some(f));
        }
        if query_imports {
            for m in self.imports() {
                if let Some(f) = m.get_function(name, true)? {
                    return Ok(Some(f));
                }
            }
        }
        Ok(None)
    }

    /// The modules this one imports.
    pub fn imports(&self) -> Vec<Module> {
        self.obj().imports.read().clone()
    }

    /// Removes every import (`runtime.ModuleClearImports`, TVM v0.9+); cached environment
    /// lookups stay valid, since generated code may still hold them.
    pub fn clear_imports(&self) {
        self.obj().imports.write().clear();
    }

    /// Appends `dep` to the imports; fails if that would make a cycle.
    pub fn import(&self, dep: Module) -> Result<()> {
        let mut stack = vec![dep.clone()];
        while let Some(m) = stack.pop() {
            if m.0.ptr_eq(&self.0) {
                return Err(Error::tvm("Cyclic dependency detected during import"));
            }
            stack.extend(m.imports());
        }
        self.obj().imports.write().push(dep);
        Ok(())
    }

    /// `TVMBackendGetFuncFromEnv` for this module: its imports (not itself), each searched with
    /// its own imports, in order; hits are cached in the module. Returns a borrowed handle.
    pub(crate) fn env_function(&self, name: &str) -> Result<Option<*mut c_void>> {
        let obj = self.obj();
        if let Some(f) = obj.env_cache.lock().get(name) {
            return Ok(Some(f.as_handle()));
        }
        for m in self.imports() {
            if let Some(f) = m.get_function(name, true)? {
                let mut cache = obj.env_cache.lock();
                let entry = cache.entry(name.to_owned()).or_insert_with(|| Box::new(f));
                return Ok(Some(entry.as_handle()));
            }
        }
        Ok(None)
    }

    /// Whether two references name the same module.
    pub fn ptr_eq(&self, other: &Module) -> bool {
        self.0.ptr_eq(&other.0)
    }
}

/// `TVMBackendGetFuncFromEnv`: the module's imports (when there is a module), then the global
/// registry. The handle is borrowed and stays valid while the module lives (registry entries:
/// forever).
pub fn env_lookup(module: Option<&Module>, name: &str) -> Result<*mut c_void> {
    if let Some(m) = module {
        if let Some(h) = m.env_function(name)? {
            return Ok(h);
        }
    }
    match registry::get_static(name) {
        Some(f) => Ok(f.as_handle()),
        None => Err(Error::tvm(format!(
            "Cannot find function {name} in the imported modules or global registry. \
             If this involves ops from a contrib library like cuDNN, ensure TVM was built with the relevant library."
        ))),
    }
}

/// `TVMModLoadFromFile` / `runtime.ModuleLoadFromFile`: format from the argument or the file's
/// extension, dispatched to `runtime.module.loadfile_<fmt>`.
pub fn load_from_file(path: &str, format: &str) -> Result<Module> {
    let mut fmt = if format.is_empty() {
        match path.rfind('.') {
            Some(p) if !path[p + 1..].contains('/') => path[p + 1..].to_owned(),
            _ => return Err(Error::value(format!("Cannot deduce format of file {path}"))),
        }
    } else {
        format.to_owned()
    };
    if matches!(fmt.as_str(), "dll" | "dylib" | "dso") {
        fmt = "so".into();
    }
    let loader_name = format!("runtime.module.loadfile_{fmt}");
    let loader = registry::get(&loader_name).ok_or_else(|| {
        Error::tvm(format!(
            "Loader for `.{fmt}` files is not registered, resolved to ({loader_name}) in the global registry. \
             Ensure that you have loaded the correct runtime code, and that you are on the correct hardware architecture."
        ))
    })?;
    match loader.call(&[Value::str(path.to_owned()), Value::str(format.to_owned())])? {
        Value::Module(m) => Ok(m),
        other => Err(Error::tvm(format!(
            "{loader_name} returned {} instead of a module",
            crate::value::code_name(other.type_code())
        ))),
    }
}

/// A module made of given functions (`runtime.ModuleFromFunctions`): lets code outside the
/// runtime (a C blob loader, a test) make a module of any type key.
pub struct FunctionModule {
    type_key: String,
    funcs: HashMap<String, PackedFunc>,
}

impl FunctionModule {
    /// An empty module of kind `type_key`.
    pub fn new(type_key: impl Into<String>) -> FunctionModule {
        FunctionModule { type_key: type_key.into(), funcs: HashMap::new() }
    }

    /// Adds (or replaces) function `name`.
    pub fn add(&mut self, name: impl Into<String>, f: PackedFunc) -> &mut Self {
        self.funcs.insert(name.into(), f);
        self
    }

    /// The names of its functions, sorted.
    pub fn names(&self) -> Vec<String> {
        let mut v: Vec<String> = self.funcs.keys().cloned().collect();
        v.sort_unstable(); // map keys are unique
        v
    }
}

impl ModuleNode for FunctionModule {
    fn type_key(&self) -> &str {
        &self.type_key
    }

    fn get_function(&self, name: &str, _this: &Module) -> Result<Option<PackedFunc>> {
        Ok(self.funcs.get(name).cloned())
    }

    fn as_any(&self) -> &dyn Any {
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Named(&'static str);
    impl ModuleNode for Named {
        fn type_key(&self) -> &str {
            self.0
        }
        fn get_function(&self, name: &str, this: &Module) -> Result<Option<PackedFunc>> {
            let key = self.0;
            let keep = this.clone();
            Ok((name == key).then(|| PackedFunc::from_fn(move |_| Ok(Value::str(keep.type_key().to_owned())))))
        }
        fn as_any(&self) -> &dyn Any {
            self
        }
    }

    #[test]
    fn imports_and_lookup() {
        let a = Module::new(Named("a"));
        let b = Module::new(Named("b"));
        let c = Module::new(Named("c"));
        a.import(b.clone()).unwrap();
        b.import(c.clone()).unwrap();
        assert!(c.import(a.clone()).unwrap_err().to_string().contains("Cyclic"));
        assert!(a.get_function("c", false).unwrap().is_none());
        let f = a.get_function("c", true).unwrap().unwrap();
        drop((a, b, c));
        assert!(matches!(f.call(&[]).unwrap(), Value::Str(s) if s.as_str() == "c"));
    }

    #[test]
    fn load_errors() {
        assert!(load_from_file("noext", "").unwrap_err().to_string().contains("Cannot deduce format"));
        let e = load_from_file("x.weird", "").unwrap_err().to_string();
        assert!(e.contains("runtime.module.loadfile_weird"), "{e}");
    }
}
