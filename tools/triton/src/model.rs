//! A loaded export and the executors made from it: graph executor factories, AOT executor
//! factories and Relay VM executables behind one interface (as `tvmrt` runs them).
//!
//! The export is loaded once per model; every instance makes its own executor from that one
//! module. Graph executors use the factory's parameter arrays in place (one copy of the weights
//! whatever the instance count) and the VM reads the executable's constants; the AOT executor
//! copies the factory's params into its own inputs, as TVM's does.

use std::path::Path;
use tvm_rt::{AllocatorKind, AotExecutor, DataType, Device, GraphExecutor, GraphInfo, Module, NDArray, VirtualMachine};

/// What kind of export a module is (graph, AOT, Relay VM).
pub use tvm_rt::ModelKind as Kind;

/// An input or output as the model records it (the VM records input names only).
#[derive(Clone, Debug, PartialEq)]
pub struct TensorDesc {
    /// The name (outputs: the producing node's, informative only).
    pub name: String,
    /// The element type, where recorded.
    pub dtype: Option<DataType>,
    /// The shape, where recorded.
    pub shape: Option<Vec<i64>>,
}

/// The inputs and outputs of a model.
#[derive(Clone, Debug, PartialEq)]
pub struct ModelIo {
    /// The inputs, in the model's order.
    pub inputs: Vec<TensorDesc>,
    /// The outputs (`None`: not recorded, Relay VM).
    pub outputs: Option<Vec<TensorDesc>>,
}

/// A loaded export.
pub struct Model {
    module: Module,
    kind: Kind,
    io: ModelIo,
    vm_function: String,
    /// A graph model's graph (the devices it places data on).
    graph: Option<GraphInfo>,
}

fn desc(t: &tvm_rt::TensorInfo) -> TensorDesc {
    TensorDesc { name: t.name.clone(), dtype: Some(t.dtype), shape: Some(t.shape.clone()) }
}

impl Model {
    /// Loads the export at `path`; `vm_function` is the entry function of a VM executable.
    pub fn load(path: &Path, vm_function: &str) -> Result<Model, String> {
        if !path.is_file() {
            return Err(format!("{}: no such file (the model's export, default_model_filename)", path.display()));
        }
        let module = Module::load(path).map_err(|e| format!("{}: cannot load the export: {e}", path.display()))?;
        Model::from_module(module, vm_function).map_err(|e| format!("{}: {e}", path.display()))
    }

    /// A model from a loaded module.
    pub fn from_module(module: Module, vm_function: &str) -> Result<Model, String> {
        let kind = module.model_kind().ok_or_else(|| {
            format!(
                "a {} module is no model this backend runs (expected a graph executor factory, an AOT executor \
                 factory or a Relay VM executable, as TVM's export_library writes them)",
                module.type_key()
            )
        })?;
        let mut graph = None;
        let io = match kind {
            Kind::Graph => {
                let g = module.factory_info().ok_or("no graph")?.map_err(|e| e.to_string())?.graph;
                let io = ModelIo {
                    inputs: g.inputs.iter().map(desc).collect(),
                    outputs: Some(g.outputs.iter().map(desc).collect()),
                };
                graph = Some(g);
                io
            }
            Kind::Aot => {
                let info = module.aot_info().ok_or("no AOT info")?.map_err(|e| e.to_string())?;
                ModelIo {
                    inputs: info.inputs.iter().map(desc).collect(),
                    outputs: Some(info.outputs.iter().map(desc).collect()),
                }
            }
            Kind::Vm => {
                let info = module.vm_info().ok_or("no VM info")?;
                let f = info.function(vm_function).ok_or_else(|| {
                    let names: Vec<&str> = info.functions.iter().map(|f| f.name.as_str()).collect();
                    format!(
                        "the Relay VM executable has no function {vm_function:?} (its functions: {}); name one with \
                         parameters {{ key: \"function\" value: {{ string_value: \"...\" }} }}",
                        names.join(", ")
                    )
                })?;
                let inputs =
                    f.params.iter().map(|n| TensorDesc { name: n.clone(), dtype: None, shape: None }).collect();
                ModelIo { inputs, outputs: None }
            }
            // `Module::model_kind` never says Relax (those exports load as `RelaxModule`s).
            Kind::Relax => return Err("a Relax VM executable (TVM v0.22+) is not served by this backend yet".into()),
        };
        Ok(Model { module, kind, io, vm_function: vm_function.to_owned(), graph })
    }

    /// The kind of export.
    pub fn kind(&self) -> Kind {
        self.kind
    }

    /// Its inputs and outputs.
    pub fn io(&self) -> &ModelIo {
        &self.io
    }

    /// The fixed first dimension of every input (the batch the model was built for), if the
    /// model records its shapes and they agree; `None` for a VM (symbolic shapes).
    pub fn fixed_batch(&self) -> Option<i64> {
        let mut firsts = self.io.inputs.iter().map(|t| t.shape.as_ref().and_then(|s| s.first().copied()));
        let first = firsts.next()??;
        firsts.all(|f| f == Some(first)).then_some(first)
    }

