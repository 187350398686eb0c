//! The safe API on TVM's fixtures: graph models against TVM's own outputs, split form, operator
//! functions, loading from memory, the registry, errors.

use std::path::{Path, PathBuf};
use tvm_rt::{DataType, Device, Function, GraphExecutor, Module, NDArray, Value};

fn fixture(name: &str) -> Option<PathBuf> {
    let p = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../shared/fixtures").join(name);
    if p.is_file() {
        return Some(p);
    }
    assert_ne!(std::env::var("CI").as_deref(), Ok("true"), "fixture {} missing (required under CI)", p.display());
    println!("SKIP: fixture {} not found", p.display());
    None
}

/// A float32 .npy file as (shape, values), read with a plain parser of the format (an
/// independent check of what the API computes).
fn npy_f32(path: &Path) -> (Vec<i64>, Vec<f32>) {
    let b = std::fs::read(path).unwrap();
    assert_eq!(&b[..6], b"\x93NUMPY");
    let hlen = u16::from_le_bytes([b[8], b[9]]) as usize;
    let header = std::str::from_utf8(&b[10..10 + hlen]).unwrap();
    assert!(header.contains("'<f4'") && header.contains("'fortran_order': False"), "{header}");
    let dims = header.split("'shape': (").nth(1).unwrap().split(')').next().unwrap();
    let shape = dims.split(',').filter_map(|d| d.trim().parse().ok()).collect();
    let vals = b[10 + hlen..].chunks(4).map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]])).collect();
    (shape, vals)
}

fn assert_close(got: &[f32], want: &[f32], tol: f32) {
    assert_eq!(got.len(), want.len());
    for (i, (x, y)) in got.iter().zip(want).enumerate() {
        assert!((x - y).abs() <= tol + tol * y.abs(), "[{i}]: {x} vs {y}");
    }
}

fn run_model(lib: &Module, input: &str, expected: &str) {
    let mut exec = GraphExecutor::from_factory(lib, &[Device::cpu()]).unwrap();
    let info = exec.info();
    assert_eq!(info.inputs.len(), 1);
    assert!(!info.params.is_empty());
    let (shape, x) = npy_f32(&fixture(input).unwrap());
    assert_eq!(info.inputs[0].shape, shape);
    exec.set_input("data", &NDArray::from_slice(&x, &shape, Device::cpu()).unwrap()).unwrap();
    exec.run().unwrap();
    let out = exec.get_output(0).unwrap();
    let (oshape, want) = npy_f32(&fixture(expected).unwrap());
    assert_eq!(out.shape(), oshape.as_slice());
    assert_close(&out.to_vec::<f32>().unwrap(), &want, 1e-5);
    // get_output is a copy: running again with other data leaves it alone.
    let before = out.to_vec::<f32>().unwrap();
    exec.set_input(0usize, &NDArray::from_slice(&vec![0.0f32; x.len()], &shape, Device::cpu()).unwrap()).unwrap();
    exec.run().unwrap();
    assert_eq!(out.to_vec::<f32>().unwrap(), before);
    // The input set is what get_input returns.
    assert_eq!(exec.get_input("data").unwrap().to_vec::<f32>().unwrap(), vec![0.0f32; x.len()]);
}

#[test]
fn graph_models_match_tvm() {
    for (model, input, output) in [
        ("mlp.so", "mlp.input.data.npy", "mlp.output.0.npy"),
        ("resnet18.so", "resnet18.input.data.npy", "resnet18.output.0.npy"),
    ] {
        let Some(path) = fixture(model) else { return };
        let lib = Module::load(&path).unwrap();
        assert_eq!(lib.type_key(), "GraphExecutorFactory");
        let fi = lib.factory_info().unwrap().unwrap();
        assert_eq!(fi.module_name, "default");
        assert_eq!(fi.param_bytes.len(), fi.graph.params.len());
        run_model(&lib, input, output);
    }
}

