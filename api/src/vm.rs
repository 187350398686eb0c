//! [`VirtualMachine`]: Relay VM executables (`relay.vm.compile` of TVM v0.8), loaded from the
//! one `.so` of `exe.mod.export_library` or from `exe.save()`'s bytecode plus the kernel
//! library; what an executable says about itself ([`VmExecutableInfo`]); results as
//! [`VmValue`] trees, flattened depth first.

use crate::graph::TensorInfo;
use crate::{DataType, Device, Error, Function, Module, NDArray, Result, Value};
use tvm_runtime::object::{AdtObj, ObjectRef};
use tvm_runtime::vm::module::ExecutableModule;
use tvm_runtime::vm::text;

/// One function of a VM executable.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct VmFunctionInfo {
    /// Its name (`main`, ...).
    pub name: String,
    /// Its parameter names, in order (the positional inputs of
    /// [`VirtualMachine::set_input`]). The executable records no shapes or types for them.
    pub params: Vec<String>,
    /// The device type each parameter is placed on (TVM's `DLDeviceType` numbers).
    pub param_device_types: Vec<i32>,
    /// Number of bytecode instructions.
    pub num_instructions: usize,
    /// Registers of one call frame.
    pub register_file_size: usize,
}

/// What a VM executable (a `VMExecutable` module) holds.
#[derive(Clone, Debug)]
pub struct VmExecutableInfo {
    /// Its functions, in function-index order.
    pub functions: Vec<VmFunctionInfo>,
    /// The kernels it calls (primitive functions), by packed index.
    pub primitives: Vec<String>,
    /// Its constants (named `const<i>`), in index order.
    pub constants: Vec<TensorInfo>,
    /// TVM's statistics text (`get_stats`).
    pub stats: String,
    /// TVM's bytecode listing (`get_bytecode`).
    pub bytecode: String,
}

impl VmExecutableInfo {
    /// The function `name`, if the executable has it.
    pub fn function(&self, name: &str) -> Option<&VmFunctionInfo> {
        self.functions.iter().find(|f| f.name == name)
    }
}

impl Module {
    /// If this is a VM executable (`VMExecutable`): its functions, kernels and constants.
    pub fn vm_info(&self) -> Option<VmExecutableInfo> {
        let e = self.0.downcast::<ExecutableModule>()?.executable();
        Some(VmExecutableInfo {
            functions: e
                .functions
                .iter()
                .map(|f| VmFunctionInfo {
                    name: f.name.clone(),
                    params: f.params.clone(),
                    param_device_types: f.params_device_type.clone(),
                    num_instructions: f.instructions.len(),
                    register_file_size: f.register_file_size,
                })
                .collect(),
            primitives: e.primitives.clone(),
            constants: e
                .constants
                .iter()
                .enumerate()
                .map(|(i, c)| TensorInfo {
                    name: format!("const{i}"),
                    shape: c.shape().to_vec(),
                    dtype: DataType::from_dl(c.dtype()),
                })
                .collect(),
            stats: text::stats(e),
            bytecode: text::bytecode(e),
        })
    }

    /// A VM executable from TVM's split form: the bytes `exe.save()` returns (also what
    /// `save` of a `VMExecutable` returns) and the kernel library (`runtime.Load_Executable`).
    pub fn vm_executable(code: &[u8], lib: &Module) -> Result<Module> {
        crate::module::install_slots()?;
        match global("runtime.Load_Executable")?.call((code, lib))? {
            Value::Module(m) => Ok(m),
            other => Err(Error::type_error(format!("runtime.Load_Executable returned {}", other.kind()))),
        }
    }
}

fn global(name: &str) -> Result<Function> {
    Function::get_global(name).ok_or_else(|| Error::internal(format!("{name} is not registered")))
}

/// How a [`VirtualMachine`] allocates the tensors of a run (TVM's `AllocatorType`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum AllocatorKind {
    /// Every block from the device and back to it when freed.
    Naive,
    /// Freed blocks are kept by size for the next run (TVM's default for `VirtualMachine`).
    #[default]
    Pooled,
}

impl AllocatorKind {
    fn code(self) -> i64 {
        match self {
            AllocatorKind::Naive => 1,
            AllocatorKind::Pooled => 2,
        }
    }
}

/// A VM result: a tensor, or a tuple (TVM's `runtime.ADT`) of results.
#[derive(Clone, Debug)]
pub enum VmValue {
    /// A tensor.
    Tensor(NDArray),
    /// A tuple or constructor value with its tag (0 for tuples) and fields.
    Tuple {
        /// The constructor tag.
        tag: i32,
        /// The fields, in order.
        fields: Vec<VmValue>,
    },
}

