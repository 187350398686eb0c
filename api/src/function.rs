//! [`Function`]: a callable of the PackedFunc convention, and the global function registry.

use crate::{Error, IntoArgs, Result, Value};
use std::fmt;
use tvm_runtime::function::PackedFunc;
use tvm_runtime::value::Value as CoreValue;

/// A function of the runtime (TVM's `PackedFunc`): a model kernel, an executor's method, a
/// global, or a Rust closure.
///
/// Cloning shares the function. `Send + Sync`: functions may be called from any thread (the
/// runtime's own functions and closures made by [`Function::from_fn`] are all thread-safe;
/// an executor serialises its own calls).
#[derive(Clone)]
pub struct Function(pub(crate) PackedFunc);

impl Function {
    /// A function running a Rust closure, which receives the arguments as [`Value`]s. An error
    /// it returns reaches the caller (a C caller sees it through `TVMGetLastError`).
    pub fn from_fn(f: impl Fn(&[Value]) -> Result<Value> + Send + Sync + 'static) -> Function {
        Function(PackedFunc::from_fn(move |args| {
            let vals = (0..args.len()).map(|i| args.get(i).map(Value::from_core)).collect::<Result<Vec<_>>>()?;
            f(&vals)?.to_core()
        }))
    }

    /// Calls the function: `f.call((1, "x", &array))`.
    pub fn call(&self, args: impl IntoArgs) -> Result<Value> {
        let core = args.into_args().iter().map(Value::to_core).collect::<Result<Vec<CoreValue>>>()?;
        self.0.call(&core).map(Value::from_core)
    }

    /// Calls the function and converts the result: `let n: i64 = f.invoke((2, 3))?`.
    pub fn invoke<R: TryFrom<Value, Error = Error>>(&self, args: impl IntoArgs) -> Result<R> {
        R::try_from(self.call(args)?)
    }

    /// The global function registered under `name`.
    pub fn get_global(name: &str) -> Option<Function> {
        tvm_runtime::registry::get(name).map(Function)
    }

    /// Whether two handles share one callable.
    pub fn same_function(&self, other: &Function) -> bool {
        self.0.ptr_eq(&other.0)
    }
}

impl fmt::Debug for Function {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Function")
    }
}

/// Registers `f` as the global function `name`, visible to every user of the runtime (C
/// programs through `TVMFuncGetGlobal`, compiled models through `TVMBackendGetFuncFromEnv`).
/// Fails if the name is taken.
pub fn register(name: &str, f: Function) -> Result<()> {
    tvm_runtime::registry::register(name, f.0, false)
}

/// Registers `f` as the global function `name`, replacing a function of that name.
pub fn register_override(name: &str, f: Function) -> Result<()> {
    tvm_runtime::registry::register(name, f.0, true)
}

/// Removes the global function `name`; whether it existed.
pub fn unregister(name: &str) -> bool {
    tvm_runtime::registry::remove(name)
}

/// The names of all global functions, sorted.
pub fn list_globals() -> Vec<String> {
    let mut v = tvm_runtime::registry::list_names();
    v.sort();
    v
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Device, NDArray};

    #[test]
    fn closures_round_trip_through_the_registry() {
        let f = Function::from_fn(|args| {
            let a = i64::try_from(args[0].clone())?;
            let s = String::try_from(args[1].clone())?;
            Ok(Value::Str(format!("{s}{a}")))
        });
        register("tvm_rt.test.concat", f).unwrap();
        assert!(register("tvm_rt.test.concat", Function::from_fn(|_| Ok(Value::None))).is_err());
        let g = Function::get_global("tvm_rt.test.concat").unwrap();
        assert_eq!(g.invoke::<String>((7, "x")).unwrap(), "x7");
        let e = g.call(("no", "x")).unwrap_err().to_string();
        assert_eq!(e, "TypeError: expected int but got str");
        assert!(list_globals().iter().any(|n| n == "tvm_rt.test.concat"));
        assert!(unregister("tvm_rt.test.concat"));
        assert!(Function::get_global("tvm_rt.test.concat").is_none());
    }

    #[test]
    fn runtime_globals_take_typed_values() {
        // runtime.ShapeTuple builds an object from ints; runtime.GetShapeTupleSize reads it back.
        let shape = Function::get_global("runtime.ShapeTuple").unwrap().call((2, 3, 4)).unwrap();
        match &shape {
            Value::Object(o) => assert_eq!(o.as_shape(), Some(vec![2, 3, 4])),
            other => panic!("{other:?}"),
        }
        let n: i64 = Function::get_global("runtime.GetShapeTupleSize").unwrap().invoke([shape]).unwrap();
        assert_eq!(n, 3);
        // An array passes through a Rust closure as the same array.
        let a = NDArray::from_slice(&[1u8, 2], &[2], Device::cpu()).unwrap();
        let id = Function::from_fn(|args| Ok(args[0].clone()));
        let back: NDArray = id.invoke((&a,)).unwrap();
        assert!(back.same_array(&a));
        let dev: Device = id.invoke((Device::opencl(1),)).unwrap();
        assert_eq!(dev, Device::opencl(1));
    }
}