#[test]
fn split_form_with_params_file() {
    let (Some(lib), Some(json), Some(params)) = (fixture("mlp.lib.so"), fixture("mlp.json"), fixture("mlp.params"))
    else {
        return;
    };
    let lib = Module::load(lib).unwrap();
    let mut exec = GraphExecutor::new(&std::fs::read_to_string(json).unwrap(), &lib, &[Device::cpu()]).unwrap();
    assert!(exec.info().params.is_empty());
    exec.load_params_file(&params).unwrap();
    assert_eq!(exec.info().inputs.iter().map(|t| t.name.as_str()).collect::<Vec<_>>(), ["data"]);
    let (shape, x) = npy_f32(&fixture("mlp.input.data.npy").unwrap());
    exec.set_input("data", &NDArray::from_slice(&x, &shape, Device::cpu()).unwrap()).unwrap();
    exec.run().unwrap();
    assert_close(
        &exec.get_output(0).unwrap().to_vec().unwrap(),
        &npy_f32(&fixture("mlp.output.0.npy").unwrap()).1,
        1e-5,
    );
    // The params file read through the API: names and arrays, written back byte for byte.
    let bytes = std::fs::read(&params).unwrap();
    let p = tvm_rt::load_params(&bytes).unwrap();
    assert_eq!(p.len(), exec.info().params.len());
    assert_eq!(tvm_rt::save_params(&p).unwrap(), bytes);
}

#[test]
fn operator_functions_with_typed_calls() {
    let Some(path) = fixture("add_one.so") else { return };
    let lib = Module::load(path).unwrap();
    assert_eq!(lib.type_key(), "library");
    assert_eq!(lib.function_names().unwrap(), ["add_one"]);
    let f = lib.function("add_one").unwrap();
    let (shape, a) = npy_f32(&fixture("add_one.A.npy").unwrap());
    let x = NDArray::from_slice(&a, &shape, Device::cpu()).unwrap();
    let y = NDArray::empty(&shape, DataType::FLOAT32, Device::cpu()).unwrap();
    f.call((&x, &y)).unwrap();
    assert_eq!(y.to_vec::<f32>().unwrap(), npy_f32(&fixture("add_one.B.npy").unwrap()).1);
    // Wrong arguments are errors from the compiled function's own checks.
    let e = f.call((&x,)).unwrap_err().to_string();
    assert!(e.contains("num_args"), "{e}");
    let e = lib.function("nope").unwrap_err().to_string();
    assert_eq!(e, "AttributeError: module of kind library has no function nope");
}

#[test]
fn libraries_load_from_memory() {
    let (Some(mlp), Some(add_one)) = (fixture("mlp.so"), fixture("add_one.so")) else { return };
    let mlp_bytes = std::fs::read(&mlp).unwrap();
    let add_bytes = std::fs::read(&add_one).unwrap();
    // Two libraries from memory at once; the second one's fd number was the first one's.
    let a = Module::from_bytes_named(&add_bytes, "add_one").unwrap();
    let m = Module::from_bytes(&mlp_bytes).unwrap();
    assert_eq!(a.library_path().as_deref(), Some("<memory:add_one>"));
    assert_eq!(a.type_key(), "library");
    assert_eq!(m.type_key(), "GraphExecutorFactory");
    assert!(a.get_function("add_one", false).unwrap().is_some());
    run_model(&m, "mlp.input.data.npy", "mlp.output.0.npy");
    // The same library twice from memory: two independent loads that both work.
    let m2 = Module::from_bytes(&mlp_bytes).unwrap();
    run_model(&m2, "mlp.input.data.npy", "mlp.output.0.npy");
    drop((m, m2));
    let x = NDArray::from_slice(&[1.0f32, 2.0], &[2], Device::cpu()).unwrap();
    let y = NDArray::empty(&[2], DataType::FLOAT32, Device::cpu()).unwrap();
    a.function("add_one").unwrap().call((&x, &y)).unwrap();
    assert_eq!(y.to_vec::<f32>().unwrap(), [2.0, 3.0]);
    // Through the global, as a C or Python user would call it.
    let load = Function::get_global("runtime.ModuleLoadFromMemory").unwrap();
    let g: Module = load.invoke((add_bytes.clone(), "so")).unwrap();
    assert!(g.get_function("add_one", false).unwrap().is_some());
    // Errors: not a library, a format that cannot be loaded from memory, a truncated library.
    let e = Module::from_bytes(b"not a library").unwrap_err().to_string();
    assert!(e.contains("not a shared library"), "{e}");
    assert!(load.call((add_bytes.clone(), "cl")).unwrap_err().to_string().contains("format cl"));
    let e = Module::from_bytes(&add_bytes[..add_bytes.len() / 2]).unwrap_err().to_string();
    assert!(e.contains("<memory:bytes> is truncated or damaged"), "{e}");
    // Nothing was written anywhere: the loaded object is an anonymous memfd.
    let maps = std::fs::read_to_string("/proc/self/maps").unwrap();
    assert!(maps.contains("/memfd:<memory:add_one>"), "no memfd mapping");
}

