//! [`GraphExecutor`] and what can be read from a graph without running it ([`GraphInfo`]).

use crate::{DataType, Device, Error, Module, NDArray, Result};
use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use tvm_runtime::executor::graph::json::{Graph, NodeEntry};
use tvm_runtime::executor::graph::{GraphExecutor as CoreExecutor, GraphExecutorFactory};
use tvm_runtime::module::Module as CoreModule;

/// The name, shape and element type of a graph input, output or parameter.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TensorInfo {
    /// The name (for outputs: the name of the node that produces it).
    pub name: String,
    /// The shape.
    pub shape: Vec<i64>,
    /// The element type.
    pub dtype: DataType,
}

impl TensorInfo {
    /// The size of such a tensor in bytes.
    pub fn byte_size(&self) -> usize {
        let n: usize = self.shape.iter().map(|&d| usize::try_from(d).unwrap_or(0)).product();
        n * self.dtype.element_bytes()
    }
}

/// One operator node of a graph.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OpNode {
    /// The node's name.
    pub name: String,
    /// The function it calls (`__nop`, `__copy` or a kernel of the library).
    pub func_name: String,
    /// Its arguments, inputs then outputs.
    pub args: Vec<TensorInfo>,
}

impl OpNode {
    /// The operator kind: the kernel name less TVM's `tvmgen_<module>_` and `fused_` prefixes
    /// and its `_<n>` variant suffix (`nn_conv2d_add_nn_relu`).
    pub fn kind(&self) -> String {
        let mut s = self.func_name.as_str();
        if let Some(rest) = s.strip_prefix("tvmgen_") {
            s = rest.split_once('_').map_or(rest, |(_, r)| r);
        }
        s = s.strip_prefix("fused_").unwrap_or(s);
        match s.rsplit_once('_') {
            Some((head, tail)) if !head.is_empty() && tail.bytes().all(|b| b.is_ascii_digit()) => head.to_owned(),
            _ => s.to_owned(),
        }
    }
}

/// What a graph says about itself: inputs, parameters, outputs, operators and devices.
#[derive(Clone, Debug)]
pub struct GraphInfo {
    /// Inputs the caller sets (graph inputs that are not parameters).
    pub inputs: Vec<TensorInfo>,
    /// Parameters (inputs whose values come with the model).
    pub params: Vec<TensorInfo>,
    /// Outputs, in output-index order.
    pub outputs: Vec<TensorInfo>,
    /// Number of nodes (inputs and parameters included).
    pub num_nodes: usize,
    /// The operator nodes, in execution order.
    pub ops: Vec<OpNode>,
    /// Device types the graph places data on (its `device_index` attribute), sorted; empty when
    /// the graph has no such attribute (all on the executor's first device).
    pub device_types: Vec<i32>,
}

impl GraphInfo {
    /// The devices an executor of this graph needs with `main` first: `main`, then device 0 of
    /// every other device type the graph places data on (heterogeneous graphs).
    pub fn devices_for(&self, main: Device) -> Vec<Device> {
        let mut v = vec![main];
        for &t in &self.device_types {
            if !v.iter().any(|d| d.device_type() == t) {
                v.push(Device::new(t, 0));
            }
        }
        v
    }

    /// Reads a graph JSON; `param_names` are the inputs whose values come with the model.
    pub fn from_json(graph_json: &str, param_names: &[String]) -> Result<GraphInfo> {
        let g = Graph::parse(graph_json)?;
        Ok(Self::from_graph(&g, param_names))
    }

