//! Exports of TVM v0.22-v0.27 (`tvm.compile(mod, target)` then `export_library`): a Relax VM
//! executable in the library's `__tvm_ffi__library_bin`, its kernels beside it, all through the
//! runtime's tvm-ffi side.
//!
//! [`RelaxModule::load`] loads the file once; [`RelaxModule::functions`] says what it can call.
//! [`RelaxVm::new`] makes a virtual machine over it, one per thread (one loaded module serves
//! any number of machines, on any threads at once); [`RelaxVm::call`] calls a Relax function
//! with tensors and returns an [`Output`]: a tensor, or a (nested) tuple of outputs.
//!
//! A program that loads these exports must export the runtime's C API to them, as a program
//! linked against `libtvm_runtime.so` does: they call `TVMFFIErrorSetRaisedFromCStrParts` by name.
//! Link its binaries with `-Wl,--export-dynamic` (a `build.rs` printing
//! `cargo:rustc-link-arg-bins=-Wl,--export-dynamic`, as `tvmrt`'s does); without it loading fails
//! with an error that says so.
//!
//! ```no_run
//! use std::sync::Arc;
//! use tvm_rt::relax::{RelaxModule, RelaxVm};
//! use tvm_rt::{Device, NDArray};
//!
//! # fn main() -> tvm_rt::Result<()> {
//! # let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../shared/fixtures-v0.27/if_tuple.so");
//! # if !std::path::Path::new(path).exists() {
//! #     assert_ne!(std::env::var("CI").as_deref(), Ok("true"), "fixture {path} missing");
//! #     eprintln!("SKIP: {path} not found");
//! #     return Ok(());
//! # }
//! // `main(c: bool, x: float32[2, 3], y: float32[2, 3])` returning `((a, b), s)`.
//! let module = Arc::new(RelaxModule::load(path)?);
//! let main = module.function("main").expect("main");
//! assert_eq!(main.params, ["c", "x", "y"]);
//!
//! let worker = {
//!     let module = Arc::clone(&module);
//!     std::thread::spawn(move || -> tvm_rt::Result<usize> {
//!         let mut vm = RelaxVm::new(&module, &[Device::cpu()])?;
//!         let c = NDArray::from_slice(&[true], &[], Device::cpu())?;
//!         let x = NDArray::from_slice(&[1.0f32; 6], &[2, 3], Device::cpu())?;
//!         let y = NDArray::from_slice(&[2.0f32; 6], &[2, 3], Device::cpu())?;
//!         // A nested tuple, flattened depth first: a, b, s.
//!         Ok(vm.call("main", &[c, x, y])?.flatten().len())
//!     })
//! };
//! assert_eq!(worker.join().unwrap()?, 3);
//! // The VM checks its inputs: a wrong shape is an error, not a crash.
//! let mut vm = RelaxVm::new(&module, &[Device::cpu()])?;
//! let c = NDArray::from_slice(&[true], &[], Device::cpu())?;
//! let x = NDArray::from_slice(&[1.0f32; 4], &[4], Device::cpu())?;
//! assert!(vm.call("main", &[c, x.clone(), x]).is_err());
//! # Ok(())
//! # }
//! ```

use crate::vm::AllocatorKind;
use crate::{DataType, Device, Error, NDArray, Result};
use std::collections::HashMap;
use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use tvm_runtime::relax::executable::{Constant, Executable, FuncKind};
use tvm_runtime::relax::vm_module::{self, ExecModule};
use tvm_runtime::tvm_ffi::any::Any;
use tvm_runtime::tvm_ffi::containers::{array, shape};
use tvm_runtime::tvm_ffi::object::ObjectRef;
use tvm_runtime::tvm_ffi::tensor::classic;
use tvm_runtime::tvm_ffi::{function, module, registry, ti, types, FfiError};

/// The symbol that marks a TVM v0.22+ export (tvm-ffi's serialized module tree).
pub const LIBRARY_BIN_SYMBOL: &str = "__tvm_ffi__library_bin";

/// A tvm-ffi error as this API's error: its kind and message.
pub(crate) fn ffi_err(e: FfiError) -> Error {
    Error::from_foreign(format!("{}: {}", e.kind(), e.message()))
}