impl VmValue {
    fn from_object(o: &ObjectRef) -> Result<VmValue> {
        if let Some(adt) = o.downcast::<AdtObj>() {
            let fields = adt
                .fields
                .iter()
                .map(|f| {
                    f.as_ref().ok_or_else(|| Error::value("a VM result field is None")).and_then(VmValue::from_object)
                })
                .collect::<Result<Vec<_>>>()?;
            return Ok(VmValue::Tuple { tag: adt.tag, fields });
        }
        tvm_runtime::ndarray::NDArray::from_object(o.clone()).map(|a| VmValue::Tensor(NDArray(a))).ok_or_else(|| {
            let key = tvm_runtime::object::type_index2key(o.type_index()).unwrap_or_else(|_| "unknown".into());
            Error::type_error(format!("the VM returned a {key} object, which is neither a tensor nor a tuple"))
        })
    }

    fn from_value(v: Value) -> Result<VmValue> {
        match v {
            Value::NDArray(a) => Ok(VmValue::Tensor(a)),
            Value::Object(o) => VmValue::from_object(&o.0),
            other => Err(Error::type_error(format!("the VM returned {}, not a tensor or tuple", other.kind()))),
        }
    }

    /// The tensors, depth first (left to right, a tuple's fields before what follows it): the
    /// order of TVM's own flattening of nested tuple results (`vm_tuple`'s
    /// `((a, b), c)` gives `[a, b, c]`).
    pub fn flatten(self) -> Vec<NDArray> {
        let mut out = Vec::new();
        fn walk(v: VmValue, out: &mut Vec<NDArray>) {
            match v {
                VmValue::Tensor(a) => out.push(a),
                VmValue::Tuple { fields, .. } => fields.into_iter().for_each(|f| walk(f, out)),
            }
        }
        walk(self, &mut out);
        out
    }
}

/// One row of a VM profile ([`VirtualMachine::profile`]): a kernel call or one of the VM's own
/// operations (`VM::AllocStorage`, ...).
#[derive(Clone, Debug)]
pub struct VmOpProfile {
    /// The kernel or operation.
    pub name: String,
    /// Its time in microseconds.
    pub time_us: f64,
    /// Its share of the summed time of the rows, in percent.
    pub percent: f64,
    /// The device it ran on (`cpu0`).
    pub device: String,
    /// Its arguments' shapes (`float32[1, 784], float32[1, 128]`), where recorded.
    pub shapes: String,
}

/// A Relay virtual machine over an executable, initialised on its devices.
///
/// Inputs are copied in ([`VirtualMachine::set_input`]); results are new tensors (on the
/// device that computed them), never reused by later runs. One executable serves any number of
/// VMs.
///
/// `Send + Sync`; methods that change its state take `&mut self` (the VM also serialises
/// calls from several threads itself).
pub struct VirtualMachine {
    module: Module,
    exec: Module,
    info: VmExecutableInfo,
    profiling: bool,
}

impl VirtualMachine {
    fn create(exec: &Module, devices: &[Device], alloc: AllocatorKind, profiling: bool) -> Result<VirtualMachine> {
        let info = exec.vm_info().ok_or_else(|| {
            Error::type_error(format!("the module is a {}, not a Relay VM executable (VMExecutable)", exec.type_key()))
        })?;
        if devices.is_empty() {
            return Err(Error::value("a virtual machine needs at least one device"));
        }
        let ctor = if profiling { "runtime._VirtualMachineDebug" } else { "runtime._VirtualMachine" };
        let module = match global(ctor)?.call((exec,))? {
            Value::Module(m) => m,
            other => return Err(Error::type_error(format!("{ctor} returned {}", other.kind()))),
        };
        // As TVM's `VirtualMachine` in Python: the host CPU is always one of the devices.
        let mut devs = devices.to_vec();
        if !devs.iter().any(|d| d.device_type() == Device::CPU) {
            devs.push(Device::cpu());
        }
        let mut args = Vec::new();
        for d in devs {
            args.extend([
                Value::Int(i64::from(d.device_type())),
                Value::Int(i64::from(d.id())),
                Value::Int(alloc.code()),
            ]);
        }
        module.function("init")?.call(args)?;
        Ok(VirtualMachine { module, exec: exec.clone(), info, profiling })
    }

    /// A VM for `exec` (a `VMExecutable` module: [`Module::load`] of an exported executable,
    /// or [`Module::vm_executable`]) on `devices` (the first is where the model runs; the CPU
    /// is added when absent), allocating with `alloc`.
    pub fn new(exec: &Module, devices: &[Device], alloc: AllocatorKind) -> Result<VirtualMachine> {
        Self::create(exec, devices, alloc, false)
    }

    /// The profiling VM (TVM's `VirtualMachineProfiler`): the same, plus
    /// [`VirtualMachine::profile`].
    pub fn with_profiling(exec: &Module, devices: &[Device], alloc: AllocatorKind) -> Result<VirtualMachine> {
        Self::create(exec, devices, alloc, true)
    }

    /// The executable's functions, kernels and constants.
    pub fn info(&self) -> &VmExecutableInfo {
        &self.info
    }

