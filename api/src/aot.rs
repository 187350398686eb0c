//! [`AotExecutor`]: models compiled ahead of time (`relay.build(..., executor=Executor("aot"))`
//! of TVM v0.9-v0.19, exported with `export_library`), and what their factory says about them
//! without running anything ([`AotInfo`]).

use crate::graph::{InputKey, InputRef, TensorInfo};
use crate::{DataType, Device, Error, Module, NDArray, Result};
use tvm_runtime::aot::executor::sanitize_name;
use tvm_runtime::aot::{AotExecutor as CoreExecutor, AotExecutorFactory, Metadata};
use tvm_runtime::module::Module as CoreModule;

/// What an AOT executor factory (the root module of an AOT export) holds, read from its
/// params and from the model's metadata (`get_metadata` of the module it imports).
#[derive(Clone, Debug)]
pub struct AotInfo {
    /// The name of the function that creates an executor (`default`).
    pub module_name: String,
    /// The compiled model's name, the prefix of its functions (`tvmgen_default`).
    pub model_name: String,
    /// Inputs the caller sets (the model's inputs less those the factory's params set), in
    /// input-index order.
    pub inputs: Vec<TensorInfo>,
    /// Inputs whose values come with the model (the factory's params).
    pub params: Vec<TensorInfo>,
    /// Outputs, in output-index order.
    pub outputs: Vec<TensorInfo>,
    /// The factory's params with their size in bytes, in stored order.
    pub param_bytes: Vec<(String, usize)>,
    /// Workspace pools of the unified static memory planner (empty without it).
    pub workspace_pools: Vec<TensorInfo>,
    /// Number of constants in the planner's constant pool (0 without it).
    pub num_constants: usize,
}

fn tensor(t: &tvm_runtime::aot::metadata::TensorInfo) -> TensorInfo {
    TensorInfo { name: t.name.clone(), shape: t.shape.clone(), dtype: DataType::from_dl(t.dtype) }
}

/// The metadata of the model `code` (the factory's import #0) describes.
fn metadata_of(code: &CoreModule) -> Result<Metadata> {
    let f = code
        .get_function("get_metadata", false)?
        .ok_or_else(|| Error::value("the AOT factory's code module has no get_metadata function"))?;
    match f.call(&[])? {
        tvm_runtime::value::Value::Object(o) => Metadata::from_object(&o)
            .cloned()
            .ok_or_else(|| Error::type_error("get_metadata returned an object that is not AOT metadata")),
        _ => Err(Error::type_error("get_metadata returned no object")),
    }
}

impl AotInfo {
    fn new(f: &AotExecutorFactory, md: &Metadata) -> Result<AotInfo> {
        let mut param_names = Vec::new();
        for (n, _) in f.params() {
            param_names.push(sanitize_name(n)?);
        }
        let (params, inputs): (Vec<TensorInfo>, Vec<TensorInfo>) =
            md.inputs.iter().map(tensor).partition(|t| param_names.contains(&t.name));
        Ok(AotInfo {
            module_name: f.module_name().to_owned(),
            model_name: md.mod_name.clone(),
            inputs,
            params,
            outputs: md.outputs.iter().map(tensor).collect(),
            param_bytes: f.params().iter().map(|(n, a)| (n.clone(), a.byte_size().unwrap_or(0))).collect(),
            workspace_pools: md.workspace_pools.iter().map(tensor).collect(),
            num_constants: md.constant_pools.len(),
        })
    }
}

impl Module {
    /// If this is an AOT executor factory: its model's inputs, outputs and params (reads the
    /// metadata; creates no executor).
    pub fn aot_info(&self) -> Option<Result<AotInfo>> {
        let f = self.0.downcast::<AotExecutorFactory>()?;
        Some((|| {
            let code = self.0.imports().into_iter().next().ok_or_else(|| {
                Error::value("the AotExecutorFactory has no import #0 (the module holding the model's code)")
            })?;
            AotInfo::new(f, &metadata_of(&code)?)
        })())
    }
}

/// An AOT executor: runs a model's ahead-of-time compiled main function on the CPU.
///
/// Inputs are copied in ([`AotExecutor::set_input`]) and outputs copied out
/// ([`AotExecutor::get_output`]), so no array handed out shares the executor's memory. TVM's
/// AOT executor runs on CPU device 0 only; other devices are an error.
///
/// `Send + Sync`; methods that change its state take `&mut self` (the executor also serialises
/// runs and input copies itself).
pub struct AotExecutor {
    module: CoreModule,
    info: AotInfo,
}