/// A loader's error, naming the library and, where an export's call into the runtime's C API
/// could not be bound, what the program lacks.
fn load_err(e: FfiError, name: &str) -> Error {
    let mut e = ffi_err(e);
    if !e.to_string().contains(name) {
        e = e.context(name);
    }
    if e.to_string().contains("undefined symbol: TVMFFI") {
        // The export calls the runtime's C API by name: the program must export it.
        e = Error::from_foreign(format!(
            "{e} (the program does not export the runtime's C API, which TVM v0.22+ exports call: link \
             it with -Wl,--export-dynamic, e.g. `println!(\"cargo:rustc-link-arg-bins=-Wl,--export-dynamic\")` \
             in its build.rs)"
        ));
    }
    e
}

/// Whether `path` is a TVM v0.22+ export (an ELF library defining `__tvm_ffi__library_bin`):
/// load it with [`RelaxModule::load`], not [`crate::Module::load`]. Reads only the file's
/// headers and dynamic symbol table.
pub fn is_relax_export(path: impl AsRef<Path>) -> bool {
    use object::{Object, ObjectSymbol};
    let Ok(file) = std::fs::File::open(path.as_ref()) else { return false };
    let cache = object::read::ReadCache::new(file);
    let Ok(obj) = object::File::parse(&cache) else { return false };
    let found = obj.dynamic_symbols().any(|s| s.is_definition() && s.name() == Ok(LIBRARY_BIN_SYMBOL));
    found
}

/// What a function of the executable is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum FunctionKind {
    /// Bytecode the VM interprets.
    Vm,
    /// A Relax function compiled to a kernel (`__vmtir__<name>`), called as a closure.
    VmTir,
}

/// A Relax function an executable can call by name.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FunctionInfo {
    /// Its name (`main`, `forward`, ...).
    pub name: String,
    /// What it is.
    pub kind: FunctionKind,
    /// Its parameter names, in order (the executable records no shapes or types for them; the
    /// VM checks its inputs when called).
    pub params: Vec<String>,
    /// How many arguments it takes.
    pub arity: usize,
    /// Its bytecode instructions (0 for [`FunctionKind::VmTir`]).
    pub num_instructions: usize,
    /// Registers of one call frame.
    pub register_file_size: usize,
}

/// A constant of the executable's pool.
#[derive(Clone, Debug, PartialEq)]
pub enum ConstantInfo {
    /// A tensor (a weight bound into the executable): its shape, type and size.
    Tensor {
        /// The shape.
        shape: Vec<i64>,
        /// The element type.
        dtype: DataType,
        /// Its data in bytes.
        bytes: usize,
    },
    /// A shape.
    Shape(Vec<i64>),
    /// A string.
    Str(String),
    /// An integer.
    Int(i64),
    /// A float.
    Float(f64),
    /// A data type.
    DataType(DataType),
}

/// What the packed functions of the executable's function table resolve to.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PackedFunctions {
    /// Kernels of the library (its `__tvm_ffi_<name>` functions).
    pub kernels: Vec<String>,
    /// Functions of the runtime's global registry (`vm.builtin.*`, ...).
    pub globals: Vec<String>,
    /// Functions found in neither: a VM over this executable cannot be made.
    pub missing: Vec<String>,
}

struct Inner {
    exec: ObjectRef,
    exe: Arc<Executable>,
    path: PathBuf,
    functions: Vec<FunctionInfo>,
    constants: Vec<ConstantInfo>,
    packed: PackedFunctions,
}

/// A loaded TVM v0.22+ export: its Relax VM executable (`relax.VMExecutable`) and the kernel
/// library it imports.
///
/// Cloning shares it; `Send + Sync`: one module serves machines ([`RelaxVm`]) on any number of
/// threads at once (the executable is immutable, its constants shared read-only).
#[derive(Clone)]
pub struct RelaxModule(Arc<Inner>);

impl RelaxModule {
    /// Loads an export of TVM v0.22 or later (`export_library` of what `tvm.compile` made).
    pub fn load(path: impl AsRef<Path>) -> Result<RelaxModule> {
        let path = path.as_ref();
        if !path.exists() {
            return Err(Error::value(format!("{}: no such file", path.display())));
        }
        let p = path.to_str().ok_or_else(|| Error::value(format!("the path {} is not valid UTF-8", path.display())))?;
        // tvm-ffi's loader picks the format from the extension; a library is a library.
        let exec = if p.ends_with(".so") { module::load_from_file(p) } else { module::load_dso(p) };
        Self::from_module(exec.map_err(|e| load_err(e, p))?, path)
    }