    /// The executable module.
    pub fn executable(&self) -> &Module {
        &self.exec
    }

    fn func(&self, name: &str) -> Result<&VmFunctionInfo> {
        self.info.function(name).ok_or_else(|| {
            let names: Vec<&str> = self.info.functions.iter().map(|f| f.name.as_str()).collect();
            Error::key(format!("the executable has no function {name} (its functions: {})", names.join(", ")))
        })
    }

    /// The parameter names of function `func`.
    pub fn params(&self, func: &str) -> Result<&[String]> {
        Ok(&self.func(func)?.params)
    }

    /// The position of parameter `name` of function `func` (`get_input_index`).
    pub fn input_index(&self, func: &str, name: &str) -> Result<Option<usize>> {
        Ok(self.func(func)?.params.iter().position(|p| p == name))
    }

    /// Sets the inputs of function `func`, one per parameter, in order (copied to the devices
    /// the executable places them on).
    pub fn set_input(&mut self, func: &str, inputs: &[NDArray]) -> Result<()> {
        let f = self.func(func)?;
        if inputs.len() != f.params.len() {
            return Err(Error::value(format!(
                "{func} takes {} inputs ({}), got {}",
                f.params.len(),
                f.params.join(", "),
                inputs.len()
            )));
        }
        let mut args = vec![Value::Str(func.to_owned())];
        args.extend(inputs.iter().map(|a| Value::NDArray(a.clone())));
        self.module.function("set_input")?.call(args).map(|_| ())
    }

    /// Runs function `func` on the inputs set for it; its result as a tree.
    pub fn invoke(&mut self, func: &str) -> Result<VmValue> {
        self.func(func)?;
        VmValue::from_value(self.module.function("invoke")?.call((func,))?)
    }

    /// Sets the inputs of `func`, runs it and returns its result's tensors flattened depth first
    /// ([`VmValue::flatten`]).
    pub fn run(&mut self, func: &str, inputs: &[NDArray]) -> Result<Vec<NDArray>> {
        self.set_input(func, inputs)?;
        Ok(self.invoke(func)?.flatten())
    }

    /// Times one run of `func` on the inputs set for it, per kernel call and VM operation (after
    /// three untimed runs), longest first. Only for a VM made by
    /// [`VirtualMachine::with_profiling`].
    pub fn profile(&mut self, func: &str) -> Result<Vec<VmOpProfile>> {
        if !self.profiling {
            return Err(Error::value("profile needs a VM made by VirtualMachine::with_profiling"));
        }
        self.func(func)?;
        let json = match self.module.function("profile_rpc")?.call((func,))? {
            Value::Str(s) => s,
            other => return Err(Error::type_error(format!("profile_rpc returned {}", other.kind()))),
        };
        let report: serde_json::Value =
            serde_json::from_str(&json).map_err(|e| Error::internal(format!("the VM's profile is not JSON: {e}")))?;
        let calls = report["calls"].as_array().cloned().unwrap_or_default();
        let s = |c: &serde_json::Value, k: &str| c[k]["string"].as_str().unwrap_or("").to_owned();
        let mut rows: Vec<VmOpProfile> = calls
            .iter()
            .map(|c| VmOpProfile {
                name: s(c, "Name"),
                time_us: c["Duration (us)"]["microseconds"].as_f64().unwrap_or(0.0),
                percent: 0.0,
                device: s(c, "Device"),
                shapes: {
                    let a = s(c, "Argument Shapes");
                    if a.is_empty() {
                        s(c, "VM::Argument Shapes")
                    } else {
                        a
                    }
                },
            })
            .collect();
        let total: f64 = rows.iter().map(|r| r.time_us).sum();
        for r in &mut rows {
            r.percent = if total > 0.0 { r.time_us / total * 100.0 } else { 0.0 };
        }
        rows.sort_by(|a, b| b.time_us.total_cmp(&a.time_us));
        Ok(rows)
    }

    /// The VM as a module, whose functions (`init`, `set_input`, `invoke`, `get_output`, ...)
    /// are those TVM's `tvm.runtime.vm.VirtualMachine` calls.
    pub fn as_module(&self) -> Module {
        self.module.clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flatten_is_depth_first() {
        let t = |x: f32| VmValue::Tensor(NDArray::from_slice(&[x], &[1], Device::cpu()).unwrap());
        let v = VmValue::Tuple {
            tag: 0,
            fields: vec![
                VmValue::Tuple { tag: 0, fields: vec![t(1.0), t(2.0)] },
                t(3.0),
                VmValue::Tuple { tag: 0, fields: vec![] },
            ],
        };
        let flat: Vec<f32> = v.flatten().iter().map(|a| a.to_vec::<f32>().unwrap()[0]).collect();
        assert_eq!(flat, vec![1.0, 2.0, 3.0]);
    }
}