    fn from_graph(g: &Graph, param_names: &[String]) -> GraphInfo {
        let info = |eid: usize, name: &str| TensorInfo {
            name: name.to_owned(),
            shape: g.shape[eid].clone(),
            dtype: DataType::from_dl(g.dltype[eid]),
        };
        let params: BTreeSet<&str> = param_names.iter().map(String::as_str).collect();
        let (mut inputs, mut ps) = (Vec::new(), Vec::new());
        for &nid in &g.arg_nodes {
            let name = &g.nodes[nid as usize].name;
            let t = info(g.entry_id(NodeEntry { node_id: nid, index: 0 }), name);
            if params.contains(name.as_str()) {
                ps.push(t);
            } else {
                inputs.push(t);
            }
        }
        let outputs = g.heads.iter().map(|&e| info(g.entry_id(e), &g.nodes[e.node_id as usize].name)).collect();
        let ops = g
            .nodes
            .iter()
            .enumerate()
            .filter(|(_, n)| n.op != "null")
            .map(|(nid, n)| {
                let mut args: Vec<TensorInfo> = n.inputs.iter().map(|&e| info(g.entry_id(e), "")).collect();
                for k in 0..n.attrs.num_outputs {
                    args.push(info(g.entry_id(NodeEntry { node_id: nid as u32, index: k }), ""));
                }
                OpNode { name: n.name.clone(), func_name: n.attrs.func_name.clone(), args }
            })
            .collect();
        let device_types = g
            .device_index
            .as_ref()
            .map(|d| d.iter().copied().collect::<BTreeSet<i32>>().into_iter().collect())
            .unwrap_or_default();
        GraphInfo { inputs, params: ps, outputs, num_nodes: g.nodes.len(), ops, device_types }
    }

    /// Operator kinds ([`OpNode::kind`]) and how many nodes of each, by kind.
    pub fn op_kinds(&self) -> BTreeMap<String, usize> {
        let mut m = BTreeMap::new();
        for op in &self.ops {
            *m.entry(op.kind()).or_insert(0) += 1;
        }
        m
    }
}

/// What a graph executor factory module holds (the root module of a graph model exported by
/// TVM's `export_library`).
#[derive(Clone, Debug)]
pub struct FactoryInfo {
    /// The name of the function that creates an executor (`default`).
    pub module_name: String,
    /// The graph.
    pub graph: GraphInfo,
    /// The graph JSON.
    pub graph_json: String,
    /// The parameters with their size in bytes, in stored order.
    pub param_bytes: Vec<(String, usize)>,
}

impl Module {
    /// If this is a graph executor factory: its graph and parameters.
    pub fn factory_info(&self) -> Option<Result<FactoryInfo>> {
        let f = self.0.downcast::<GraphExecutorFactory>()?;
        let names: Vec<String> = f.params().iter().map(|(n, _)| n.clone()).collect();
        Some(GraphInfo::from_json(f.graph_json(), &names).map(|graph| FactoryInfo {
            module_name: f.module_name().to_owned(),
            graph,
            graph_json: f.graph_json().to_owned(),
            param_bytes: f.params().iter().map(|(n, a)| (n.clone(), a.byte_size().unwrap_or(0))).collect(),
        }))
    }
}

/// Per-operator time of one profiling run ([`GraphExecutor::profile`]).
#[derive(Clone, Debug)]
pub struct OpProfile {
    /// The node's name.
    pub node: String,
    /// The kernel it calls.
    pub func_name: String,
    /// Mean time per call, in microseconds.
    pub time_us: f64,
    /// Share of the summed operator time, in percent.
    pub percent: f64,
    /// Its arguments (inputs then outputs) as `dtype[d0, d1, ...]`.
    pub shapes: Vec<String>,
}

/// A graph executor: runs a graph of operators on one or more devices.
///
/// Inputs are copied in ([`GraphExecutor::set_input`]) and outputs copied out
/// ([`GraphExecutor::get_output`]), so no array handed out shares the executor's memory.
///
/// `Send + Sync`; methods that change its state take `&mut self`.
pub struct GraphExecutor {
    module: CoreModule,
    params: Vec<String>,
}

fn devices_dl(devices: &[Device]) -> Result<Vec<tvm_runtime::abi::DLDevice>> {
    if devices.is_empty() {
        return Err(Error::value("a graph executor needs at least one device"));
    }
    Ok(devices.iter().map(|d| d.dl()).collect())
}

/// Something that names an executor input: its name or its index (`usize`, `&str`, `String`).
/// Used by [`GraphExecutor`] and [`crate::AotExecutor`].
pub trait InputKey {
    /// The key as a name or an index.
    fn input_ref(&self) -> InputRef<'_>;
}

