//! Module, params and array globals of TVM v0.9-v0.16, and the `static_library` module kind.

use crate::error::{Error, Result};
use crate::function::PackedFunc;
use crate::globals::library::{params_arg, params_map};
use crate::io::{Reader, Writer};
use crate::module::{blob, Module, ModuleNode};
use crate::ndarray::serialize::{load_params, save_params};
use crate::object::{index, ArrayObj, ShapeTupleObj, StringObj};
use crate::registry::Registrar;
use crate::value::{Args, Value};
use std::any::Any;

/// `ModulePropertyMask` bits (v0.12+).
pub mod mask {
    /// Can be written into a blob and read back (`SaveToBinary` + a loader).
    pub(crate) const BINARY_SERIALIZABLE: i64 = 0b001;
    /// Its functions can run.
    pub(crate) const RUNNABLE: i64 = 0b010;
    /// Linked into the shared library by `export_library` (compiler-side modules).
    pub(crate) const DSO_EXPORTABLE: i64 = 0b100;
}

/// The property mask TVM v0.18 gives each module kind (its `GetPropertyMask`); kinds TVM does
/// not know get its default, 0.
pub fn property_mask(type_key: &str) -> i64 {
    use mask::*;
    match type_key {
        "library" | "cuda" | "opencl" | "metal" | "rocm" | "vulkan" => BINARY_SERIALIZABLE | RUNNABLE,
        "GraphExecutorFactory"
        | "AotExecutorFactory"
        | "metadata_module"
        | "metadata"
        | "const_loader"
        | "VMExecutable"
        | "relax.Executable" => BINARY_SERIALIZABLE,
        "GraphExecutor" | "GraphExecutorDebug" | "AotExecutor" | "VirtualMachine" | "rpc" => RUNNABLE,
        "static_library" => BINARY_SERIALIZABLE | DSO_EXPORTABLE,
        // The BYOC JSON runtimes (`dnnl_json`, `tensorrt`, ...) and other external runtimes.
        k if k.ends_with("_json") || matches!(k, "tensorrt" | "ethos-n" | "vitis_ai" | "coreml") => {
            BINARY_SERIALIZABLE | RUNNABLE
        }
        _ => 0,
    }
}

/// A `static_library` module (v0.9+): an object file kept as bytes, with the names of the
/// functions it implements, for `export_library` to link; it runs nothing.
pub(crate) struct StaticLibrary {
    data: Vec<u8>,
    func_names: Vec<String>,
}

impl StaticLibrary {
    /// Reads the serialized form: the bytes (string), then the function names.
    pub(crate) fn load(r: &mut Reader<'_>) -> Result<StaticLibrary> {
        let data = r.str_bytes().map_err(|e| e.context("static_library: data"))?.to_vec();
        let func_names = r.vec_string().map_err(|e| e.context("static_library: function names"))?;
        Ok(StaticLibrary { data, func_names })
    }

    /// Whether the library says it implements `name`.
    pub(crate) fn implements(&self, name: &str) -> bool {
        self.func_names.iter().any(|n| n == name)
    }
}

impl ModuleNode for StaticLibrary {
    fn type_key(&self) -> &str {
        "static_library"
    }

    fn get_function(&self, name: &str, _this: &Module) -> Result<Option<PackedFunc>> {
        if name != "get_func_names" {
            return Ok(None);
        }
        let names: Vec<_> = self.func_names.iter().map(|n| Some(StringObj::new_object(n.as_bytes()))).collect();
        Ok(Some(PackedFunc::from_fn(move |_| Ok(Value::Object(ArrayObj::new_object(names.clone()))))))
    }

    fn save_to_binary(&self) -> Result<Vec<u8>> {
        let mut w = Writer::default();
        w.str_bytes(&self.data);
        w.vec_str(&self.func_names);
        Ok(w.buf)
    }

    fn save_to_file(&self, path: &str, _format: &str) -> Result<()> {
        std::fs::write(path, &self.data).map_err(|e| Error::tvm(format!("cannot write {path}: {e}")))
    }

    fn as_any(&self) -> &dyn Any {
        self
    }
}

fn module_arg(a: &Args<'_>, i: usize) -> Result<Module> {
    a.module(i)?.ok_or_else(|| Error::value(format!("argument {i}: expected a module, got None")))
}

/// `ImplementsFunction`: a static library answers from its name list; other modules by
/// looking the function up.
fn implements_function(m: &Module, name: &str, query_imports: bool) -> Result<bool> {
    if let Some(s) = m.downcast::<StaticLibrary>() {
        return Ok(s.implements(name));
    }
    Ok(m.get_function(name, query_imports)?.is_some())
}