    /// Loads an export from its bytes (a whole `.so`, e.g. decrypted in memory) without writing
    /// them to a file: an anonymous file is `dlopen`ed, as [`crate::Module::from_bytes`] does.
    /// [`RelaxModule::path`] is then `<memory:bytes>`.
    pub fn from_bytes(bytes: &[u8]) -> Result<RelaxModule> {
        Self::from_bytes_named(bytes, "bytes")
    }

    /// As [`RelaxModule::from_bytes`], naming the library `name` in messages and its path
    /// `<memory:NAME>`.
    pub fn from_bytes_named(bytes: &[u8], name: &str) -> Result<RelaxModule> {
        let label = format!("<memory:{name}>");
        let exec = module::load_dso_from_bytes(bytes, name).map_err(|e| load_err(e, &label))?;
        Self::from_module(exec, Path::new(&label))
    }

    fn from_module(exec: ObjectRef, path: &Path) -> Result<RelaxModule> {
        let Some(em) = module::native::<ExecModule>(&exec) else {
            return Err(Error::type_error(format!(
                "{}: not a Relax VM executable: it has no {LIBRARY_BIN_SYMBOL} holding a relax.VMExecutable \
                 (a library of TVM v0.22+ kernels only, or a library of another kind)",
                path.display()
            )));
        };
        let exe = em.executable().clone();
        let functions = exe
            .functions
            .iter()
            .filter_map(|f| {
                let kind = match f.kind {
                    FuncKind::Vm => FunctionKind::Vm,
                    FuncKind::VmTir => FunctionKind::VmTir,
                    FuncKind::Packed => return None,
                };
                let n = |v: i64| usize::try_from(v).unwrap_or(0);
                Some(FunctionInfo {
                    name: f.name.clone(),
                    kind,
                    params: f.param_names.clone(),
                    arity: n(f.num_args),
                    num_instructions: if kind == FunctionKind::Vm { n(f.end_instr - f.start_instr) } else { 0 },
                    register_file_size: n(f.register_file_size),
                })
            })
            .collect();
        let constants = exe.constants.iter().map(constant_info).collect();
        let packed = resolve_packed(&exec, &exe)?;
        Ok(RelaxModule(Arc::new(Inner { exec, exe, path: path.to_owned(), functions, constants, packed })))
    }

    /// The file it was loaded from.
    pub fn path(&self) -> &Path {
        &self.0.path
    }

    /// The Relax functions it can call, in function-table order.
    pub fn functions(&self) -> &[FunctionInfo] {
        &self.0.functions
    }

    /// The function `name`, if it has it.
    pub fn function(&self, name: &str) -> Option<&FunctionInfo> {
        self.0.functions.iter().find(|f| f.name == name)
    }

    /// Its constant pool, in index order.
    pub fn constants(&self) -> &[ConstantInfo] {
        &self.0.constants
    }

    /// The kernels and runtime functions its bytecode calls.
    pub fn packed_functions(&self) -> &PackedFunctions {
        &self.0.packed
    }

    /// TVM's listing of the executable (`as_text`): functions and their bytecode.
    pub fn as_text(&self) -> String {
        self.0.exe.as_text()
    }

    /// TVM's statistics of the executable (`stats`): constants and globals.
    pub fn stats(&self) -> String {
        self.0.exe.stats()
    }

    /// The module tree, starting at the executable: kinds, functions where listed, imports.
    pub fn module_tree(&self) -> ModuleTree {
        fn walk(m: &ObjectRef, me: &Inner) -> ModuleTree {
            let (kind, functions) = if module::native::<ExecModule>(m).is_some() {
                ("relax.VMExecutable".to_owned(), Some(me.functions.iter().map(|f| f.name.clone()).collect()))
            } else {
                let kind = module_kind(m).unwrap_or_else(|| "library".to_owned());
                let functions = if kind == "library" { library_kernels(&me.path) } else { None };
                (kind, functions)
            };
            let imports = module::imports(m).unwrap_or_default().iter().map(|i| walk(i, me)).collect();
            ModuleTree { kind, functions, imports }
        }
        walk(&self.0.exec, &self.0)
    }
}

/// One module of a loaded export and the modules it imports.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ModuleTree {
    /// Its kind: `relax.VMExecutable`, `library` (the kernels), a device module kind, ...
    pub kind: String,
    /// Its functions, where the kind lists them: the executable's Relax functions, the
    /// library's kernels (its `__tvm_ffi_<name>` symbols).
    pub functions: Option<Vec<String>>,
    /// The modules it imports, in order.
    pub imports: Vec<ModuleTree>,
}

