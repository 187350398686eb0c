//! The graph executor module, its factory and their globals.

pub mod executor;
pub mod factory;
pub mod json;

pub use executor::GraphExecutor;
pub use factory::GraphExecutorFactory;

use crate::abi::DLDevice;
use crate::error::{Error, Result};
use crate::function::PackedFunc;
use crate::module::{Module, ModuleNode};
use crate::registry::Registrar;
use crate::value::{code, Args, Value};
use std::any::Any;

impl ModuleNode for GraphExecutor {
    fn type_key(&self) -> &str {
        "GraphExecutor"
    }
    fn get_function(&self, name: &str, this: &Module) -> Result<Option<PackedFunc>> {
        Ok(executor::get_function(self, name, this))
    }
    fn as_any(&self) -> &dyn Any {
        self
    }
}

/// Arguments of `tvm.graph_executor.create`.
fn create_from_args(a: &Args<'_>, debug: bool) -> Result<Value> {
    let fname = if debug { "graph_executor_debug.create" } else { "graph_executor.create" };
    if a.len() < 4 {
        return Err(Error::value(format!(
            "The expected number of arguments for {fname} is at least 4, but it has {}",
            a.len()
        )));
    }
    let json = a.string(0)?;
    let module = a.module(1)?.ok_or_else(|| Error::value(format!("{fname}: the code module must not be None")))?;
    let (lookup, first_dev) = if a.code(2)? == code::FUNC { (a.func(2)?, 3) } else { (None, 2) };
    let rest = a.len() - first_dev;
    if rest == 0 || rest % 2 != 0 {
        return Err(Error::value(format!("{fname}: devices must come as (device_type, device_id) pairs")));
    }
    let devices = (0..rest / 2)
        .map(|k| Ok(DLDevice { device_type: a.i32(first_dev + 2 * k)?, device_id: a.i32(first_dev + 2 * k + 1)? }))
        .collect::<Result<Vec<_>>>()?;
    let exec = GraphExecutor::create(&json, module, devices, lookup, &[], debug)?;
    Ok(Value::Module(Module::new(exec)))
}

