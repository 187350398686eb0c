//! The JSON runtime base (TVM's `JSONRuntimeBase`) that every BYOC JSON backend
//! plugs into: the payload (symbol, graph JSON, const names), the graph ([`graph`]), binding of
//! a call's input and output tensors, the module's functions and the save/load round trip.
//!
//! A backend implements [`Backend`]: at load time it checks the graph (every operator and
//! attribute it will need) and keeps what it learnt ([`Prepared`]); `__init_<symbol>` hands the
//! constants to [`Prepared::init`], which builds the [`Engine`] that runs calls. Engines are
//! shared by all callers and must be re-entrant: per-call state never lives in them unguarded.
//!
//! The module answers (all JSON runtimes alike):
//! * `get_symbol` -> the symbol; `get_const_vars` -> `Array<String>` of const names;
//! * `<symbol>(inputs..., outputs...)`: NDArrays or DLTensors, inputs in `arg_nodes` order (one
//!   per output of each input node), then one per head; checked against the graph's shapes and
//!   dtypes; `The module has not been initialized` before `__init_<symbol>`;
//! * `__init_<symbol>(Array<NDArray>)`: the constants in `const_names` order; returns 0. A second
//!   call rebuilds the engine (calls already running finish on the old one).
//!
//! Backends this runtime does not have ([`UNSUPPORTED`]) get loaders too, which read the payload
//! and fail at load time naming the backend and what it would need.

pub mod graph;

use crate::abi::DLTensor;
use crate::error::{Error, Result};
use crate::function::PackedFunc;
use crate::io::{Reader, Writer};
use crate::module::blob::{with_stream, LOADER_PREFIX};
use crate::module::{Module, ModuleNode};
use crate::ndarray::NDArray;
use crate::object::{ArrayObj, StringObj};
use crate::registry::Registrar;
use crate::value::{code, code_name, dtype, Args, Value};
use graph::Graph;
use parking_lot::RwLock;
use std::any::Any;
use std::sync::Arc;

/// A JSON backend (`dnnl_json`, ...).
pub trait Backend: Send + Sync + 'static {
    /// The module type key, also the blob entry key.
    fn type_key(&self) -> &'static str;

    /// Checks a graph at load time; the result builds engines later.
    fn prepare(&self, graph: Arc<Graph>) -> Result<Box<dyn Prepared>>;
}

/// A checked graph of a backend.
pub trait Prepared: Send + Sync {
    /// Builds the engine from the constants (`const_names` order, counts already checked).
    fn init(&self, consts: Vec<NDArray>) -> Result<Arc<dyn Engine>>;
}

/// A runnable subgraph. Called from any number of threads at once.
pub trait Engine: Send + Sync {
    /// Runs on `inputs` (the graph's input entries) writing `outputs` (its heads); both checked
    /// against the graph's shapes and dtypes, data pointers not NULL.
    fn run(&self, inputs: &[&DLTensor], outputs: &[&DLTensor]) -> Result<()>;
}

struct Inner {
    type_key: &'static str,
    symbol: String,
    graph_json: String,
    const_names: Vec<String>,
    graph: Arc<Graph>,
    prepared: Box<dyn Prepared>,
    engine: RwLock<Option<Arc<dyn Engine>>>,
}

/// A JSON runtime module.
pub struct JsonModule(Arc<Inner>);

impl JsonModule {
    /// Parses and checks a graph for `backend`.
    pub fn new(
        backend: &dyn Backend,
        symbol: String,
        graph_json: String,
        const_names: Vec<String>,
    ) -> Result<JsonModule> {
        let key = backend.type_key();
        let graph = Arc::new(
            Graph::parse(&graph_json, &const_names).map_err(|e| e.context(format_args!("{key} module {symbol}")))?,
        );
        let prepared = backend.prepare(graph.clone()).map_err(|e| e.context(format_args!("{key} module {symbol}")))?;
        Ok(JsonModule(Arc::new(Inner {
            type_key: key,
            symbol,
            graph_json,
            const_names,
            graph,
            prepared,
            engine: RwLock::new(None),
        })))
    }

    /// The graph.
    pub fn graph(&self) -> &Graph {
        &self.0.graph
    }
}

