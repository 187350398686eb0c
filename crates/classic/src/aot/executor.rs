//! The AOT executor (type key `AotExecutor`, TVM v0.9-v0.19): the arrays of a compiled AOT
//! model's main function, laid out from its metadata, and the functions
//! `tvm.runtime.executor.AotModule` calls.
//!
//! The main function `<mod_name>___tvm_main__` takes every array as a `DLTensor*` (code 7), in
//! this order: the inputs, the outputs, then, when the model was compiled with the unified
//! static memory planner (USMP), one `uint8` array holding the merged constants and one
//! `uint8` array per workspace pool.

use super::metadata::Metadata;
use crate::abi::{DLDevice, DLTensor, TVMValue};
use crate::device;
use crate::error::{Error, Result};
use crate::function::PackedFunc;
use crate::module::{Module, ModuleNode};
use crate::ndarray::{copy_tensor, NDArray};
use crate::value::{code, dtype, Args, Value};
use parking_lot::Mutex;
use std::any::Any;
use std::sync::OnceLock;

/// TVM's `SanitizeName`: every character that is not ASCII alphanumeric becomes `_`
/// (`runtime.SanitizeName`; an empty name is an error).
pub fn sanitize_name(name: &str) -> Result<String> {
    if name.is_empty() {
        return Err(Error::value("Name is empty"));
    }
    Ok(name.chars().map(|c| if c.is_ascii_alphanumeric() { c } else { '_' }).collect())
}

/// An AOT executor.
pub struct AotExecutor {
    /// The module with `get_metadata` whose imports hold the code (the metadata module).
    module: Module,
    metadata: Metadata,
    /// Inputs, outputs, then the USMP pools (see the module doc).
    args: Vec<NDArray>,
    /// The main function, looked up on the first run.
    main: OnceLock<PackedFunc>,
    /// Serialises runs and input copies (the arrays are shared by every call).
    lock: Mutex<()>,
}

impl AotExecutor {
    /// Creates the executor for `module` (which has `get_metadata`) on `devices`: exactly one
    /// device, the CPU with id 0, as in TVM.
    pub fn new(module: Module, devices: &[DLDevice]) -> Result<AotExecutor> {
        let f = module
            .get_function("get_metadata", false)?
            .ok_or_else(|| Error::tvm("Expected a module with PackedFunc get_metadata"))?;
        let md = match f.call(&[])? {
            Value::Object(o) => Metadata::from_object(&o).cloned().ok_or_else(|| {
                Error::type_error("get_metadata returned an object that is not metadata.MetadataNode")
            })?,
            other => {
                return Err(Error::type_error(format!(
                    "get_metadata returned {}, not metadata",
                    crate::value::code_name(other.type_code())
                )))
            }
        };
        if devices.len() != 1 {
            return Err(Error::value(format!("Expect exactly 1 device passed, got {}", devices.len())));
        }
        let dev = devices[0];
        if dev.device_id != 0 {
            return Err(Error::value("At this time, AOTExecutor supports only execution on kDLCPU 0"));
        }
        if dev.device_type != device::CPU {
            return Err(Error::value(format!(
                "At this time, AOTExecutor supports only execution on kDLCPU 0 (got device type {}; \
                 this runtime has no Hexagon device)",
                dev.device_type
            )));
        }
        let mut args = Vec::new();
        for t in md.inputs.iter().chain(&md.outputs) {
            args.push(NDArray::empty(&t.shape, t.dtype, dev).map_err(|e| e.context(format!("AOT tensor {}", t.name)))?);
        }
        if !md.workspace_pools.is_empty() {
            args.push(constant_pool(&md, dev)?);
            for p in &md.workspace_pools {
                let bytes = device::shape_bytes(&p.shape, p.dtype)?;
                let len = i64::try_from(bytes).map_err(|_| Error::value("workspace pool too large"))?;
                args.push(NDArray::empty(&[len], dtype::dtype(1, 8, 1), dev)?);
            }
        }
        Ok(AotExecutor { module, metadata: md, args, main: OnceLock::new(), lock: Mutex::new(()) })
    }

