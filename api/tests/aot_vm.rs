//! The AOT executor and the Relay VM through the safe API, against the outputs TVM's own
//! runtime computed (`../shared/fixtures-v0.18/manifest.json`, `../shared/fixtures-vm/manifest.json`).

use serde_json::Value as Json;
use std::path::{Path, PathBuf};
use tvm_rt::{AllocatorKind, AotExecutor, DataType, Device, Module, NDArray, VirtualMachine, VmValue};

/// A fixtures directory and its manifest; `None` (said) when absent, a failure under `CI=true`.
fn manifest(dir: &str) -> Option<(PathBuf, Json)> {
    let d = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../shared").join(dir);
    match std::fs::read_to_string(d.join("manifest.json")) {
        Ok(t) => Some((d, serde_json::from_str(&t).expect("manifest parses"))),
        Err(e) => {
            assert_ne!(std::env::var("CI").as_deref(), Ok("true"), "{} missing: {e}", d.display());
            println!("SKIP: {} not found ({e})", d.display());
            None
        }
    }
}

/// An .npy file (float32 or int32, C order, little endian) read with a plain parser of the
/// format, independent of the API: (dtype, shape, raw bytes).
fn npy(path: &Path) -> (DataType, Vec<i64>, Vec<u8>) {
    let b = std::fs::read(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    assert_eq!(&b[..6], b"\x93NUMPY");
    let hlen = u16::from_le_bytes([b[8], b[9]]) as usize;
    let header = std::str::from_utf8(&b[10..10 + hlen]).unwrap();
    assert!(header.contains("'fortran_order': False"), "{header}");
    let dtype = if header.contains("'<f4'") {
        DataType::FLOAT32
    } else if header.contains("'<i4'") {
        DataType::INT32
    } else {
        panic!("{}: unexpected dtype in {header}", path.display())
    };
    let dims = header.split("'shape': (").nth(1).unwrap().split(')').next().unwrap();
    let shape = dims.split(',').filter_map(|d| d.trim().parse().ok()).collect();
    (dtype, shape, b[10 + hlen..].to_vec())
}

fn load_npy(path: &Path) -> NDArray {
    let (dtype, shape, bytes) = npy(path);
    NDArray::from_bytes(&bytes, &shape, dtype, Device::cpu()).unwrap()
}

fn values(dtype: DataType, bytes: &[u8]) -> Vec<f64> {
    match dtype {
        DataType::FLOAT32 => bytes.chunks(4).map(|c| f64::from(f32::from_le_bytes([c[0], c[1], c[2], c[3]]))).collect(),
        DataType::INT32 => bytes.chunks(4).map(|c| f64::from(i32::from_le_bytes([c[0], c[1], c[2], c[3]]))).collect(),
        d => panic!("dtype {d}"),
    }
}

/// numpy's allclose between an output and an expected .npy file (dtype and shape too).
fn assert_matches(got: &NDArray, want: &Path, rtol: f64, atol: f64) {
    let (dtype, shape, bytes) = npy(want);
    assert_eq!(got.dtype(), dtype, "{}", want.display());
    assert_eq!(got.shape(), shape.as_slice(), "{}", want.display());
    let g = values(got.dtype(), &got.to_bytes().unwrap());
    let w = values(dtype, &bytes);
    for (i, (x, y)) in g.iter().zip(&w).enumerate() {
        assert!((x - y).abs() <= atol + rtol * y.abs(), "{}[{i}]: {x} vs {y}", want.display());
    }
}

#[test]
fn aot_models_match_tvm() {
    let Some((dir, m)) = manifest("fixtures-v0.18") else { return };
    let mut seen = 0;
    for (name, f) in m["fixtures"].as_object().unwrap() {
        if f["kind"] != "aot" {
            continue;
        }
        seen += 1;
        let lib = Module::load(dir.join(f["file"].as_str().unwrap())).unwrap();
        assert_eq!(lib.type_key(), "AotExecutorFactory", "{name}");
        let info = lib.aot_info().expect("an AOT factory").unwrap();
        assert_eq!(info.module_name, f["module_name"].as_str().unwrap(), "{name}");
        // The inputs the caller sets are the manifest's, with the shapes of its files.
        let want: Vec<&str> = f["inputs"].as_object().unwrap().keys().map(String::as_str).collect();
        let got: Vec<&str> = info.inputs.iter().map(|t| t.name.as_str()).collect();
        assert_eq!(got, want, "{name}");
        assert_eq!(info.outputs.len(), f["outputs"].as_array().unwrap().len(), "{name}");
        assert!(info.graph_free_params_are_inputs(), "{name}");

        let mut exec = AotExecutor::from_factory(&lib, &[Device::cpu()]).unwrap();
        assert_eq!(exec.num_outputs(), info.outputs.len());
        for t in &info.inputs {
            let a = load_npy(&dir.join(f["inputs"][&t.name].as_str().unwrap()));
            assert_eq!(a.shape(), t.shape.as_slice(), "{name}: {}", t.name);
            exec.set_input(t.name.as_str(), &a).unwrap();
        }
        exec.run().unwrap();
        let (rtol, atol) = (f["rtol"].as_f64().unwrap_or(1e-5), f["atol"].as_f64().unwrap_or(1e-5));
        let outs: Vec<NDArray> = (0..exec.num_outputs()).map(|i| exec.get_output(i).unwrap()).collect();
        for (i, o) in f["outputs"].as_array().unwrap().iter().enumerate() {
            assert_eq!(outs[i].shape(), info.outputs[i].shape.as_slice());
            assert_matches(&outs[i], &dir.join(o.as_str().unwrap()), rtol, atol);
        }
        // get_output is a copy: another run on other data leaves it alone.
        let before = outs[0].to_bytes().unwrap();
        let t = &info.inputs[0];
        let zeros = NDArray::from_bytes(&vec![0u8; t.byte_size()], &t.shape, t.dtype, Device::cpu()).unwrap();
        exec.set_input(0usize, &zeros).unwrap();
        exec.run().unwrap();
        assert_eq!(outs[0].to_bytes().unwrap(), before);
        assert_eq!(exec.get_input(t.name.as_str()).unwrap().to_bytes().unwrap(), zeros.to_bytes().unwrap());
        // Errors, not crashes.
        let wrong = NDArray::from_slice(&[1.0f32; 3], &[3], Device::cpu()).unwrap();
        assert!(exec.set_input(t.name.as_str(), &wrong).unwrap_err().to_string().contains("does not match"));
        assert!(exec.set_input("no_such_input", &zeros).unwrap_err().to_string().contains("no input named"));
        assert!(exec.set_input(99usize, &zeros).is_err());
        assert!(exec.get_output(99).is_err());
        assert!(AotExecutor::from_factory(&lib, &[Device::cpu(), Device::cpu()]).is_err());
        assert!(AotExecutor::from_factory(&lib, &[Device::new(Device::CPU, 1)]).is_err());
    }
    assert!(seen > 0, "no AOT fixture in the v0.18 manifest");
}

/// The AotInfo invariant the test relies on: params and inputs are disjoint.
trait Disjoint {
    fn graph_free_params_are_inputs(&self) -> bool;
}
impl Disjoint for tvm_rt::AotInfo {
    fn graph_free_params_are_inputs(&self) -> bool {
        self.inputs.iter().all(|i| !self.params.iter().any(|p| p.name == i.name))
    }
}

#[test]
fn graph_and_vm_executors_refuse_other_kinds() {
    let Some((dir, _)) = manifest("fixtures-v0.18") else { return };
    let graph = Module::load(dir.join("mlp.so")).unwrap();
    assert!(graph.aot_info().is_none() && graph.vm_info().is_none());
    let e = AotExecutor::from_factory(&graph, &[Device::cpu()]).err().unwrap().to_string();
    assert!(e.contains("not an AOT executor factory"), "{e}");
    let e = VirtualMachine::new(&graph, &[Device::cpu()], AllocatorKind::Pooled).err().unwrap().to_string();
    assert!(e.contains("not a Relay VM executable"), "{e}");
}

/// Each run of each VM fixture, with a fresh VM of either allocator kind and one VM for all
/// runs of a fixture (dynamic shapes across runs).
#[test]
fn vm_executables_match_tvm() {
    let Some((dir, m)) = manifest("fixtures-vm") else { return };
    for (name, f) in m["fixtures"].as_object().unwrap() {
        let exe = Module::load(dir.join(f["file"].as_str().unwrap())).unwrap();
        assert_eq!(exe.type_key(), "VMExecutable", "{name}");
        let info = exe.vm_info().unwrap();
        let func = f["function"].as_str().unwrap();
        let main = info.function(func).unwrap_or_else(|| panic!("{name}: no {func}"));
        assert_eq!(main.params.len(), f["runs"][0]["inputs"].as_array().unwrap().len(), "{name}");
        assert!(info.stats.contains("Relay VM executable statistics"), "{name}");
        assert!(info.bytecode.contains(func), "{name}");
        // Every kernel is in the library the executable imports.
        let lib = exe.imports().into_iter().next().expect("the kernel library");
        assert!(info.primitives.iter().all(|p| lib.get_function(p, true).unwrap().is_some()), "{name}");
        let (rtol, atol) = (f["rtol"].as_f64().unwrap_or(1e-5), f["atol"].as_f64().unwrap_or(1e-5));
        let mut shared = VirtualMachine::new(&exe, &[Device::cpu()], AllocatorKind::Pooled).unwrap();
        for (k, run) in f["runs"].as_array().unwrap().iter().enumerate() {
            let inputs: Vec<NDArray> =
                run["inputs"].as_array().unwrap().iter().map(|p| load_npy(&dir.join(p.as_str().unwrap()))).collect();
            let want: Vec<PathBuf> =
                run["outputs"].as_array().unwrap().iter().map(|p| dir.join(p.as_str().unwrap())).collect();
            for alloc in [AllocatorKind::Naive, AllocatorKind::Pooled] {
                let mut vm = VirtualMachine::new(&exe, &[Device::cpu()], alloc).unwrap();
                let outs = vm.run(func, &inputs).unwrap();
                assert_eq!(outs.len(), want.len(), "{name} run {k}");
                for (o, w) in outs.iter().zip(&want) {
                    assert_matches(o, w, rtol, atol);
                }
            }
            let outs = shared.run(func, &inputs).unwrap();
            for (o, w) in outs.iter().zip(&want) {
                assert_matches(o, w, rtol, atol);
            }
        }
        // By name: the parameter positions the executable records.
        let vm = VirtualMachine::new(&exe, &[Device::cpu()], AllocatorKind::Pooled).unwrap();
        for (i, p) in main.params.iter().enumerate() {
            assert_eq!(vm.input_index(func, p).unwrap(), Some(i));
        }
        assert_eq!(vm.input_index(func, "no_such_param").unwrap(), None);
    }
}

#[test]
fn vm_tuples_keep_their_structure() {
    let Some((dir, _)) = manifest("fixtures-vm") else { return };
    let exe = Module::load(dir.join("vm_tuple.so")).unwrap();
    let mut vm = VirtualMachine::new(&exe, &[Device::cpu()], AllocatorKind::Pooled).unwrap();
    let inputs = [load_npy(&dir.join("vm_tuple.run0.input0.npy")), load_npy(&dir.join("vm_tuple.run0.input1.npy"))];
    vm.set_input("main", &inputs).unwrap();
    let tree = vm.invoke("main").unwrap();
    let VmValue::Tuple { fields, .. } = &tree else { panic!("a tuple: {tree:?}") };
    assert!(fields.iter().any(|f| matches!(f, VmValue::Tuple { .. })), "nested: {tree:?}");
    let flat = tree.flatten();
    for (i, o) in flat.iter().enumerate() {
        assert_matches(o, &dir.join(format!("vm_tuple.run0.output{i}.npy")), 1e-5, 1e-5);
    }
}

#[test]
fn vm_split_form_and_errors() {
    let Some((dir, _)) = manifest("fixtures-vm") else { return };
    let exe = Module::load(dir.join("vm_mlp.so")).unwrap();
    // TVM's split form: exe.save()'s bytecode + the kernel library.
    let code = match exe.function("save").unwrap().call(()).unwrap() {
        tvm_rt::Value::Bytes(b) => b,
        other => panic!("save returned {other:?}"),
    };
    let lib = exe.imports().into_iter().next().expect("the kernel library");
    let split = Module::vm_executable(&code, &lib).unwrap();
    let input = load_npy(&dir.join("vm_mlp.run0.input0.npy"));
    let mut vm = VirtualMachine::new(&split, &[Device::cpu()], AllocatorKind::Naive).unwrap();
    let outs = vm.run("main", std::slice::from_ref(&input)).unwrap();
    assert_matches(&outs[0], &dir.join("vm_mlp.run0.output0.npy"), 1e-5, 1e-5);
    // Damaged bytecode is an error.
    assert!(Module::vm_executable(&code[..code.len() / 2], &lib).is_err());
    // Wrong function, input count, shape; invoke before set_input; profile on a plain VM.
    let mut vm = VirtualMachine::new(&exe, &[Device::cpu()], AllocatorKind::Pooled).unwrap();
    assert!(vm.run("nope", std::slice::from_ref(&input)).unwrap_err().to_string().contains("no function nope"));
    assert!(vm.run("main", &[]).unwrap_err().to_string().contains("takes 1 inputs"));
    assert!(vm.invoke("main").is_err());
    let wrong = NDArray::from_slice(&[1.0f32; 3], &[3], Device::cpu()).unwrap();
    assert!(vm.run("main", &[wrong]).is_err());
    assert!(vm.profile("main").is_err());
    assert!(VirtualMachine::new(&exe, &[], AllocatorKind::Pooled).is_err());
}

#[test]
fn vm_profiles_every_kernel() {
    let Some((dir, _)) = manifest("fixtures-vm") else { return };
    let exe = Module::load(dir.join("vm_mlp.so")).unwrap();
    let info = exe.vm_info().unwrap();
    let mut vm = VirtualMachine::with_profiling(&exe, &[Device::cpu()], AllocatorKind::Pooled).unwrap();
    vm.set_input("main", &[load_npy(&dir.join("vm_mlp.run0.input0.npy"))]).unwrap();
    let rows = vm.profile("main").unwrap();
    for p in &info.primitives {
        assert!(rows.iter().any(|r| &r.name == p && !r.shapes.is_empty()), "{p} not profiled: {rows:?}");
    }
    let pct: f64 = rows.iter().map(|r| r.percent).sum();
    assert!((pct - 100.0).abs() < 1e-6, "{pct}");
    assert!(rows.windows(2).all(|w| w[0].time_us >= w[1].time_us));
    // The profiled VM still computes the right result.
    let out = vm.invoke("main").unwrap().flatten();
    assert_matches(&out[0], &dir.join("vm_mlp.run0.output0.npy"), 1e-5, 1e-5);
}