/// Reads the three payload fields.
pub fn read_payload(r: &mut Reader<'_>) -> Result<(String, String, Vec<String>)> {
    let symbol = r.string().map_err(|e| e.context("Loading symbol name failed"))?;
    let graph_json = r.string().map_err(|e| e.context("Loading graph json failed"))?;
    let consts = r.vec_string().map_err(|e| e.context("Loading the const name list failed"))?;
    Ok((symbol, graph_json, consts))
}

impl Inner {
    fn init(&self, args: &Args<'_>) -> Result<Value> {
        args.expect_len(&format!("__init_{}", self.symbol), 1)?;
        let obj = args.object(0)?.ok_or_else(|| Error::type_error("__init_: expected Array<NDArray>, got NULL"))?;
        let arr = obj
            .downcast::<ArrayObj>()
            .ok_or_else(|| Error::type_error(format!("__init_{}: expected Array<NDArray>", self.symbol)))?;
        if arr.items.len() != self.const_names.len() {
            return Err(Error::value(format!(
                "The number of input constants must match the number of required: {} given, {} required ({})",
                arr.items.len(),
                self.const_names.len(),
                self.const_names.join(", ")
            )));
        }
        let mut consts = Vec::with_capacity(arr.items.len());
        for (i, item) in arr.items.iter().enumerate() {
            let a = item.clone().and_then(NDArray::from_object).ok_or_else(|| {
                Error::type_error(format!(
                    "__init_{}: constant {i} ({}) is not an NDArray",
                    self.symbol, self.const_names[i]
                ))
            })?;
            let node = &self.graph.nodes[self.graph.const_nodes[i] as usize];
            if a.shape() != node.shapes[0].as_slice() || a.dtype() != node.dtypes[0] {
                return Err(Error::value(format!(
                    "constant {} is {:?} {} but the graph expects {:?} {}",
                    node.name,
                    a.shape(),
                    dtype::format(a.dtype()).unwrap_or_default(),
                    node.shapes[0],
                    dtype::format(node.dtypes[0]).unwrap_or_default()
                )));
            }
            consts.push(a);
        }
        let engine =
            self.prepared.init(consts).map_err(|e| e.context(format_args!("{} {}", self.type_key, self.symbol)))?;
        *self.engine.write() = Some(engine);
        Ok(Value::Int(0))
    }

    fn run(&self, args: &Args<'_>) -> Result<()> {
        let engine = self.engine.read().clone().ok_or_else(|| {
            Error::tvm(format!("The module has not been initialized: call __init_{} first", self.symbol))
        })?;
        let g = &self.graph;
        let (ni, no) = (g.input_entries.len(), g.heads.len());
        if args.len() != ni + no {
            return Err(Error::value(format!(
                "Found mismatch in the number of provided data entries and required: {} given, {} required ({ni} inputs + {no} outputs)",
                args.len(),
                ni + no
            )));
        }
        let mut tensors: Vec<&DLTensor> = Vec::with_capacity(ni + no);
        for i in 0..ni + no {
            let (entry, what) = if i < ni { (g.input_entries[i], "input") } else { (g.heads[i - ni], "output") };
            let c = args.code(i)?;
            if c != code::DLTENSOR && c != code::NDARRAY {
                return Err(Error::type_error(format!(
                    "Expect NDArray or DLTensor as inputs: argument {i} is {}",
                    code_name(c)
                )));
            }
            let p = args.dltensor(i)?;
            // SAFETY: codes 7/13 carry a DLTensor that the caller keeps alive for the call.
            let t = unsafe { p.as_ref() }.ok_or_else(|| Error::value(format!("argument {i} is a NULL tensor")))?;
            let shape = crate::device::tensor_shape(t)?;
            let (want_shape, want_dtype) = (g.shape(entry), g.dtype(entry));
            if shape != want_shape || t.dtype != want_dtype {
                return Err(Error::value(format!(
                    "argument {i} ({what} {}): got {shape:?} {}, the graph needs {want_shape:?} {}",
                    if i < ni { i } else { i - ni },
                    dtype::format(t.dtype).unwrap_or_default(),
                    dtype::format(want_dtype).unwrap_or_default()
                )));
            }
            if t.data.is_null() && crate::device::tensor_bytes(t)? > 0 {
                return Err(Error::value(format!("argument {i} has no data")));
            }
            tensors.push(t);
        }
        let (inputs, outputs) = tensors.split_at(ni);
        engine.run(inputs, outputs)
    }
}

impl ModuleNode for JsonModule {
    fn type_key(&self) -> &str {
        self.0.type_key
    }