/// Registers the graph executor globals.
pub fn register(r: &mut Registrar<'_>) {
    r.func("tvm.graph_executor.create", |a| create_from_args(a, false));
    #[cfg(feature = "profiling")]
    r.func("tvm.graph_executor_debug.create", |a| create_from_args(a, true));
    r.func("tvm.graph_executor_factory.create", factory::create_global);
    r.func("runtime.module.loadbinary_GraphExecutorFactory", factory::load_binary_global);
    r.func("runtime.module.loadbinary_GraphRuntimeFactory", |a| {
        eprintln!("Warning: GraphRuntimeFactory is deprecated, use GraphExecutorFactory instead");
        factory::load_binary_global(a)
    });
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::abi::DLTensor;
    use crate::ndarray::NDArray;
    use crate::value::dtype::FLOAT32;

    /// A code module with `f_mul(a, b, out)`: elementwise float32 product.
    struct Ops;
    impl ModuleNode for Ops {
        fn type_key(&self) -> &str {
            "test_ops"
        }
        fn get_function(&self, name: &str, _this: &Module) -> Result<Option<PackedFunc>> {
            Ok((name == "f_mul").then(|| {
                PackedFunc::from_fn(|a| {
                    // SAFETY: the executor passes three live DLTensor arguments.
                    let t: Vec<&DLTensor> = (0..3).map(|i| unsafe { &*a.dltensor(i).unwrap() }).collect();
                    let n = crate::device::tensor_bytes(t[0])? / 4;
                    // SAFETY: the executor passes float32 tensors of n elements.
                    unsafe {
                        let (x, y, z) = (t[0].data.cast::<f32>(), t[1].data.cast::<f32>(), t[2].data.cast::<f32>());
                        for i in 0..n {
                            *z.add(i) = *x.add(i) * *y.add(i);
                        }
                    }
                    Ok(Value::Null)
                })
            }))
        }
        fn as_any(&self) -> &dyn Any {
            self
        }
    }

    fn floats(a: &NDArray) -> Vec<f32> {
        a.to_bytes().unwrap().chunks(4).map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]])).collect()
    }

    fn arr(v: &[f32]) -> NDArray {
        let a = NDArray::empty(&[1, v.len() as i64], FLOAT32, CPU0).unwrap();
        a.copy_from_bytes(&v.iter().flat_map(|x| x.to_le_bytes()).collect::<Vec<_>>()).unwrap();
        a
    }

    const CPU0: DLDevice = DLDevice { device_type: 1, device_id: 0 };

    #[test]
    fn runs_the_example_graph() {
        let json = json::tests_example();
        let x = arr(&[1., 2., 3., 4., 5., 6., 7., 8.]);
        let w = arr(&[2.; 8]);
        let fac = Module::new(GraphExecutorFactory::new(json.into(), vec![("w".into(), w.clone())], "default".into()));
        fac.import(Module::new(Ops)).unwrap();
        let create = fac.get_function("default", false).unwrap().unwrap();
        let m = match create.call(&[Value::Device(CPU0)]).unwrap() {
            Value::Module(m) => m,
            _ => panic!("not a module"),
        };
        assert_eq!(m.type_key(), "GraphExecutor");
        let e = m.downcast::<GraphExecutor>().unwrap();
        // The parameter is shared with the factory, not copied.
        assert!(e.get_output(0).is_ok());
        e.set_input(0, x.tensor()).unwrap();
        e.run().unwrap();
        assert_eq!(floats(&e.get_output(0).unwrap()), vec![2., 4., 6., 8., 10., 12., 14., 16.]);
        // Writing the shared parameter through get_input gives the executor its own copy.
        let wv = e.get_input(1).unwrap();
        assert!(!wv.ptr_eq(&w));
        wv.copy_from(arr(&[3.; 8]).tensor()).unwrap();
        e.run().unwrap();
        assert_eq!(floats(&e.get_output(0).unwrap())[0], 3.);
        assert_eq!(floats(&w), vec![2.; 8]);
        // A second executor from the same factory still sees the factory's weights.
        let m2 = match create.call(&[Value::Device(CPU0)]).unwrap() {
            Value::Module(m) => m,
            _ => panic!("not a module"),
        };
        let e2 = m2.downcast::<GraphExecutor>().unwrap();
        e2.set_input(0, x.tensor()).unwrap();
        e2.run().unwrap();
        assert_eq!(floats(&e2.get_output(0).unwrap())[7], 16.);
        // Functions by name, as Python's GraphModule fetches them.
        for f in [
            "set_input",
            "run",
            "get_output",
            "get_input",
            "get_num_outputs",
            "get_input_index",
            "get_num_inputs",
            "load_params",
            "share_params",
        ] {
            assert!(m.get_function(f, false).unwrap().is_some(), "{f}");
        }
        assert!(m.get_function("run_individual", false).unwrap().is_none());
        let idx = m.get_function("get_input_index", false).unwrap().unwrap();
        assert!(matches!(idx.call(&[Value::str("w")]).unwrap(), Value::Int(1)));
        assert!(matches!(idx.call(&[Value::str("nope")]).unwrap(), Value::Int(-1)));
        // Zero copy: the operators read an aligned external input in place.
        let ext = arr(&[10.; 8]);
        e2.set_input_zero_copy(0, ext.tensor()).unwrap();
        e2.run().unwrap();
        assert_eq!(floats(&e2.get_output(0).unwrap())[1], 20.);
        ext.copy_from(arr(&[1.; 8]).tensor()).unwrap();
        e2.run().unwrap();
        assert_eq!(floats(&e2.get_output(0).unwrap())[1], 2.);
        let out = NDArray::empty(&[8], FLOAT32, CPU0).unwrap();
        e2.set_output_zero_copy(0, out.tensor()).unwrap();
        let bad = NDArray::empty(&[9], FLOAT32, CPU0).unwrap();
        assert!(e2.set_output_zero_copy(0, bad.tensor()).unwrap_err().to_string().contains("shape"));
        assert!(e2.set_input_zero_copy(0, bad.tensor()).is_err());
    }

    #[test]
    #[cfg(feature = "profiling")]
    fn debug_executor_and_errors() {
        let json = json::tests_example();
        let lib = Module::new(Ops);
        let buf =
            crate::value::ArgsBuf::new(&[Value::str(json), Value::Module(lib.clone()), Value::Int(1), Value::Int(0)]);
        let m = match create_from_args(&buf.args(), true).unwrap() {
            Value::Module(m) => m,
            _ => panic!(),
        };
        let e = m.downcast::<GraphExecutor>().unwrap();
        let times = e.run_individual(2, 1, 0).unwrap();
        assert_eq!(times.matches(',').count(), 4);
        assert!(times.starts_with("0,0,"));
        e.execute_node(2).unwrap();
        assert_eq!(e.get_node_output(2, 0).unwrap().shape(), &[1, 8]);
        assert!(e.get_node_output(1, 0).is_err());
        let j: serde_json::Value = serde_json::from_str(&e.profile_json().unwrap()).unwrap();
        assert_eq!(j["calls"].as_array().unwrap().len(), 2);
        // Missing kernels fail at creation and name the function.
        let broken = json.replace("f_mul", "f_missing");
        let err = GraphExecutor::create(&broken, lib, vec![CPU0], None, &[], false).err().unwrap().to_string();
        assert!(err.contains("f_missing"), "{err}");
        let few = crate::value::ArgsBuf::new(&[Value::str(json)]);
        assert!(create_from_args(&few.args(), false).is_err());
    }
}