/// An input named by index or by name (what an [`InputKey`] says).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum InputRef<'a> {
    /// The input's position.
    Index(usize),
    /// The input's name.
    Name(&'a str),
}

impl InputKey for usize {
    fn input_ref(&self) -> InputRef<'_> {
        InputRef::Index(*self)
    }
}

impl InputKey for &str {
    fn input_ref(&self) -> InputRef<'_> {
        InputRef::Name(self)
    }
}

impl InputKey for String {
    fn input_ref(&self) -> InputRef<'_> {
        InputRef::Name(self)
    }
}

impl GraphExecutor {
    fn from_factory_impl(factory: &Module, devices: &[Device], debug: bool) -> Result<GraphExecutor> {
        let f = factory.0.downcast::<GraphExecutorFactory>().ok_or_else(|| {
            Error::type_error(format!(
                "the module is a {}, not a graph executor factory (GraphExecutorFactory): for a library with \
                 separate graph JSON, use GraphExecutor::new",
                factory.type_key()
            ))
        })?;
        let module = f.create_executor(&factory.0, devices_dl(devices)?, debug)?;
        Ok(GraphExecutor { module, params: f.params().iter().map(|(n, _)| n.clone()).collect() })
    }

    /// An executor from a graph executor factory (what `tvm.graph_executor.GraphModule(
    /// lib["default"](dev))` makes): the model's parameters are already set.
    pub fn from_factory(factory: &Module, devices: &[Device]) -> Result<GraphExecutor> {
        Self::from_factory_impl(factory, devices, false)
    }

    /// A debug executor from a factory: the same, plus per-operator profiling.
    pub fn debug_from_factory(factory: &Module, devices: &[Device]) -> Result<GraphExecutor> {
        Self::from_factory_impl(factory, devices, true)
    }

    /// An executor from graph JSON and the library holding its kernels
    /// (`tvm.graph_executor.create`); load parameters with [`GraphExecutor::load_params`].
    pub fn new(graph_json: &str, lib: &Module, devices: &[Device]) -> Result<GraphExecutor> {
        let exec = CoreExecutor::create(graph_json, lib.0.clone(), devices_dl(devices)?, None, &[], false)?;
        Ok(GraphExecutor { module: CoreModule::new(exec), params: Vec::new() })
    }

    fn exec(&self) -> &CoreExecutor {
        self.module.downcast::<CoreExecutor>().unwrap_or_else(|| unreachable!("graph executor module"))
    }

    /// The graph's inputs, parameters, outputs and operators.
    pub fn info(&self) -> GraphInfo {
        GraphInfo::from_graph(self.exec().graph(), &self.params)
    }

    /// Number of graph inputs (parameters included).
    pub fn num_inputs(&self) -> usize {
        self.exec().num_inputs()
    }

    /// Number of outputs.
    pub fn num_outputs(&self) -> usize {
        self.exec().num_outputs()
    }

    /// The index of input `name`.
    pub fn input_index(&self, name: &str) -> Option<usize> {
        self.exec().input_index(name)
    }

    /// The index an input key names, or an error naming the missing input.
    fn resolve(&self, input: &impl InputKey) -> Result<usize> {
        match input.input_ref() {
            InputRef::Index(i) => {
                let n = self.num_inputs();
                if i >= n {
                    return Err(Error::index(format!("input index {i} out of range: the graph has {n} inputs")));
                }
                Ok(i)
            }
            InputRef::Name(name) => self.input_index(name).ok_or_else(|| {
                let names: Vec<String> = self.info().inputs.into_iter().map(|t| t.name).collect();
                Error::key(format!("the graph has no input named {name} (its inputs: {})", names.join(", ")))
            }),
        }
    }

