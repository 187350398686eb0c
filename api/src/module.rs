//! [`Module`]: a loaded model library and the modules it imports.

use crate::{Error, Function, Result};
use std::fmt;
use std::path::Path;
use tvm_runtime::executor::graph::{GraphExecutor as CoreExecutor, GraphExecutorFactory};
use tvm_runtime::module::library::LibraryModule;
use tvm_runtime::module::{self as core_module, FunctionModule, Module as CoreModule};

/// A module: a model library (`library`), a graph executor factory, a device code module
/// (`opencl`, `cuda`), an executor, ... with the modules it imports.
///
/// Cloning shares the module; a module (and the library it came from) stays loaded while any
/// clone, or any [`Function`] taken from it, lives. `Send + Sync`: modules may be used from any
/// thread.
#[derive(Clone)]
pub struct Module(pub(crate) CoreModule);

fn path_str(path: &Path) -> Result<&str> {
    path.to_str().ok_or_else(|| Error::value(format!("the path {} is not valid UTF-8", path.display())))
}

pub(crate) fn install_slots() -> Result<()> {
    // Model libraries call back into the runtime through pointer slots the loader fills; this
    // hands the loader the addresses of the runtime's C entry points (once).
    tvm_runtime::classic_api::slots::install()
}

impl Module {
    /// Loads a module file; the format comes from the extension (`.so` for libraries exported
    /// by TVM's `export_library`).
    pub fn load(path: impl AsRef<Path>) -> Result<Module> {
        Module::load_with_format(path, "")
    }

    /// Loads a module file of a given format (`so`, or a device format such as `cl`/`ptx` with
    /// its `.tvm_meta.json` beside it).
    pub fn load_with_format(path: impl AsRef<Path>, format: &str) -> Result<Module> {
        install_slots()?;
        let path = path.as_ref();
        if !path.exists() {
            return Err(Error::value(format!("{}: no such file", path.display())));
        }
        core_module::load_from_file(path_str(path)?, format).map(Module)
    }

    /// Loads a model library from its bytes (a whole exported `.so`), without writing it to a
    /// file (Linux: an anonymous `memfd` file; elsewhere an error). For models kept encrypted
    /// at rest: decrypt into memory, load from there.
    pub fn from_bytes(bytes: &[u8]) -> Result<Module> {
        Module::from_bytes_named(bytes, "bytes")
    }

    /// As [`Module::from_bytes`], naming the library `name` in messages.
    pub fn from_bytes_named(bytes: &[u8], name: &str) -> Result<Module> {
        install_slots()?;
        core_module::memory::load_from_bytes(bytes, name).map(Module)
    }

    /// The system library: the functions that objects built with `--system-lib` and linked
    /// into this program registered.
    pub fn system_lib() -> Result<Module> {
        install_slots()?;
        core_module::system_lib::system_lib().map(Module)
    }

    /// A module of kind `type_key` made of the given functions.
    pub fn from_functions(type_key: &str, functions: impl IntoIterator<Item = (String, Function)>) -> Module {
        let mut m = FunctionModule::new(type_key);
        for (name, f) in functions {
            m.add(name, f.0);
        }
        Module(CoreModule::new(m))
    }

    /// The module kind: `library`, `GraphExecutorFactory`, `GraphExecutor`, `opencl`, `cuda`,
    /// `metadata`, ...
    pub fn type_key(&self) -> &str {
        self.0.type_key()
    }

    /// The modules this one imports, in order.
    pub fn imports(&self) -> Vec<Module> {
        self.0.imports().into_iter().map(Module).collect()
    }

    /// Makes this module import `other` (its functions become reachable from this one's code).
    pub fn import(&self, other: &Module) -> Result<()> {
        self.0.import(other.0.clone())
    }

    /// The function `name` of this module itself, or an error naming the module kind.
    pub fn function(&self, name: &str) -> Result<Function> {
        self.get_function(name, false)?
            .ok_or_else(|| Error::attribute(format!("module of kind {} has no function {name}", self.type_key())))
    }

    /// The function `name`, searched in this module and, if `query_imports`, in its imports
    /// (depth first); `None` if absent.
    pub fn get_function(&self, name: &str, query_imports: bool) -> Result<Option<Function>> {
        Ok(self.0.get_function(name, query_imports)?.map(Function))
    }

