//! The graph executor factory (graph-executor.md §7, formats.md §7): graph JSON, params and the
//! code module (import #0) in one module, as `export_library` writes it.

use super::GraphExecutor;
use crate::abi::DLDevice;
use crate::error::{Error, Result};
use crate::function::PackedFunc;
use crate::io::{Reader, Writer};
use crate::module::{Module, ModuleNode};
use crate::ndarray::serialize::{load_ndarray, save_ndarray};
use crate::ndarray::NDArray;
use crate::value::{Args, Value};
use std::any::Any;

/// A graph executor factory (type key `GraphExecutorFactory`).
pub struct GraphExecutorFactory {
    graph_json: String,
    params: Vec<(String, NDArray)>,
    module_name: String,
}

impl GraphExecutorFactory {
    /// A factory; its code module is the module's import #0, attached by the caller.
    pub fn new(graph_json: String, params: Vec<(String, NDArray)>, module_name: String) -> Self {
        GraphExecutorFactory { graph_json, params, module_name }
    }

    /// Reads the payload of formats.md §7.
    pub fn load(r: &mut Reader<'_>) -> Result<GraphExecutorFactory> {
        let graph_json = r.string().map_err(|e| e.context("GraphExecutorFactory: graph JSON"))?;
        let num_params = r.u64()?;
        let names = r.vec_string()?;
        if names.len() as u64 != num_params {
            return Err(Error::value(format!(
                "GraphExecutorFactory: {num_params} params announced but {} names stored",
                names.len()
            )));
        }
        let mut params = Vec::with_capacity(names.len());
        for n in names {
            let a = load_ndarray(r).map_err(|e| e.context(format!("GraphExecutorFactory: param {n}")))?;
            params.push((n, a));
        }
        let module_name = r.string().map_err(|e| e.context("GraphExecutorFactory: module name"))?;
        Ok(GraphExecutorFactory { graph_json, params, module_name })
    }

    /// The graph JSON.
    pub fn graph_json(&self) -> &str {
        &self.graph_json
    }

    /// The parameters, in stored order.
    pub fn params(&self) -> &[(String, NDArray)] {
        &self.params
    }

    /// The name of the function that creates an executor (`default`).
    pub fn module_name(&self) -> &str {
        &self.module_name
    }

    fn code_module(&self, this: &Module) -> Result<Module> {
        this.imports()
            .into_iter()
            .next()
            .ok_or_else(|| Error::value("GraphExecutorFactory has no code module (import #0)"))
    }

    /// Creates an executor on `devices`.
    pub fn create_executor(&self, this: &Module, devices: Vec<DLDevice>, debug: bool) -> Result<Module> {
        let exec =
            GraphExecutor::create(&self.graph_json, self.code_module(this)?, devices, None, &self.params, debug)?;
        Ok(Module::new(exec))
    }
}

fn devices_from(a: &Args<'_>, start: usize) -> Result<Vec<DLDevice>> {
    if a.len() <= start {
        return Err(Error::value("at least one device is required"));
    }
    (start..a.len()).map(|i| a.device(i)).collect()
}

impl ModuleNode for GraphExecutorFactory {
    fn type_key(&self) -> &str {
        "GraphExecutorFactory"
    }

    fn get_function(&self, name: &str, this: &Module) -> Result<Option<PackedFunc>> {
        let m = this.clone();
        let with = move |f: fn(&GraphExecutorFactory, &Module, &Args<'_>) -> Result<Value>| {
            let m = m.clone();
            PackedFunc::from_fn(move |args| match m.downcast::<GraphExecutorFactory>() {
                Some(fac) => f(fac, &m, args),
                None => Err(Error::internal("factory module expected")),
            })
        };
        Ok(Some(match name {
            n if n == self.module_name => {
                with(|fac, m, a| Ok(Value::Module(fac.create_executor(m, devices_from(a, 0)?, false)?)))
            }
            "get_graph_json" => with(|fac, _, _| Ok(Value::str(fac.graph_json.clone()))),
            // v0.9+: the params as a Map<String, NDArray>.
            "get_graph_params" => with(|fac, _, _| {
                let pairs = fac
                    .params
                    .iter()
                    .map(|(n, a)| (crate::object::StringObj::new_object(n.as_bytes()), Some(a.clone().into_object())))
                    .collect();
                Ok(Value::Object(crate::object::MapObj::new_object(pairs)))
            }),
            "debug_create" => with(|fac, m, a| {
                if a.len() < 2 {
                    return Err(Error::value("debug_create expects the module name and at least one device"));
                }
                if a.string(0)? != fac.module_name {
                    return Err(Error::value("Currently we only support single model for now."));
                }
                Ok(Value::Module(fac.create_executor(m, devices_from(a, 1)?, true)?))
            }),
            "remove_params" => with(|fac, m, _| {
                let f =
                    Module::new(GraphExecutorFactory::new(fac.graph_json.clone(), Vec::new(), fac.module_name.clone()));
                f.import(fac.code_module(m)?)?;
                Ok(Value::Module(f))
            }),
            "cuda_graph_create" => with(|_, _, _| {
                Err(Error::tvm(
                    "Cannot find function tvm.graph_executor_cuda_graph.create in registry. \
                     Did you set(USE_GRAPH_EXECUTOR_CUGRAPH=ON)?",
                ))
            }),
            _ => return Ok(None),
        }))
    }

    fn save_to_binary(&self) -> Result<Vec<u8>> {
        let mut w = Writer::default();
        w.str_bytes(self.graph_json.as_bytes());
        w.u64(self.params.len() as u64);
        let names: Vec<&str> = self.params.iter().map(|(n, _)| n.as_str()).collect();
        w.vec_str(&names);
        for (_, a) in &self.params {
            save_ndarray(&mut w, a)?;
        }
        w.str_bytes(self.module_name.as_bytes());
        Ok(w.buf)
    }

    fn as_any(&self) -> &dyn Any {
        self
    }
}

/// `tvm.graph_executor_factory.create(graph_json, lib, module_name, [name, param]...)`.
pub fn create_global(a: &Args<'_>) -> Result<Value> {
    if a.len() < 3 || (a.len() - 3) % 2 != 0 {
        return Err(Error::value(
            "tvm.graph_executor_factory.create expects graph_json, lib, module_name and (name, param) pairs",
        ));
    }
    let json = a.string(0)?;
    let lib = a.module(1)?.ok_or_else(|| Error::value("the code module must not be None"))?;
    let name = a.string(2)?;
    let mut params = Vec::new();
    for k in (3..a.len()).step_by(2) {
        let p = a
            .ndarray(k + 1)?
            .ok_or_else(|| Error::value(format!("param {} must be an NDArray", a.string(k).unwrap_or_default())))?;
        params.push((a.string(k)?, p));
    }
    let m = Module::new(GraphExecutorFactory::new(json, params, name));
    m.import(lib)?;
    Ok(Value::Module(m))
}

/// `runtime.module.loadbinary_GraphExecutorFactory`.
pub fn load_binary_global(a: &Args<'_>) -> Result<Value> {
    let f = crate::module::blob::with_stream(a.handle(0)?, |s| GraphExecutorFactory::load(s.reader()))?;
    Ok(Value::Module(Module::new(f)))
}