    fn get_function(&self, name: &str, _this: &Module) -> Result<Option<PackedFunc>> {
        let inner = self.0.clone();
        Ok(Some(match name {
            "get_symbol" => PackedFunc::from_fn(move |_| Ok(Value::str(inner.symbol.clone()))),
            "get_const_vars" => PackedFunc::from_fn(move |_| {
                let items = inner.const_names.iter().map(|n| Some(StringObj::new_object(n.as_bytes()))).collect();
                Ok(Value::Object(ArrayObj::new_object(items)))
            }),
            n if n == inner.symbol => PackedFunc::new(move |args, _ret| inner.run(args)),
            n if n.strip_prefix("__init_") == Some(inner.symbol.as_str()) => {
                PackedFunc::from_fn(move |args| inner.init(args))
            }
            _ => return Ok(None),
        }))
    }

    fn save_to_binary(&self) -> Result<Vec<u8>> {
        let mut w = Writer::default();
        w.str_bytes(self.0.symbol.as_bytes());
        w.str_bytes(self.0.graph_json.as_bytes());
        w.vec_str(&self.0.const_names);
        Ok(w.buf)
    }

    fn get_source(&self, _format: &str) -> Result<String> {
        Ok(self.0.graph_json.clone())
    }

    fn as_any(&self) -> &dyn Any {
        self
    }
}

/// Registers the blob loader of `backend` (`runtime.module.loadbinary_<key>`).
pub(crate) fn register_backend(r: &mut Registrar<'_>, backend: Arc<dyn Backend>) {
    let name = format!("{LOADER_PREFIX}{}", backend.type_key());
    r.add(
        &name,
        PackedFunc::from_fn(move |args| {
            let (symbol, graph_json, consts) = with_stream(args.handle(0)?, |s| read_payload(s.reader()))?;
            Ok(Value::Module(Module::new(JsonModule::new(&*backend, symbol, graph_json, consts)?)))
        }),
    );
}

/// Creates a module the way TVM's `runtime.<Backend>JSONRuntimeCreate(symbol, graph_json,
/// const_names)` globals do.
pub(crate) fn create_global(backend: Arc<dyn Backend>) -> PackedFunc {
    PackedFunc::from_fn(move |args| {
        args.expect_len("JSONRuntimeCreate", 3)?;
        let symbol = args.string(0)?;
        let graph_json = args.string(1)?;
        let obj = args.object(2)?;
        let mut consts = Vec::new();
        if let Some(o) = obj {
            let arr =
                o.downcast::<ArrayObj>().ok_or_else(|| Error::type_error("const_names must be an Array<String>"))?;
            for item in &arr.items {
                let s = item
                    .as_ref()
                    .and_then(|i| i.downcast::<StringObj>())
                    .ok_or_else(|| Error::type_error("const_names must be an Array<String>"))?;
                consts.push(s.to_string_lossy());
            }
        }
        Ok(Value::Module(Module::new(JsonModule::new(&*backend, symbol, graph_json, consts)?)))
    })
}

/// JSON backends of TVM (v0.8, and the later ones with the same payload) that this runtime does
/// not have: type key, backend, what TVM's runtime needs for it.
pub const UNSUPPORTED: &[(&str, &str, &str)] = &[
    ("tensorrt", "TensorRT", "TVM built with USE_TENSORRT_RUNTIME and NVIDIA TensorRT"),
    (
        "arm_compute_lib",
        "Arm Compute Library",
        "TVM built with USE_ARM_COMPUTE_LIB_GRAPH_EXECUTOR and the Arm Compute Library",
    ),
    ("bnns_json", "Apple BNNS", "TVM built with USE_BNNS on macOS (Accelerate framework)"),
    ("clml", "OpenCL ML (CLML)", "TVM v0.11+ built with USE_CLML_GRAPH_EXECUTOR and Qualcomm's CLML SDK"),
    ("cublas_json", "cuBLAS", "TVM v0.13+ built with USE_CUBLAS and CUDA"),
    ("cudnn_json", "cuDNN", "TVM v0.13+ built with USE_CUDNN and CUDA"),
    ("hipblas_json", "hipBLAS", "TVM v0.15+ built with USE_HIPBLAS and ROCm"),
    ("nnapi", "Android NNAPI", "TVM v0.18+ built with USE_NNAPI_RUNTIME on Android"),
];