    /// The names of this module's own functions, where the module kind can list them:
    /// libraries loaded from a file (their exported function symbols, read from the file),
    /// graph executor factories and executors, OpenCL and CUDA modules (their kernels), modules
    /// made of functions. `None` for other kinds.
    pub fn function_names(&self) -> Option<Vec<String>> {
        let m = &self.0;
        if let Some(lib) = m.downcast::<LibraryModule>() {
            return library_functions(Path::new(lib.dso()?.path()));
        }
        if let Some(f) = m.downcast::<GraphExecutorFactory>() {
            return Some(
                [f.module_name(), "get_graph_json", "debug_create", "remove_params"].map(str::to_owned).to_vec(),
            );
        }
        if let Some(e) = m.downcast::<CoreExecutor>() {
            let mut v: Vec<String> = EXECUTOR_FUNCTIONS.iter().map(|s| (*s).to_owned()).collect();
            if e.is_debug() {
                v.extend(DEBUG_FUNCTIONS.iter().map(|s| (*s).to_owned()));
            }
            return Some(v);
        }
        if let Some(f) = m.downcast::<FunctionModule>() {
            return Some(f.names());
        }
        if let Some(v) = self.other_function_names() {
            return Some(v);
        }
        if let Some(c) = m.downcast::<tvm_runtime::device::opencl::module::OpenClModule>() {
            return Some(c.fmap().keys().cloned().collect());
        }
        if let Some(c) = m.downcast::<tvm_runtime::device::cuda::module::CudaModule>() {
            return Some(c.fmap().keys().cloned().collect());
        }
        None
    }

    /// The functions of the AOT, VM and BYOC module kinds.
    fn other_function_names(&self) -> Option<Vec<String>> {
        use tvm_runtime::{aot, byoc, vm};
        let m = &self.0;
        let owned = |v: &[&str]| v.iter().map(|s| (*s).to_owned()).collect::<Vec<String>>();
        if let Some(f) = m.downcast::<aot::AotExecutorFactory>() {
            return Some(vec![f.module_name().to_owned(), "list_module_names".into(), "remove_params".into()]);
        }
        if m.downcast::<aot::AotExecutor>().is_some() {
            return Some(owned(AOT_EXECUTOR_FUNCTIONS));
        }
        if m.downcast::<aot::MetadataModule>().is_some() {
            return Some(owned(&["get_metadata"]));
        }
        if m.downcast::<vm::module::ExecutableModule>().is_some() {
            return Some(owned(VM_EXECUTABLE_FUNCTIONS));
        }
        if m.downcast::<vm::module::VirtualMachine>().is_some() {
            return Some(owned(VM_FUNCTIONS));
        }
        if m.downcast::<byoc::json::JsonModule>().is_some() {
            let sym = self.external_symbol()?;
            return Some(vec![sym.clone(), format!("__init_{sym}"), "get_symbol".into(), "get_const_vars".into()]);
        }
        if m.downcast::<byoc::metadata::MetadataModule>().is_some() {
            // Its functions are the offloaded regions' (found in its imports, each initialised
            // with its constants on first lookup) and the constants' map.
            let mut v: Vec<String> = self.imports().iter().filter_map(Module::external_symbol).collect();
            v.push("get_const_var_ndarray".into());
            return Some(v);
        }
        None
    }

    /// For an external (BYOC) runtime module such as `dnnl_json`: the symbol of the offloaded
    /// region it runs (`get_symbol`); `None` for other kinds.
    pub fn external_symbol(&self) -> Option<String> {
        self.0.downcast::<tvm_runtime::byoc::json::JsonModule>()?;
        match self.function("get_symbol").ok()?.call(()).ok()? {
            crate::Value::Str(s) => Some(s),
            _ => None,
        }
    }

    /// For an external (BYOC) runtime module: the names of the constants it is initialised with
    /// (`get_const_vars`); `None` for other kinds.
    pub fn external_const_vars(&self) -> Option<Vec<String>> {
        self.0.downcast::<tvm_runtime::byoc::json::JsonModule>()?;
        match self.function("get_const_vars").ok()?.call(()).ok()? {
            crate::Value::Object(o) => o
                .as_array()?
                .into_iter()
                .map(|v| match v {
                    crate::Value::Str(s) => Some(s),
                    _ => None,
                })
                .collect(),
            _ => None,
        }
    }