    /// Copies `value` into an input (by name or index); its dtype and shape must match.
    pub fn set_input(&mut self, input: impl InputKey, value: &NDArray) -> Result<()> {
        let idx = self.resolve(&input)?;
        let g = self.exec().graph();
        let eid = g.entry_id(NodeEntry { node_id: g.arg_nodes[idx], index: 0 });
        if value.shape() != g.shape[eid].as_slice() {
            return Err(Error::value(format!(
                "input {}: shape {:?} does not match the graph's {:?}",
                g.nodes[g.arg_nodes[idx] as usize].name,
                value.shape(),
                g.shape[eid]
            )));
        }
        self.exec().set_input(idx, value.0.tensor())
    }

    /// A copy of an input (by name or index).
    pub fn get_input(&self, input: impl InputKey) -> Result<NDArray> {
        let idx = self.resolve(&input)?;
        let view = NDArray(self.exec().get_input(idx)?);
        view.copy_to(view.device())
    }

    /// Runs the graph once.
    pub fn run(&mut self) -> Result<()> {
        self.exec().run()
    }

    /// A copy of output `index` (on the device that computed it).
    pub fn get_output(&self, index: usize) -> Result<NDArray> {
        let view = NDArray(self.exec().get_output(index)?);
        view.copy_to(view.device())
    }

    /// Loads parameters from the bytes of a params file (`tvm.runtime.save_param_dict`).
    pub fn load_params(&mut self, params: &[u8]) -> Result<()> {
        self.exec().load_params(params)?;
        for n in tvm_runtime::ndarray::serialize::load_param_names(params)? {
            if self.input_index(&n).is_some() && !self.params.contains(&n) {
                self.params.push(n);
            }
        }
        Ok(())
    }

    /// Loads parameters from a params file.
    pub fn load_params_file(&mut self, path: impl AsRef<Path>) -> Result<()> {
        let path = path.as_ref();
        let bytes = std::fs::read(path).map_err(|e| Error::value(format!("cannot read {}: {e}", path.display())))?;
        self.load_params(&bytes)
    }

    /// Times every operator on its own (the debug executor's `run_individual`): runs the graph
    /// once, then each operator `number` times; sorted by time, longest first.
    pub fn profile(&mut self, number: usize) -> Result<Vec<OpProfile>> {
        let number = i64::try_from(number.max(1)).map_err(|_| Error::value("number too large"))?;
        let times = self.exec().run_individual(number, 1, 0)?;
        let secs: Vec<f64> = times.split(',').filter(|s| !s.is_empty()).map(|s| s.parse().unwrap_or(0.0)).collect();
        let g = self.exec().graph();
        let info = GraphInfo::from_graph(g, &self.params);
        let op_ids: Vec<usize> = g.nodes.iter().enumerate().filter(|(_, n)| n.op != "null").map(|(i, _)| i).collect();
        let total: f64 = op_ids.iter().map(|&i| secs.get(i).copied().unwrap_or(0.0)).sum();
        let mut out: Vec<OpProfile> = op_ids
            .iter()
            .zip(info.ops)
            .map(|(&nid, op)| {
                let t = secs.get(nid).copied().unwrap_or(0.0);
                OpProfile {
                    node: op.name,
                    func_name: op.func_name,
                    time_us: t * 1e6,
                    percent: if total > 0.0 { t / total * 100.0 } else { 0.0 },
                    shapes: op.args.iter().map(|a| format!("{}{:?}", a.dtype, a.shape)).collect(),
                }
            })
            .collect();
        out.sort_by(|a, b| b.time_us.total_cmp(&a.time_us));
        Ok(out)
    }

    /// The executor as a module, whose functions (`set_input`, `run`, `get_output`, ...) are
    /// TVM's (note that its `get_output` returns a view of the executor's own memory).
    pub fn as_module(&self) -> Module {
        Module(self.module.clone())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn op_kinds_strip_prefixes_and_variants() {
        let op = |f: &str| OpNode { name: String::new(), func_name: f.into(), args: vec![] };
        assert_eq!(op("tvmgen_default_fused_nn_conv2d_add_nn_relu_7").kind(), "nn_conv2d_add_nn_relu");
        assert_eq!(op("fused_nn_softmax").kind(), "nn_softmax");
        assert_eq!(op("__nop").kind(), "__nop");
        assert_eq!(op("tvmgen_mod_fused_layout_transform").kind(), "layout_transform");
    }
}