#[test]
fn rust_closures_are_globals_for_everyone() {
    // A closure registered from Rust is reachable through the registry as any global is.
    tvm_rt::register(
        "tvm_rt.test.sum",
        Function::from_fn(|args| {
            let mut total = 0i64;
            for a in args {
                total += i64::try_from(a.clone())?;
            }
            Ok(Value::Int(total))
        }),
    )
    .unwrap();
    let f = Function::get_global("tvm_rt.test.sum").unwrap();
    assert_eq!(f.invoke::<i64>((1, 2, 3, 4)).unwrap(), 10);
    assert_eq!(f.invoke::<i64>(()).unwrap(), 0);
    assert!(f.call((1, "x")).unwrap_err().to_string().starts_with("TypeError: "));
    // Functions are values: one passed to another and called there.
    let apply = Function::from_fn(|args| {
        let g = Function::try_from(args[0].clone())?;
        g.call(args[1..].to_vec())
    });
    assert_eq!(apply.invoke::<i64>((&f, 5, 6)).unwrap(), 11);
    // Used from several threads at once.
    let threads: Vec<_> = (0..4)
        .map(|t| {
            let f = f.clone();
            std::thread::spawn(move || f.invoke::<i64>((t, t)).unwrap())
        })
        .collect();
    let sums: Vec<i64> = threads.into_iter().map(|h| h.join().unwrap()).collect();
    assert_eq!(sums, [0, 2, 4, 6]);
    assert!(tvm_rt::unregister("tvm_rt.test.sum"));
}

#[test]
fn errors_name_what_is_wrong() {
    let Some(path) = fixture("mlp.so") else { return };
    let e = Module::load("/no/such/model.so").unwrap_err().to_string();
    assert!(e.contains("/no/such/model.so: no such file"), "{e}");
    let lib = Module::load(&path).unwrap();
    let mut exec = GraphExecutor::from_factory(&lib, &[Device::cpu()]).unwrap();
    let small = NDArray::from_slice(&[1.0f32; 4], &[2, 2], Device::cpu()).unwrap();
    let e = exec.set_input("image", &small).unwrap_err().to_string();
    assert!(e.starts_with("KeyError: the graph has no input named image"), "{e}");
    let e = exec.set_input("data", &small).unwrap_err().to_string();
    assert!(e.contains("shape [2, 2] does not match the graph's [1, 1, 28, 28]"), "{e}");
    let ints = NDArray::from_slice(&vec![1i32; 784], &[1, 1, 28, 28], Device::cpu()).unwrap();
    assert!(exec.set_input("data", &ints).unwrap_err().to_string().contains("dtype"));
    assert!(exec.get_output(3).is_err());
    assert!(exec.set_input(99usize, &small).is_err());
    let lib_only = lib.imports()[0].clone();
    let e = GraphExecutor::from_factory(&lib_only, &[Device::cpu()]).err().unwrap().to_string();
    assert!(e.contains("not a graph executor factory"), "{e}");
    assert!(GraphExecutor::from_factory(&lib, &[]).is_err());
    let e = GraphExecutor::from_factory(&lib, &[Device::new(7, 0)]).err().unwrap().to_string();
    assert!(e.contains("vulkan"), "{e}");
}