/// Registers the failing loaders of [`UNSUPPORTED`] backends.
pub(crate) fn register_unsupported(r: &mut Registrar<'_>, have: &'static [&'static str]) {
    for &(key, backend, needs) in UNSUPPORTED {
        r.add(
            &format!("{LOADER_PREFIX}{key}"),
            PackedFunc::from_fn(move |args| {
                let (symbol, _, _) = with_stream(args.handle(0)?, |s| read_payload(s.reader()))?;
                Err(Error::tvm(format!(
                    "{key}: the module for {symbol} needs TVM's {backend} JSON runtime ({needs}), which this runtime \
                     does not have. JSON backends this runtime has: {}.",
                    have.join(", ")
                )))
            }),
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A backend whose engine copies input 0 into output 0.
    struct Copy;
    struct CopyPrepared;
    struct CopyEngine;

    impl Backend for Copy {
        fn type_key(&self) -> &'static str {
            "copy_json"
        }
        fn prepare(&self, _graph: Arc<Graph>) -> Result<Box<dyn Prepared>> {
            Ok(Box::new(CopyPrepared))
        }
    }
    impl Prepared for CopyPrepared {
        fn init(&self, _consts: Vec<NDArray>) -> Result<Arc<dyn Engine>> {
            Ok(Arc::new(CopyEngine))
        }
    }
    impl Engine for CopyEngine {
        fn run(&self, inputs: &[&DLTensor], outputs: &[&DLTensor]) -> Result<()> {
            crate::ndarray::copy_tensor(inputs[0], outputs[0], std::ptr::null_mut())
        }
    }

    const GRAPH: &str = r#"{"nodes": [{"op": "input", "name": "x", "attrs": {"shape": [[[2]]], "dtype": [["float32"]]}},
        {"op": "const", "name": "f_const_0", "attrs": {"shape": [[[2]]], "dtype": [["float32"]]}}],
        "arg_nodes": [0, 1], "heads": [[0, 0, 0]], "node_row_ptr": [0, 1, 2]}"#;

    fn f32_array(v: &[f32]) -> NDArray {
        let a = NDArray::empty(
            &[v.len() as i64],
            crate::abi::DLDataType { code: 2, bits: 32, lanes: 1 },
            crate::abi::DLDevice { device_type: 1, device_id: 0 },
        )
        .unwrap();
        a.copy_from_bytes(&v.iter().flat_map(|x| x.to_le_bytes()).collect::<Vec<_>>()).unwrap();
        a
    }

    #[test]
    fn functions_and_round_trip() {
        let m = JsonModule::new(&Copy, "f".into(), GRAPH.into(), vec!["f_const_0".into()]).unwrap();
        let bytes = m.save_to_binary().unwrap();
        let (symbol, graph, consts) = read_payload(&mut Reader::new(&bytes, "test")).unwrap();
        assert_eq!((symbol.as_str(), graph.as_str(), consts), ("f", GRAPH, vec!["f_const_0".to_owned()]));
        assert_eq!(m.get_source("json").unwrap(), GRAPH);
        let m = Module::new(m);
        let get = |n: &str| m.get_function(n, false).unwrap();
        assert!(matches!(get("get_symbol").unwrap().call(&[]).unwrap(), Value::Str(s) if s.as_str() == "f"));
        assert!(get("other").is_none());
        let (x, y) = (f32_array(&[1.0, 2.0]), f32_array(&[0.0, 0.0]));
        let run = get("f").unwrap();
        let e = run.call(&[Value::NDArray(x.clone()), Value::NDArray(y.clone())]).unwrap_err();
        assert!(e.to_string().contains("The module has not been initialized"), "{e}");
        let init = get("__init_f").unwrap();
        let e = init.call(&[Value::Object(ArrayObj::new_object(vec![]))]).unwrap_err();
        assert!(e.to_string().contains("0 given, 1 required"), "{e}");
        let consts = ArrayObj::new_object(vec![Some(f32_array(&[3.0, 4.0]).into_object())]);
        assert!(matches!(init.call(&[Value::Object(consts)]).unwrap(), Value::Int(0)));
        run.call(&[Value::NDArray(x), Value::NDArray(y.clone())]).unwrap();
        assert_eq!(y.to_bytes().unwrap(), f32_array(&[1.0, 2.0]).to_bytes().unwrap());
        let e = run.call(&[Value::NDArray(y)]).unwrap_err();
        assert!(e.to_string().contains("1 given, 2 required"), "{e}");
    }
}