    /// For the `metadata` / `const_loader` module of a BYOC export: the constants it holds
    /// for the offloaded regions, by name, in stored order; `None` for other kinds.
    pub fn byoc_constants(&self) -> Option<Vec<(String, crate::NDArray)>> {
        self.0.downcast::<tvm_runtime::byoc::metadata::MetadataModule>()?;
        match self.function("get_const_var_ndarray").ok()?.call(()).ok()? {
            crate::Value::Object(o) => o
                .as_map()?
                .into_iter()
                .map(|(k, v)| match (k, v) {
                    (crate::Value::Str(k), crate::Value::NDArray(a)) => Some((k, a)),
                    _ => None,
                })
                .collect(),
            _ => None,
        }
    }

    /// The file a `library` module was loaded from (`<memory:NAME>` for one loaded from bytes);
    /// `None` for other kinds.
    pub fn library_path(&self) -> Option<String> {
        self.0.downcast::<LibraryModule>().and_then(|l| l.dso().map(|d| d.path().to_owned()))
    }

    /// The module's source code in `format` (`""` for its default), where it has one (device
    /// modules).
    pub fn source(&self, format: &str) -> Result<String> {
        self.0.node().get_source(format)
    }

    /// Whether two handles name the same module.
    pub fn same_module(&self, other: &Module) -> bool {
        self.0.ptr_eq(&other.0)
    }
}

impl fmt::Debug for Module {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Module({})", self.type_key())
    }
}

/// The functions of a graph executor.
const EXECUTOR_FUNCTIONS: &[&str] = &[
    "set_input",
    "set_input_zero_copy",
    "set_output_zero_copy",
    "get_output",
    "get_input",
    "get_num_outputs",
    "get_num_inputs",
    "get_input_index",
    "run",
    "run_from_inputs",
    "load_params",
    "share_params",
];

/// The functions of an AOT executor (TVM v0.18's `AotModule` calls them).
const AOT_EXECUTOR_FUNCTIONS: &[&str] = &[
    "set_input",
    "set_input_zero_copy",
    "set_output_zero_copy",
    "get_input",
    "get_output",
    "get_num_inputs",
    "get_num_outputs",
    "run",
    "get_input_index",
    "get_input_name",
];

/// The functions of a Relay VM executable (`tvm/runtime/vm.py` calls them).
const VM_EXECUTABLE_FUNCTIONS: &[&str] = &[
    "get_lib",
    "get_bytecode",
    "get_constants",
    "get_stats",
    "save",
    "get_function_arity",
    "get_function_param_name",
    "vm_load_executable",
];

/// The functions of a Relay VM (`profile`, `profile_rpc` on the profiling VM's too).
const VM_FUNCTIONS: &[&str] = &[
    "init",
    "set_input",
    "invoke",
    "invoke_stateful",
    "invoke_return_to_device",
    "get_output",
    "get_num_outputs",
    "get_input_index",
];

/// The debug executor's additional functions.
const DEBUG_FUNCTIONS: &[&str] =
    &["run_individual", "execute_node", "get_node_output", "debug_get_output", "profile", "profile_rpc"];

/// The functions a model library exports: its defined, global function symbols, less the
/// runtime's own slots and the compiler's helpers (names starting with `__`, and `_init` /
/// `_fini`). `None` if the file cannot be read as an object file.
fn library_functions(path: &Path) -> Option<Vec<String>> {
    use object::{Object, ObjectSymbol, SymbolKind};
    let data = std::fs::read(path).ok()?;
    let file = object::File::parse(&*data).ok()?;
    let mut names: Vec<String> = file
        .dynamic_symbols()
        .filter(|s| s.is_definition() && s.is_global() && !s.is_weak() && s.kind() == SymbolKind::Text)
        .filter_map(|s| s.name().ok().map(str::to_owned))
        .filter(|n| !n.starts_with("__") && n != "_init" && n != "_fini")
        .collect();
    names.sort();
    names.dedup();
    Some(names)
}