/// The kernels a TVM v0.22+ library exports: its `__tvm_ffi_<name>` function symbols, sorted.
fn library_kernels(path: &Path) -> Option<Vec<String>> {
    use object::{Object, ObjectSymbol, SymbolKind};
    let file = std::fs::File::open(path).ok()?;
    let cache = object::read::ReadCache::new(file);
    let obj = object::File::parse(&cache).ok()?;
    let mut names: Vec<String> = obj
        .dynamic_symbols()
        .filter(|s| s.is_definition() && s.is_global() && s.kind() == SymbolKind::Text)
        .filter_map(|s| s.name().ok()?.strip_prefix("__tvm_ffi_").map(str::to_owned))
        .filter(|n| !n.starts_with('_'))
        .collect();
    names.sort();
    names.dedup();
    Some(names)
}

fn module_kind(m: &ObjectRef) -> Option<String> {
    let f = registry::get("ffi.ModuleGetKind")?;
    let r = function::call_any(&f, &[Any::object(m.clone())]).ok()?;
    r.as_str().map(str::to_owned)
}

fn constant_info(c: &Constant) -> ConstantInfo {
    match c {
        Constant::Tensor(t) => {
            ConstantInfo::Tensor { shape: t.shape.clone(), dtype: DataType::from_dl(t.dtype), bytes: t.data.len() }
        }
        Constant::Shape(s) => ConstantInfo::Shape(s.clone()),
        Constant::Str(b) => ConstantInfo::Str(String::from_utf8_lossy(b).into_owned()),
        Constant::Int(v) => ConstantInfo::Int(*v),
        Constant::Float(v) => ConstantInfo::Float(*v),
        Constant::DataType(t) => ConstantInfo::DataType(DataType::from_dl(*t)),
    }
}

/// Sorts the packed entries as the VM finds them: the imports first, then the registry.
fn resolve_packed(exec: &ObjectRef, exe: &Executable) -> Result<PackedFunctions> {
    let imports = module::imports(exec).map_err(ffi_err)?;
    let mut out = PackedFunctions::default();
    for f in exe.functions.iter().filter(|f| f.kind == FuncKind::Packed) {
        let mut in_lib = false;
        for m in &imports {
            if module::get_function(m, &f.name, true).map_err(ffi_err)?.is_some() {
                in_lib = true;
                break;
            }
        }
        let list = if in_lib {
            &mut out.kernels
        } else if registry::get(&f.name).is_some() {
            &mut out.globals
        } else {
            &mut out.missing
        };
        list.push(f.name.clone());
    }
    Ok(out)
}

impl fmt::Debug for RelaxModule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let names: Vec<&str> = self.0.functions.iter().map(|f| f.name.as_str()).collect();
        write!(f, "RelaxModule({}: {})", self.0.path.display(), names.join(", "))
    }
}

/// What a Relax function returns: a tensor, a (nested) tuple, or one of the other values a
/// Relax function may return.
#[derive(Clone, Debug)]
pub enum Output {
    /// A tensor. It may share memory with the VM's inputs or constants when the function
    /// returns one of them, as in TVM; copy it before writing into it.
    Tensor(NDArray),
    /// A tuple of outputs.
    Tuple(Vec<Output>),
    /// A shape (`R.Shape`).
    Shape(Vec<i64>),
    /// An integer (`R.Prim("int64")`).
    Int(i64),
    /// A float.
    Float(f64),
    /// A boolean.
    Bool(bool),
    /// A string.
    Str(String),
    /// Nothing (`R.Object` None, or a function returning no value).
    None,
}

