//! A safe Rust API for this repository's pure-Rust TVM runtime: load model libraries exported by
//! Apache TVM (`export_library`), run them with the graph executor, move data in and out as
//! slices or `ndarray` arrays, call the runtime's functions and register Rust closures as
//! global functions.
//!
//! It wraps the runtime's safe core directly (no C API, no raw handles; this crate has no
//! `unsafe` code). Errors are the runtime's [`Error`], whose text starts with TVM's error kind
//! (`ValueError: ...`). The `tvmrt` command-line tool is built on this API.
//!
//! # Running a model
//!
//! ```
//! use tvm_rt::{Device, GraphExecutor, Module, NDArray};
//!
//! # fn main() -> tvm_rt::Result<()> {
//! # let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../shared/fixtures/mlp.so");
//! # if !std::path::Path::new(path).exists() {
//! #     assert_ne!(std::env::var("CI").as_deref(), Ok("true"), "fixture {path} missing");
//! #     eprintln!("SKIP: {path} not found");
//! #     return Ok(());
//! # }
//! // A model exported by TVM's `lib.export_library("mlp.so")`.
//! let lib = Module::load(path)?;
//! let mut exec = GraphExecutor::from_factory(&lib, &[Device::cpu()])?;
//!
//! let input = exec.info().inputs[0].clone(); // `data`: float32[1, 1, 28, 28]
//! let data = vec![0.5f32; input.byte_size() / 4];
//! exec.set_input("data", &NDArray::from_slice(&data, &input.shape, Device::cpu())?)?;
//! exec.run()?;
//!
//! let scores: Vec<f32> = exec.get_output(0)?.to_vec()?;
//! assert_eq!(scores.len(), 10);
//! // Wrong input names and shapes are errors, not crashes.
//! let wrong = NDArray::from_slice(&[1.0f32; 3], &[3], Device::cpu())?;
//! assert!(exec.set_input("image", &wrong).is_err());
//! assert!(exec.set_input("data", &wrong).is_err());
//! # Ok(())
//! # }
//! ```
//!
//! # AOT models and Relay VM executables
//!
//! [`AotExecutor`] runs the exports of `relay.build(..., executor=Executor("aot"))` (TVM
//! v0.9+) as [`GraphExecutor`] runs graph models. [`VirtualMachine`] runs executables of
//! `relay.vm.compile` (dynamic shapes, control flow, tuple results):
//!
//! ```
//! use tvm_rt::{AllocatorKind, Device, Module, NDArray, VirtualMachine};
//!
//! # fn main() -> tvm_rt::Result<()> {
//! # let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../shared/fixtures-vm/vm_tuple.so");
//! # if !std::path::Path::new(path).exists() {
//! #     assert_ne!(std::env::var("CI").as_deref(), Ok("true"), "fixture {path} missing");
//! #     eprintln!("SKIP: {path} not found");
//! #     return Ok(());
//! # }
//! // An executable exported by TVM's `exe.mod.export_library("vm_tuple.so")`.
//! let exe = Module::load(path)?;
//! let info = exe.vm_info().expect("a VM executable");
//! let main = info.function("main").expect("main");
//! assert_eq!(main.params.len(), 2); // the executable records names, not shapes
//!
//! let mut vm = VirtualMachine::new(&exe, &[Device::cpu()], AllocatorKind::Pooled)?;
//! let x = NDArray::from_slice(&[1.0f32; 15], &[3, 5], Device::cpu())?;
//! let y = NDArray::from_slice(&[2.0f32; 15], &[3, 5], Device::cpu())?;
//! // A nested tuple result, flattened depth first.
//! let outputs = vm.run("main", &[x, y])?;
//! assert_eq!(outputs.len(), 3);
//! # Ok(())
//! # }
//! ```
//!
//! # TVM v0.22+ exports: the Relax VM
//!
//! What `tvm.compile(...)` of current TVM exports is a Relax VM executable: [`RelaxModule`]
//! loads it (once, for any number of threads), [`RelaxVm`] calls its functions. See
//! [`relax`].
//!
//! # Functions and the registry
//!
//! ```
//! use tvm_rt::{Function, Value};
//!
//! # fn main() -> tvm_rt::Result<()> {
//! // A Rust closure as a global function, callable from C (`TVMFuncGetGlobal`) and from
//! // compiled models as well as from Rust.
//! tvm_rt::register(
//!     "example.scale",
//!     Function::from_fn(|args| {
//!         let x = f64::try_from(args[0].clone())?;
//!         let k = i64::try_from(args[1].clone())?;
//!         Ok(Value::Float(x * k as f64))
//!     }),
//! )?;
//! let scale = Function::get_global("example.scale").expect("registered");
//! let y: f64 = scale.invoke((1.5, 4))?;
//! assert_eq!(y, 6.0);
//! // Argument types are checked.
//! assert!(scale.call(("one", 4)).is_err());
//! # Ok(())
//! # }
//! ```
//!
//! # Thread safety
//!
//! Every type is `Send + Sync`; each type's page says what sharing means for it.
//!
//! # Loading from memory
//!
//! [`Module::from_bytes`] loads a model library from its bytes without writing them to a file
//! (Linux `memfd_create`), for models kept encrypted at rest.