    /// The metadata.
    pub fn metadata(&self) -> &Metadata {
        &self.metadata
    }

    /// Number of inputs.
    pub fn num_inputs(&self) -> usize {
        self.metadata.inputs.len()
    }

    /// Number of outputs.
    pub fn num_outputs(&self) -> usize {
        self.metadata.outputs.len()
    }

    /// Index of input `name` (sanitized first, as TVM does).
    pub fn input_index(&self, name: &str) -> Result<Option<usize>> {
        let n = sanitize_name(name)?;
        Ok(self.metadata.inputs.iter().position(|t| t.name == n))
    }

    /// Index of output `name` (sanitized first).
    pub fn output_index(&self, name: &str) -> Result<Option<usize>> {
        let n = sanitize_name(name)?;
        Ok(self.metadata.outputs.iter().position(|t| t.name == n))
    }

    fn check(idx: usize, n: usize, what: &str) -> Result<()> {
        if idx >= n {
            return Err(Error::index(format!("{what} index {idx} out of range: the model has {n} {what}s")));
        }
        Ok(())
    }

    /// Input `idx` (the executor's own array: writing it sets the input).
    pub fn input(&self, idx: usize) -> Result<NDArray> {
        Self::check(idx, self.num_inputs(), "input")?;
        Ok(self.args[idx].clone())
    }

    /// Output `idx` (the executor's own array).
    pub fn output(&self, idx: usize) -> Result<NDArray> {
        Self::check(idx, self.num_outputs(), "output")?;
        Ok(self.args[self.num_inputs() + idx].clone())
    }

    /// Copies `from` into input `idx` (shapes and types must agree).
    pub fn set_input(&self, idx: usize, from: &DLTensor) -> Result<()> {
        let dst = self.input(idx)?;
        let _g = self.lock.lock();
        copy_tensor(from, dst.tensor(), std::ptr::null_mut())
            .map_err(|e| e.context(format!("set_input {}", self.metadata.inputs[idx].name)))
    }

    /// Copies output `idx` into `to`.
    pub(crate) fn copy_output_to(&self, idx: usize, to: &DLTensor) -> Result<()> {
        let src = self.output(idx)?;
        let _g = self.lock.lock();
        copy_tensor(src.tensor(), to, std::ptr::null_mut())
    }

    /// Runs the model: `<mod_name>___tvm_main__` with every array.
    pub fn run(&self) -> Result<()> {
        let _run = crate::threading::run_scope();
        let main = match self.main.get() {
            Some(f) => f,
            None => {
                let name = format!("{}___tvm_main__", self.metadata.mod_name);
                let f = self
                    .module
                    .get_function(&name, true)?
                    .ok_or_else(|| Error::tvm(format!("Module entrypoint is not defined ({name})")))?;
                self.main.get_or_init(|| f)
            }
        };
        let values: Vec<TVMValue> = self.args.iter().map(|a| TVMValue { v_handle: a.handle().cast() }).collect();
        let codes = vec![code::DLTENSOR; values.len()];
        let _g = self.lock.lock();
        // SAFETY: every value is the DLTensor of an array this executor owns, alive for the call.
        let args = unsafe { Args::new(&values, &codes) };
        let mut rv = Value::Null;
        main.call_args(&args, &mut rv)
    }
}