/// An argument of [`call_global`].
#[derive(Clone, Copy, Debug)]
pub enum Arg<'a> {
    /// A tensor (passed without copying).
    Tensor(&'a NDArray),
    /// An integer.
    Int(i64),
    /// A float.
    Float(f64),
    /// A string.
    Str(&'a str),
    /// A shape.
    Shape(&'a [i64]),
}

/// Calls a global function of the runtime's tvm-ffi registry (the Relax VM's `vm.builtin.*`,
/// `runtime.*`, ...) with `args`; its result.
pub fn call_global(name: &str, args: &[Arg]) -> Result<Output> {
    let f = registry::get(name).ok_or_else(|| Error::key(format!("no global function {name}")))?;
    let args = args
        .iter()
        .map(|a| {
            Ok(match *a {
                Arg::Tensor(t) => Any::object(classic::from_classic(&t.0).map_err(ffi_err)?),
                Arg::Int(x) => Any::int(x),
                Arg::Float(x) => Any::float(x),
                Arg::Str(s) => Any::string(s),
                Arg::Shape(d) => Any::object(shape::make_shape(d)),
            })
        })
        .collect::<Result<Vec<_>>>()?;
    Output::from_any(function::call_any(&f, &args).map_err(ffi_err)?)
}

impl Output {
    fn from_any(v: Any) -> Result<Output> {
        Ok(match v.type_index() {
            ti::NONE => Output::None,
            ti::INT => Output::Int(v.as_i64().unwrap_or(0)),
            ti::BOOL => Output::Bool(v.as_bool().unwrap_or(false)),
            ti::FLOAT => Output::Float(v.as_f64().unwrap_or(0.0)),
            ti::SMALL_STR | ti::STR => Output::Str(String::from_utf8_lossy(v.as_str_bytes().unwrap_or(b"")).into()),
            t => {
                let o = v.into_object().map_err(|v| {
                    Error::type_error(format!("the function returned a {}", types::type_key(v.type_index())))
                })?;
                if types::is_instance(t, ti::TENSOR) {
                    Output::Tensor(NDArray(classic::to_classic(&o).map_err(ffi_err)?))
                } else if t == ti::ARRAY || t == ti::LIST {
                    Output::Tuple(array::seq_items(&o).iter().cloned().map(Output::from_any).collect::<Result<_>>()?)
                } else if t == ti::SHAPE {
                    Output::Shape(shape::shape_dims(&o).to_vec())
                } else {
                    return Err(Error::type_error(format!(
                        "the function returned a {} object, which is not a tensor, tuple, shape or scalar",
                        types::type_key(t)
                    )));
                }
            }
        })
    }

    /// The tensors, depth first (a tuple's fields, left to right, before what follows it): the
    /// order in which TVM's tests flatten nested results (`((a, b), c)` gives `[a, b, c]`).
    /// Leaves that are not tensors (shapes, scalars) are left out.
    pub fn flatten(self) -> Vec<NDArray> {
        let mut out = Vec::new();
        fn walk(v: Output, out: &mut Vec<NDArray>) {
            match v {
                Output::Tensor(a) => out.push(a),
                Output::Tuple(fields) => fields.into_iter().for_each(|f| walk(f, out)),
                _ => {}
            }
        }
        walk(self, &mut out);
        out
    }

    /// The tensor, if the output is one.
    pub fn as_tensor(&self) -> Option<&NDArray> {
        match self {
            Output::Tensor(a) => Some(a),
            _ => None,
        }
    }

    /// The tensor, or an error saying what the output is instead.
    pub fn into_tensor(self) -> Result<NDArray> {
        match self {
            Output::Tensor(a) => Ok(a),
            other => Err(Error::type_error(format!("the output is {}, not a tensor", other.kind()))),
        }
    }

    /// `tensor`, `tuple of 3`, `shape`, ... (for messages).
    pub fn kind(&self) -> String {
        match self {
            Output::Tensor(_) => "a tensor".into(),
            Output::Tuple(f) => format!("a tuple of {}", f.len()),
            Output::Shape(_) => "a shape".into(),
            Output::Int(_) => "an integer".into(),
            Output::Float(_) => "a float".into(),
            Output::Bool(_) => "a boolean".into(),
            Output::Str(_) => "a string".into(),
            Output::None => "None".into(),
        }
    }
}

/// A Relax virtual machine over a [`RelaxModule`], initialised on its devices.
///
/// Make one per thread: [`RelaxVm::call`] takes `&mut self` (in TVM too, one machine is used by
/// one thread at a time). `Send + Sync`.
pub struct RelaxVm {
    module: RelaxModule,
    vm: ObjectRef,
    funcs: HashMap<String, ObjectRef>,
}

impl RelaxVm {
    /// A machine on `devices` (the first is where the model runs; the CPU is added as the host
    /// when absent, as TVM's `VirtualMachine` does), with the pooled allocator.
    pub fn new(module: &RelaxModule, devices: &[Device]) -> Result<RelaxVm> {
        Self::with_allocator(module, devices, AllocatorKind::Pooled)
    }

    /// As [`RelaxVm::new`], allocating with `alloc`.
    pub fn with_allocator(module: &RelaxModule, devices: &[Device], alloc: AllocatorKind) -> Result<RelaxVm> {
        if devices.is_empty() {
            return Err(Error::value("a virtual machine needs at least one device"));
        }
        let vm = vm_module::load_vm(&module.0.exec).map_err(ffi_err)?;
        let mut devs = devices.to_vec();
        if devs.last().is_some_and(|d| d.device_type() != Device::CPU) {
            devs.push(Device::cpu());
        }
        let code = match alloc {
            AllocatorKind::Naive => 1,
            AllocatorKind::Pooled => 2,
        };
        let args: Vec<Any> = devs
            .iter()
            .flat_map(|d| [Any::int(i64::from(d.device_type())), Any::int(i64::from(d.id())), Any::int(code)])
            .collect();
        let init = module::get_function(&vm, "vm_initialization", false)
            .map_err(ffi_err)?
            .ok_or_else(|| Error::internal("relax.VirtualMachine has no vm_initialization"))?;
        function::call_any(&init, &args).map_err(ffi_err)?;
        Ok(RelaxVm { module: module.clone(), vm, funcs: HashMap::new() })
    }

    /// The module it runs.
    pub fn module(&self) -> &RelaxModule {
        &self.module
    }

    /// Calls Relax function `name` with tvm-ffi values (objects such as a KV cache or a tuple of
    /// weights, shapes, tensors); its raw result. Used by [`crate::llm`].
    pub(crate) fn call_raw(&mut self, name: &str, args: &[Any]) -> Result<Any> {
        let f = match self.funcs.get(name) {
            Some(f) => f.clone(),
            None => {
                let f = module::get_function(&self.vm, name, false)
                    .map_err(ffi_err)?
                    .ok_or_else(|| Error::key(format!("the model has no function {name}")))?;
                self.funcs.insert(name.to_owned(), f.clone());
                f
            }
        };
        function::call_any(&f, args).map_err(ffi_err)
    }

    /// Calls Relax function `name` with `inputs` (one per parameter, in order); its result.
    ///
    /// The inputs are passed without copying (the VM reads them where they are; put them on the
    /// VM's device). Errors are the VM's (`vm.builtin.check_tensor_info` and `match_shape` check
    /// the inputs' ranks, types and shapes) with their kind and message.
    pub fn call(&mut self, name: &str, inputs: &[NDArray]) -> Result<Output> {
        let info = self.module.function(name).ok_or_else(|| {
            let names: Vec<&str> = self.module.functions().iter().map(|f| f.name.as_str()).collect();
            Error::key(format!("the executable has no function {name} (its functions: {})", names.join(", ")))
        })?;
        if inputs.len() != info.arity {
            return Err(Error::value(format!(
                "{name} takes {} argument{} ({}), got {}",
                info.arity,
                if info.arity == 1 { "" } else { "s" },
                info.params.join(", "),
                inputs.len()
            )));
        }
        let f = match self.funcs.get(name) {
            Some(f) => f.clone(),
            None => {
                let f = module::get_function(&self.vm, name, false)
                    .map_err(ffi_err)?
                    .ok_or_else(|| Error::key(format!("the virtual machine has no function {name}")))?;
                self.funcs.insert(name.to_owned(), f.clone());
                f
            }
        };
        let args = inputs.iter().map(|a| classic::from_classic(&a.0).map(Any::object)).collect::<Result<Vec<_>, _>>();
        let r = function::call_any(&f, &args.map_err(ffi_err)?).map_err(ffi_err)?;
        Output::from_any(r)
    }
}

impl fmt::Debug for RelaxVm {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "RelaxVm({:?})", self.module)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flatten_is_depth_first_and_skips_other_leaves() {
        let t = |x: f32| Output::Tensor(NDArray::from_slice(&[x], &[1], Device::cpu()).unwrap());
        let v = Output::Tuple(vec![
            Output::Tuple(vec![t(1.0), Output::Shape(vec![2]), t(2.0)]),
            t(3.0),
            Output::Tuple(vec![]),
            Output::Int(4),
        ]);
        let flat: Vec<f32> = v.flatten().iter().map(|a| a.to_vec::<f32>().unwrap()[0]).collect();
        assert_eq!(flat, vec![1.0, 2.0, 3.0]);
        assert!(Output::Int(1).into_tensor().unwrap_err().to_string().contains("an integer, not a tensor"));
    }

    #[test]
    fn files_that_are_not_exports() {
        assert!(!is_relax_export("/no/such/file.so"));
        assert!(!is_relax_export(file!()));
        let e = RelaxModule::load("/no/such/file.so").unwrap_err().to_string();
        assert_eq!(e, "ValueError: /no/such/file.so: no such file");
    }
}