mod aot;
mod device;
mod function;
mod graph;
mod kind;
pub mod llm;
mod module;
mod ndarray;
pub mod relax;
pub mod rpc;
mod value;
mod vm;

pub use aot::{AotExecutor, AotInfo};
pub use device::{DataType, Device};
pub use function::{list_globals, register, register_override, unregister, Function};
pub use graph::{FactoryInfo, GraphExecutor, GraphInfo, InputKey, InputRef, OpNode, OpProfile, TensorInfo};
pub use kind::ModelKind;
pub use module::Module;
pub use ndarray::{Element, NDArray};
pub use relax::{RelaxModule, RelaxVm};
pub use value::{IntoArgs, Object, Opaque, Value};
pub use vm::{AllocatorKind, VirtualMachine, VmExecutableInfo, VmFunctionInfo, VmOpProfile, VmValue};

pub use half::{bf16, f16};
pub use tvm_runtime::error::Error;

/// The result type of this API.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Reads the bytes of a params file (`tvm.runtime.save_param_dict`, `relay.save_param_dict`):
/// names and arrays (on the CPU), in stored order.
pub fn load_params(bytes: &[u8]) -> Result<Vec<(String, NDArray)>> {
    Ok(tvm_runtime::ndarray::serialize::load_params(bytes)?.into_iter().map(|(n, a)| (n, NDArray(a))).collect())
}

/// Writes named arrays as the bytes of a params file, byte for byte as TVM writes them.
pub fn save_params(params: &[(String, NDArray)]) -> Result<Vec<u8>> {
    let core: Vec<(String, tvm_runtime::ndarray::NDArray)> =
        params.iter().map(|(n, a)| (n.clone(), a.0.clone())).collect();
    tvm_runtime::ndarray::serialize::save_params(&core)
}

/// Sets how many threads the runtime's thread pool uses for the parallel loops of compiled
/// operators, from the calling thread on (`runtime.config_threadpool`); returns nothing useful
/// beyond success. The pool never exceeds its slot count (the cores, or `TVM_NUM_THREADS`).
pub fn set_num_threads(n: usize) -> Result<()> {
    let n = i64::try_from(n).map_err(|_| Error::value("thread count too large"))?;
    let f = Function::get_global("runtime.config_threadpool")
        .ok_or_else(|| Error::internal("runtime.config_threadpool is not registered"))?;
    f.call((1, n)).map(|_| ())
}

#[cfg(test)]
mod send_sync {
    fn assert_send_sync<T: Send + Sync>() {}

    #[test]
    fn every_type_is_send_and_sync() {
        assert_send_sync::<crate::Device>();
        assert_send_sync::<crate::DataType>();
        assert_send_sync::<crate::NDArray>();
        assert_send_sync::<crate::Module>();
        assert_send_sync::<crate::Function>();
        assert_send_sync::<crate::GraphExecutor>();
        assert_send_sync::<crate::AotExecutor>();
        assert_send_sync::<crate::VirtualMachine>();
        assert_send_sync::<crate::VmValue>();
        assert_send_sync::<crate::RelaxModule>();
        assert_send_sync::<crate::RelaxVm>();
        assert_send_sync::<crate::relax::Output>();
        assert_send_sync::<crate::Value>();
        assert_send_sync::<crate::Object>();
        assert_send_sync::<crate::Error>();
        assert_send_sync::<crate::rpc::Stopper>();
        fn assert_send<T: Send>() {}
        assert_send::<crate::rpc::Server>();
    }
}