    /// A new executor on `dev` (a graph that places data on other device types too gets device
    /// 0 of each; a VM on a GPU gets the CPU as its host device). Inputs and outputs stay in host
    /// memory: the executor copies them to and from `dev`.
    pub fn executor(&self, dev: Device) -> Result<Executor, String> {
        let e = match self.kind {
            Kind::Graph => {
                let devices = self.graph.as_ref().map_or_else(|| vec![dev], |g| g.devices_for(dev));
                Runner::Graph(Box::new(GraphExecutor::from_factory(&self.module, &devices).map_err(s)?))
            }
            Kind::Aot => Runner::Aot(Box::new(AotExecutor::from_factory(&self.module, &[dev]).map_err(s)?)),
            Kind::Vm => {
                let devices = if dev == Device::cpu() { vec![dev] } else { vec![dev, Device::cpu()] };
                Runner::Vm(Box::new(VirtualMachine::new(&self.module, &devices, AllocatorKind::Pooled).map_err(s)?))
            }
            Kind::Relax => return Err("a Relax VM executable (TVM v0.22+) is not served by this backend yet".into()),
        };
        Ok(Executor {
            runner: e,
            names: self.io.inputs.iter().map(|t| t.name.clone()).collect(),
            func: self.vm_function.clone(),
        })
    }
}

fn s(e: tvm_rt::Error) -> String {
    e.to_string()
}

enum Runner {
    Graph(Box<GraphExecutor>),
    Aot(Box<AotExecutor>),
    Vm(Box<VirtualMachine>),
}

/// One instance's executor.
pub struct Executor {
    runner: Runner,
    names: Vec<String>,
    func: String,
}

impl Executor {
    /// Runs the model on `inputs` (in the model's input order) and returns its outputs, copied
    /// out (a VM's tuple result flattened depth first).
    pub fn run(&mut self, inputs: &[NDArray]) -> Result<Vec<NDArray>, String> {
        if inputs.len() != self.names.len() {
            return Err(format!("the model takes {} inputs, got {}", self.names.len(), inputs.len()));
        }
        match &mut self.runner {
            Runner::Graph(e) => {
                for (n, a) in self.names.iter().zip(inputs) {
                    e.set_input(n.as_str(), a).map_err(s)?;
                }
                e.run().map_err(s)?;
                (0..e.num_outputs()).map(|i| e.get_output(i).map_err(s)).collect()
            }
            Runner::Aot(e) => {
                for (n, a) in self.names.iter().zip(inputs) {
                    e.set_input(n.as_str(), a).map_err(s)?;
                }
                e.run().map_err(s)?;
                (0..e.num_outputs()).map(|i| e.get_output(i).map_err(s)).collect()
            }
            Runner::Vm(vm) => vm.run(&self.func, inputs).map_err(s),
        }
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// A fixture's path, or `None` (skip) when the shared fixtures are absent (fails under CI).
    pub(crate) fn fixture(rel: &str) -> Option<std::path::PathBuf> {
        let p = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared").join(rel);
        if p.exists() {
            return Some(p);
        }
        assert_ne!(std::env::var("CI").as_deref(), Ok("true"), "fixture {} missing", p.display());
        eprintln!("SKIP: {} not found", p.display());
        None
    }

    #[test]
    fn every_kind_loads_with_its_inputs_and_outputs() {
        let Some(graph) = fixture("fixtures/mlp.so") else { return };
        let m = Model::load(&graph, "main").unwrap();
        assert_eq!(m.kind(), Kind::Graph);
        assert_eq!(m.io().inputs[0].name, "data");
        assert_eq!(m.io().inputs[0].shape.as_deref(), Some(&[1, 1, 28, 28][..]));
        assert_eq!(m.fixed_batch(), Some(1));
        let Some(aot) = fixture("fixtures-v0.18/aot_mlp.so") else { return };
        let m = Model::load(&aot, "main").unwrap();
        assert_eq!(m.kind(), Kind::Aot);
        assert_eq!(m.io().outputs.as_ref().map(Vec::len), Some(1));
        let Some(vm) = fixture("fixtures-vm/vm_dyn_batch.so") else { return };
        let m = Model::load(&vm, "main").unwrap();
        assert_eq!(m.kind(), Kind::Vm);
        assert_eq!(m.fixed_batch(), None);
        assert!(m.io().outputs.is_none());
        let e = Model::load(&vm, "nope").err().unwrap();
        assert!(e.contains("no function \"nope\"") && e.contains("main"), "{e}");
    }

    #[test]
    fn what_is_no_model_is_refused_with_the_reason() {
        let Some(op) = fixture("fixtures/add_one.so") else { return };
        let e = Model::load(&op, "main").err().unwrap();
        assert!(e.contains("no model this backend runs"), "{e}");
        let e = Model::load(Path::new("/nonexistent/model.so"), "main").err().unwrap();
        assert!(e.contains("no such file"), "{e}");
        let dir = std::env::temp_dir().join(format!("triton-tvm-test-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let broken = dir.join("model.so");
        let bytes = std::fs::read(&op).unwrap();
        std::fs::write(&broken, &bytes[..bytes.len() / 3]).unwrap();
        let e = Model::load(&broken, "main").err().unwrap();
        assert!(e.contains("cannot load the export"), "{e}");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