/// An optional bool argument (v0.18 passes bools as code 15, older releases as ints).
fn flag(a: &Args<'_>, i: usize) -> Result<bool> {
    Ok(i < a.len() && a.i64(i)? != 0)
}

/// Registers the globals.
pub fn register(r: &mut Registrar<'_>) {
    r.func("runtime.ModuleGetPropertyMask", |a| {
        a.expect_len("runtime.ModuleGetPropertyMask", 1)?;
        Ok(Value::Int(property_mask(module_arg(a, 0)?.type_key())))
    });
    r.func("runtime.ModuleImplementsFunction", |a| {
        a.expect_at_least("runtime.ModuleImplementsFunction", 2)?;
        Ok(Value::Int(i64::from(implements_function(&module_arg(a, 0)?, &a.string(1)?, flag(a, 2)?)?)))
    });
    r.func("runtime.ModuleGetFunction", |a| {
        a.expect_at_least("runtime.ModuleGetFunction", 2)?;
        Ok(module_arg(a, 0)?.get_function(&a.string(1)?, flag(a, 2)?)?.map_or(Value::Null, Value::func))
    });
    // No module kind of this runtime has a source format (TVM's default is "").
    r.func("runtime.ModuleGetFormat", |a| {
        a.expect_len("runtime.ModuleGetFormat", 1)?;
        module_arg(a, 0)?;
        Ok(Value::str(""))
    });
    r.func("runtime.ModuleClearImports", |a| {
        a.expect_len("runtime.ModuleClearImports", 1)?;
        module_arg(a, 0)?.clear_imports();
        Ok(Value::Null)
    });
    r.func("runtime.NumThreads", |_| Ok(Value::Int(crate::threading::num_threads() as i64)));
    r.func("runtime.SaveParamsToFile", |a| {
        a.expect_len("runtime.SaveParamsToFile", 2)?;
        let path = a.string(1)?;
        let bytes = save_params(&params_arg(a, 0, "runtime.SaveParamsToFile")?)?;
        std::fs::write(&path, bytes).map_err(|e| Error::tvm(format!("cannot write {path}: {e}")))?;
        Ok(Value::Null)
    });
    r.func("runtime.LoadParamsFromFile", |a| {
        a.expect_len("runtime.LoadParamsFromFile", 1)?;
        let path = a.string(0)?;
        let bytes = std::fs::read(&path).map_err(|e| Error::tvm(format!("cannot read {path}: {e}")))?;
        Ok(params_map(load_params(&bytes)?))
    });
    r.func("runtime.TVMArrayCreateView", |a| {
        a.expect_at_least("runtime.TVMArrayCreateView", 3)?;
        let arr = a.ndarray(0)?.ok_or_else(|| Error::value("TVMArrayCreateView: the array must not be None"))?;
        let shape = a.object_of(1, index::SHAPE_TUPLE, "runtime.ShapeTuple")?;
        let dims = shape.downcast::<ShapeTupleObj>().map(|t| t.dims().to_vec()).unwrap_or_default();
        let offset = if a.len() > 3 { a.i64(3)? } else { 0 };
        let offset = u64::try_from(offset).map_err(|_| Error::value(format!("negative byte offset {offset}")))?;
        Ok(Value::NDArray(arr.create_view_at(&dims, a.dtype(2)?, offset)?))
    });
    r.func("runtime.ModuleLoadStaticLibrary", |a| {
        a.expect_len("runtime.ModuleLoadStaticLibrary", 2)?;
        let path = a.string(0)?;
        let data = std::fs::read(&path).map_err(|e| Error::tvm(format!("cannot read {path}: {e}")))?;
        let names = a.object_of(1, index::ARRAY, "Array")?;
        let func_names = names
            .downcast::<ArrayObj>()
            .map(|arr| {
                arr.items
                    .iter()
                    .flatten()
                    .filter_map(|o| o.downcast::<StringObj>().map(|s| s.to_string_lossy()))
                    .collect()
            })
            .unwrap_or_default();
        Ok(Value::Module(Module::new(StaticLibrary { data, func_names })))
    });
    r.func("runtime.module.loadbinary_static_library", |a| {
        let lib = blob::with_stream(a.handle(0)?, |s| StaticLibrary::load(s.reader()))?;
        Ok(Value::Module(Module::new(lib)))
    });
}