/// The merged constant pool: a `uint8` array as long as the furthest constant's end, each
/// constant copied to its offset.
fn constant_pool(md: &Metadata, dev: DLDevice) -> Result<NDArray> {
    let mut len = 0usize;
    let mut parts = Vec::new();
    for c in &md.constant_pools {
        let bytes = match &c.data {
            Some(a) => a.to_bytes()?,
            None => Vec::new(),
        };
        let end = c
            .byte_offset
            .checked_add(bytes.len())
            .filter(|&e| e < i32::MAX as usize)
            .ok_or_else(|| Error::value(format!("AOT constant {} lies past 2 GiB", c.name_hint)))?;
        len = len.max(end);
        parts.push((c.byte_offset, bytes));
    }
    let mut blob = vec![0u8; len];
    for (off, b) in parts {
        blob[off..off + b.len()].copy_from_slice(&b);
    }
    let a = NDArray::empty(&[len as i64], dtype::dtype(1, 8, 1), dev)?;
    a.copy_from_bytes(&blob)?;
    Ok(a)
}

/// An `idx|name` argument: `Ok(Some(i))`, or an error naming an unknown name.
fn input_arg(e: &AotExecutor, a: &Args<'_>, i: usize) -> Result<usize> {
    match a.code(i)? {
        code::STR | code::OBJECT => {
            let name = a.string(i)?;
            e.input_index(&name)?
                .ok_or_else(|| Error::key(format!("Invalid input name: the model has no input {name}")))
        }
        _ => usize::try_from(a.i64(i)?).map_err(|_| Error::index("negative input index")),
    }
}

fn tensor_arg<'a>(a: &Args<'a>, i: usize) -> Result<&'a DLTensor> {
    let p = a.dltensor(i)?;
    // SAFETY: codes 7/13 carry a live DLTensor for the call (Args contract).
    unsafe { p.as_ref() }.ok_or_else(|| Error::value(format!("argument {i}: tensor must not be NULL")))
}

impl ModuleNode for AotExecutor {
    fn type_key(&self) -> &str {
        "AotExecutor"
    }

    fn get_function(&self, name: &str, this: &Module) -> Result<Option<PackedFunc>> {
        let with = |f: fn(&AotExecutor, &Args<'_>) -> Result<Value>| this.method(move |e, _, a| f(e, a));
        Ok(Some(match name {
            "set_input" => with(|e, a| {
                a.expect_len("set_input", 2)?;
                e.set_input(input_arg(e, a, 0)?, tensor_arg(a, 1)?).map(|()| Value::Null)
            }),
            "set_input_zero_copy" | "set_output_zero_copy" => {
                with(|_, _| Err(Error::tvm("zero-copy inputs and outputs are not implemented by the AOT executor")))
            }
            "get_input" => with(|e, a| Ok(Value::NDArray(e.input(input_arg(e, a, 0)?)?))),
            "get_output" => with(|e, a| {
                let idx = usize::try_from(a.i64(0)?).map_err(|_| Error::index("negative output index"))?;
                if a.len() == 2 {
                    e.copy_output_to(idx, tensor_arg(a, 1)?)?;
                    Ok(Value::Null)
                } else {
                    Ok(Value::NDArray(e.output(idx)?))
                }
            }),
            "get_num_inputs" => with(|e, _| Ok(Value::Int(e.num_inputs() as i64))),
            "get_num_outputs" => with(|e, _| Ok(Value::Int(e.num_outputs() as i64))),
            "run" => with(|e, _| e.run().map(|()| Value::Null)),
            "get_input_index" => with(|e, a| {
                if !matches!(a.code(0)?, code::STR | code::OBJECT) {
                    return Err(Error::type_error("Input key is not a string"));
                }
                let name = a.string(0)?;
                let idx = e.input_index(&name)?.ok_or_else(|| Error::key(format!("Invalid input name: {name}")))?;
                Ok(Value::Int(idx as i64))
            }),
            "get_input_name" => with(|e, a| {
                let idx = usize::try_from(a.i64(0)?).map_err(|_| Error::index("negative input index"))?;
                AotExecutor::check(idx, e.num_inputs(), "input")?;
                Ok(Value::str(e.metadata.inputs[idx].name.clone()))
            }),
            _ => return Ok(None),
        }))
    }

    fn as_any(&self) -> &dyn Any {
        self
    }
}
