//! The AOT executor factory (type key `AotExecutorFactory`, TVM v0.9-v0.19): the module at the
//! root of an AOT export. Its function `<module_name>(dev...)` creates an [`AotExecutor`] over
//! its import #0 (the metadata module) and sets the params it carries.
//!
//! Serialized form (`runtime.module.loadbinary_AotExecutorFactory`): u64 param count, the
//! param names (`vector<string>`), that many NDArray records, the module name (string).

use super::executor::AotExecutor;
use crate::abi::DLDevice;
use crate::error::{Error, Result};
use crate::function::PackedFunc;
use crate::io::{Reader, Writer};
use crate::module::{Module, ModuleNode};
use crate::ndarray::serialize::{load_ndarray, save_ndarray};
use crate::ndarray::NDArray;
use crate::object::{ArrayObj, StringObj};
use crate::value::{Args, Value};
use std::any::Any;

/// An AOT executor factory.
pub struct AotExecutorFactory {
    params: Vec<(String, NDArray)>,
    module_name: String,
}

impl AotExecutorFactory {
    /// A factory; its code module is the module's import #0, attached by the caller.
    pub fn new(params: Vec<(String, NDArray)>, module_name: String) -> Self {
        AotExecutorFactory { params, module_name }
    }

    /// Reads the serialized form.
    pub fn load(r: &mut Reader<'_>) -> Result<AotExecutorFactory> {
        let n = r.u64()?;
        let names = r.vec_string()?;
        if names.len() as u64 != n {
            return Err(Error::value(format!(
                "AotExecutorFactory: {n} params announced but {} names stored",
                names.len()
            )));
        }
        let mut params = Vec::with_capacity(names.len());
        for name in names {
            let a = load_ndarray(r).map_err(|e| e.context(format!("AotExecutorFactory: param {name}")))?;
            params.push((name, a));
        }
        let module_name = r.string().map_err(|e| e.context("AotExecutorFactory: module name"))?;
        Ok(AotExecutorFactory { params, module_name })
    }

    /// The name under which the executor constructor is found (`default`).
    pub fn module_name(&self) -> &str {
        &self.module_name
    }

    /// The params it sets on each executor it creates, in stored order.
    pub fn params(&self) -> &[(String, NDArray)] {
        &self.params
    }

    fn code_module(this: &Module) -> Result<Module> {
        this.imports().into_iter().next().ok_or_else(|| Error::value("AotExecutorFactory has no import #0 to run"))
    }

    /// Creates an executor on `devices` with this factory's params set (largest first, as
    /// TVM uploads them; params that are no input are skipped, as in TVM v0.9).
    pub fn create_executor(&self, this: &Module, devices: &[DLDevice]) -> Result<Module> {
        let exec = AotExecutor::new(Self::code_module(this)?, devices)?;
        let mut order: Vec<&(String, NDArray)> = self.params.iter().collect();
        order.sort_by_key(|(_, a)| std::cmp::Reverse(a.byte_size().unwrap_or(0)));
        for (name, a) in order {
            if let Some(idx) = exec.input_index(name)? {
                exec.set_input(idx, a.tensor()).map_err(|e| e.context(format!("param {name}")))?;
            }
        }
        Ok(Module::new(exec))
    }
}

impl ModuleNode for AotExecutorFactory {
    fn type_key(&self) -> &str {
        "AotExecutorFactory"
    }

    fn get_function(&self, name: &str, this: &Module) -> Result<Option<PackedFunc>> {
        let with = |f: fn(&AotExecutorFactory, &Module, &Args<'_>) -> Result<Value>| this.method(f);
        Ok(Some(match name {
            n if n == self.module_name => with(|fac, m, a| {
                if a.is_empty() {
                    return Err(Error::value("Must supply at least one device argument"));
                }
                let devices = (0..a.len()).map(|i| a.device(i)).collect::<Result<Vec<_>>>()?;
                Ok(Value::Module(fac.create_executor(m, &devices)?))
            }),
            "list_module_names" => with(|fac, _, _| {
                Ok(Value::Object(ArrayObj::new_object(vec![Some(StringObj::new_object(fac.module_name.as_bytes()))])))
            }),
            "remove_params" => with(|fac, m, _| {
                let f = Module::new(AotExecutorFactory::new(Vec::new(), fac.module_name.clone()));
                f.import(AotExecutorFactory::code_module(m)?)?;
                Ok(Value::Module(f))
            }),
            _ => return Ok(None),
        }))
    }

    fn save_to_binary(&self) -> Result<Vec<u8>> {
        let mut w = Writer::default();
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

/// `tvm.aot_executor_factory.create(module, module_name, [name, param]...)`.
pub(crate) fn create_global(a: &Args<'_>) -> Result<Value> {
    if a.len() < 2 || (a.len() - 2) % 2 != 0 {
        return Err(Error::value(format!(
            "tvm.aot_executor_factory.create expects a module, a module name and (name, param) pairs, got {} arguments",
            a.len()
        )));
    }
    let code = a.module(0)?.ok_or_else(|| Error::value("the code module must not be None"))?;
    let name = a.string(1)?;
    let mut params = Vec::new();
    for k in (2..a.len()).step_by(2) {
        let p = a
            .ndarray(k + 1)?
            .ok_or_else(|| Error::value(format!("param {} must be an NDArray", a.string(k).unwrap_or_default())))?;
        params.push((a.string(k)?, p));
    }
    let m = Module::new(AotExecutorFactory::new(params, name));
    m.import(code)?;
    Ok(Value::Module(m))
}