impl AotExecutor {
    /// An executor from an AOT executor factory (what `tvm.runtime.executor.AotModule(
    /// lib["default"](dev))` makes): the model's params are already set. `devices` must be
    /// exactly `[Device::cpu()]`, as in TVM.
    pub fn from_factory(factory: &Module, devices: &[Device]) -> Result<AotExecutor> {
        let f = factory.0.downcast::<AotExecutorFactory>().ok_or_else(|| {
            Error::type_error(format!(
                "the module is a {}, not an AOT executor factory (AotExecutorFactory)",
                factory.type_key()
            ))
        })?;
        let dl: Vec<_> = devices.iter().map(|d| d.dl()).collect();
        let module = f.create_executor(&factory.0, &dl)?;
        let exec = module.downcast::<CoreExecutor>().ok_or_else(|| Error::internal("AOT executor expected"))?;
        let info = AotInfo::new(f, exec.metadata())?;
        Ok(AotExecutor { module, info })
    }

    fn exec(&self) -> &CoreExecutor {
        self.module.downcast::<CoreExecutor>().unwrap_or_else(|| unreachable!("AOT executor module"))
    }

    /// The model's inputs, params and outputs.
    pub fn info(&self) -> &AotInfo {
        &self.info
    }

    /// Number of inputs (params included).
    pub fn num_inputs(&self) -> usize {
        self.exec().num_inputs()
    }

    /// Number of outputs.
    pub fn num_outputs(&self) -> usize {
        self.exec().num_outputs()
    }

    /// The index of input `name` (TVM sanitizes names: characters other than ASCII letters and
    /// digits match `_`).
    pub fn input_index(&self, name: &str) -> Option<usize> {
        self.exec().input_index(name).ok().flatten()
    }

    /// The index of output `name`.
    pub fn output_index(&self, name: &str) -> Option<usize> {
        self.exec().output_index(name).ok().flatten()
    }

    fn resolve(&self, input: &impl InputKey) -> Result<usize> {
        match input.input_ref() {
            InputRef::Index(i) => {
                let n = self.num_inputs();
                if i >= n {
                    return Err(Error::index(format!("input index {i} out of range: the model has {n} inputs")));
                }
                Ok(i)
            }
            InputRef::Name(name) => self.input_index(name).ok_or_else(|| {
                let names: Vec<&str> = self.info.inputs.iter().map(|t| t.name.as_str()).collect();
                Error::key(format!("the model has no input named {name} (its inputs: {})", names.join(", ")))
            }),
        }
    }

    /// Copies `value` into an input (by name or index); its dtype and shape must match.
    pub fn set_input(&mut self, input: impl InputKey, value: &NDArray) -> Result<()> {
        let idx = self.resolve(&input)?;
        let t = &self.exec().metadata().inputs[idx];
        if value.shape() != t.shape.as_slice() || value.dtype() != DataType::from_dl(t.dtype) {
            return Err(Error::value(format!(
                "input {}: {}{:?} does not match the model's {}{:?}",
                t.name,
                value.dtype(),
                value.shape(),
                DataType::from_dl(t.dtype),
                t.shape
            )));
        }
        self.exec().set_input(idx, value.0.tensor())
    }

    /// A copy of an input (by name or index).
    pub fn get_input(&self, input: impl InputKey) -> Result<NDArray> {
        let idx = self.resolve(&input)?;
        let view = NDArray(self.exec().input(idx)?);
        view.copy_to(view.device())
    }

    /// Runs the model once.
    pub fn run(&mut self) -> Result<()> {
        self.exec().run()
    }

    /// A copy of output `index`.
    pub fn get_output(&self, index: usize) -> Result<NDArray> {
        let view = NDArray(self.exec().output(index)?);
        view.copy_to(view.device())
    }

    /// The executor as a module, whose functions (`set_input`, `run`, `get_output`,
    /// `get_input_name`, ...) are those TVM's `AotModule` calls (its `get_output` returns the
    /// executor's own array).
    pub fn as_module(&self) -> Module {
        Module(self.module.clone())
    }
}
