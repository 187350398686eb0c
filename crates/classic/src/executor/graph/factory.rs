//! The graph executor factory: graph JSON, params and the
//! code module (import #0) in one module, as `export_library` writes it.

use super::GraphExecutor;
use crate::abi::DLDevice;
use crate::error::{Error, Result};
use crate::function::PackedFunc;
use crate::io::{Reader, Writer};
use crate::module::{Module, ModuleNode};
use crate::ndarray::serialize::{load_ndarray_shared, save_ndarray};
use crate::ndarray::{copy_tensor, NDArray};
use crate::value::{Args, Value};
use parking_lot::RwLock;
use std::any::Any;
use std::sync::atomic::{AtomicBool, Ordering};

/// A graph executor factory (type key `GraphExecutorFactory`).
///
/// Its executors share its weights instead of copying them (an executor copies one only to
/// write it), as long as nothing else holds the arrays: weights loaded from a library are the
/// factory's own (some may be read-only memory, used in place in the library's mapping). Once
/// arrays are held outside (given to `tvm.graph_executor_factory.create`, or handed out by
/// `get_graph_params`, which first replaces the factory's arrays by writable copies), new
/// executors copy them at creation as TVM's do, so writes into those arrays reach the
/// executors created afterwards and never the ones created before.
pub struct GraphExecutorFactory {
    graph_json: String,
    params: RwLock<Vec<(String, NDArray)>>,
    /// The arrays are held outside the factory (see the type's doc).
    exposed: AtomicBool,
    module_name: String,
}

/// A writable copy of `a` on its device.
fn detached(a: &NDArray) -> Result<NDArray> {
    let c = NDArray::empty(a.shape(), a.dtype(), a.device())?;
    copy_tensor(a.tensor(), c.tensor(), std::ptr::null_mut())?;
    Ok(c)
}

impl GraphExecutorFactory {
    /// A factory over arrays held by the caller (its executors copy them, see the type's doc);
    /// its code module is the module's import #0, attached by the caller.
    pub fn new(graph_json: String, params: Vec<(String, NDArray)>, module_name: String) -> Self {
        GraphExecutorFactory { graph_json, params: RwLock::new(params), exposed: AtomicBool::new(true), module_name }
    }

    /// Reads the factory's payload.
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
        // Parameters are shared by the executors, which copy one before writing it, so aligned
        // ones may stay in the library's mapping (zero-copy); the others are copied out and the
        // blob's pages behind them given back as they go.
        let mut params = Vec::with_capacity(names.len());
        for n in names {
            let a = load_ndarray_shared(r).map_err(|e| e.context(format!("GraphExecutorFactory: param {n}")))?;
            params.push((n, a));
        }
        let module_name = r.string().map_err(|e| e.context("GraphExecutorFactory: module name"))?;
        Ok(GraphExecutorFactory {
            graph_json,
            params: RwLock::new(params),
            exposed: AtomicBool::new(false),
            module_name,
        })
    }

    /// The graph JSON.
    pub fn graph_json(&self) -> &str {
        &self.graph_json
    }

    /// The parameters, in stored order (the factory's own arrays, shared by its executors and
    /// possibly read-only: not to be written; `get_graph_params` hands out writable ones).
    pub fn params(&self) -> Vec<(String, NDArray)> {
        self.params.read().clone()
    }

    /// `get_graph_params`: the parameters, made the factory's writable own first (once).
    fn expose_params(&self) -> Result<Vec<(String, NDArray)>> {
        let mut p = self.params.write();
        if !self.exposed.load(Ordering::Acquire) {
            let copies = p.iter().map(|(n, a)| Ok((n.clone(), detached(a)?))).collect::<Result<Vec<_>>>()?;
            *p = copies;
            self.exposed.store(true, Ordering::Release);
        }
        Ok(p.clone())
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
        let mut params = self.params.read().clone();
        if self.exposed.load(Ordering::Acquire) {
            // Held outside: this executor gets copies of its own, as in TVM.
            for (_, a) in &mut params {
                *a = detached(a)?;
            }
        }
        let exec = GraphExecutor::create(&self.graph_json, self.code_module(this)?, devices, None, &params, debug)?;
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
        let with = |f: fn(&GraphExecutorFactory, &Module, &Args<'_>) -> Result<Value>| this.method(f);
        Ok(Some(match name {
            n if n == self.module_name => {
                with(|fac, m, a| Ok(Value::Module(fac.create_executor(m, devices_from(a, 0)?, false)?)))
            }
            "get_graph_json" => with(|fac, _, _| Ok(Value::str(fac.graph_json.clone()))),
            // v0.9+: the params as a Map<String, NDArray>.
            "get_graph_params" => with(|fac, _, _| {
                let pairs = fac
                    .expose_params()?
                    .iter()
                    .map(|(n, a)| (crate::object::StringObj::new_object(n.as_bytes()), Some(a.clone().into_object())))
                    .collect();
                Ok(Value::Object(crate::object::MapObj::new_object(pairs)))
            }),
            "debug_create" => with(|fac, m, a| {
                if !cfg!(feature = "profiling") {
                    return Err(Error::tvm(
                        "Cannot find function tvm.graph_executor_debug.create in registry. \
                         Do you enable debug graph executor build?",
                    ));
                }
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
        let params = self.params.read();
        w.str_bytes(self.graph_json.as_bytes());
        w.u64(params.len() as u64);
        let names: Vec<&str> = params.iter().map(|(n, _)| n.as_str()).collect();
        w.vec_str(&names);
        for (_, a) in params.iter() {
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
pub(crate) fn create_global(a: &Args<'_>) -> Result<Value> {
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
pub(crate) fn load_binary_global(a: &Args<'_>) -> Result<Value> {
    let f = crate::module::blob::with_stream(a.handle(0)?, |s| GraphExecutorFactory::load(s.reader()))?;
    Ok(Value::Module(Module::new(f)))
}
