//! TVM v0.27 exports through the safe API ([`RelaxModule`], [`RelaxVm`]) against the outputs TVM's
//! own runtime computed (`../shared/fixtures-v0.27/manifest.json`): every model on one thread,
//! then from four threads at once (one module, a machine per thread), and the error cases.

use serde_json::Value as Json;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use tvm_rt::relax::{self, ConstantInfo, FunctionKind, Output};
use tvm_rt::{DataType, Device, ModelKind, Module, NDArray, RelaxModule, RelaxVm};

/// The v0.27 fixtures and their manifest; `None` (said) when absent, a failure under `CI=true`.
fn manifest() -> Option<(PathBuf, Json)> {
    let d = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../shared/fixtures-v0.27");
    match std::fs::read_to_string(d.join("manifest.json")) {
        Ok(t) => Some((d, serde_json::from_str(&t).expect("manifest parses"))),
        Err(e) => {
            assert_ne!(std::env::var("CI").as_deref(), Ok("true"), "{} missing: {e}", d.display());
            println!("SKIP: {} not found ({e})", d.display());
            None
        }
    }
}

/// An .npy file (C order, little endian) read with a plain parser of the format, independent of
/// the API: (dtype, shape, raw bytes).
fn npy(path: &Path) -> (DataType, Vec<i64>, Vec<u8>) {
    let b = std::fs::read(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    assert_eq!(&b[..6], b"\x93NUMPY");
    let (hlen, start) = match b[6] {
        1 => (u16::from_le_bytes([b[8], b[9]]) as usize, 10),
        _ => (u32::from_le_bytes([b[8], b[9], b[10], b[11]]) as usize, 12),
    };
    let header = std::str::from_utf8(&b[start..start + hlen]).unwrap();
    assert!(header.contains("'fortran_order': False"), "{header}");
    let descr = header.split("'descr': '").nth(1).unwrap().split('\'').next().unwrap();
    let dtype = match descr {
        "<f4" => DataType::FLOAT32,
        "<f8" => DataType::FLOAT64,
        "<i4" => DataType::INT32,
        "<i8" => DataType::INT64,
        "|b1" => DataType::BOOL,
        d => panic!("{}: unexpected dtype {d}", path.display()),
    };
    let dims = header.split("'shape': (").nth(1).unwrap().split(')').next().unwrap();
    let shape = dims.split(',').filter_map(|d| d.trim().parse().ok()).collect();
    (dtype, shape, b[start + hlen..].to_vec())
}

fn array(path: &Path) -> NDArray {
    let (dtype, shape, bytes) = npy(path);
    NDArray::from_bytes(&bytes, &shape, dtype, Device::cpu()).unwrap()
}

/// The elements as f64 (the fixtures' dtypes).
fn values(dtype: DataType, bytes: &[u8]) -> Vec<f64> {
    match dtype {
        DataType::FLOAT32 => bytes.chunks(4).map(|c| f64::from(f32::from_le_bytes(c.try_into().unwrap()))).collect(),
        DataType::FLOAT64 => bytes.chunks(8).map(|c| f64::from_le_bytes(c.try_into().unwrap())).collect(),
        DataType::INT32 => bytes.chunks(4).map(|c| f64::from(i32::from_le_bytes(c.try_into().unwrap()))).collect(),
        DataType::INT64 => bytes.chunks(8).map(|c| i64::from_le_bytes(c.try_into().unwrap()) as f64).collect(),
        DataType::BOOL => bytes.iter().map(|&b| f64::from(b)).collect(),
        d => panic!("unexpected dtype {d}"),
    }
}

/// A model of the manifest: its module, function, inputs and expected outputs.
struct Case {
    name: String,
    file: PathBuf,
    function: String,
    inputs: Vec<NDArray>,
    expected: Vec<PathBuf>,
    rtol: f64,
    atol: f64,
}

fn cases(dir: &Path, m: &Json) -> Vec<Case> {
    let models = m["models"].as_object().expect("models");
    assert!(models.len() >= 6, "{} models", models.len());
    models
        .iter()
        .map(|(name, f)| Case {
            name: name.clone(),
            file: dir.join(f["file"].as_str().unwrap()),
            function: f["function"].as_str().unwrap().to_owned(),
            inputs: (0..f["inputs"].as_array().unwrap().len())
                .map(|k| array(&dir.join(format!("{name}.in.{k}.npy"))))
                .collect(),
            expected: (0..f["outputs"].as_array().unwrap().len())
                .map(|k| dir.join(format!("{name}.out.{k}.npy")))
                .collect(),
            rtol: f["rtol"].as_f64().unwrap_or(1e-5),
            atol: f["atol"].as_f64().unwrap_or(1e-5),
        })
        .collect()
}

/// Checks a result against TVM's outputs: count, dtype and shape exactly, values as numpy's
/// `allclose`.
fn check(c: &Case, out: Output, what: &str) {
    let got = out.flatten();
    assert_eq!(got.len(), c.expected.len(), "{}{what}: outputs", c.name);
    for (k, (g, want)) in got.iter().zip(&c.expected).enumerate() {
        let (dtype, shape, bytes) = npy(want);
        assert_eq!((g.dtype(), g.shape()), (dtype, &shape[..]), "{}{what}: output {k}", c.name);
        let (gv, wv) = (values(dtype, &g.to_bytes().unwrap()), values(dtype, &bytes));
        for (i, (x, y)) in gv.iter().zip(&wv).enumerate() {
            assert!((x - y).abs() <= c.atol + c.rtol * y.abs(), "{}{what}: output {k}[{i}]: {x} vs {y}", c.name);
        }
    }
}

#[test]
fn every_model_gives_tvms_outputs() {
    let Some((dir, m)) = manifest() else { return };
    for c in cases(&dir, &m) {
        assert!(relax::is_relax_export(&c.file), "{}", c.name);
        let module = RelaxModule::load(&c.file).unwrap_or_else(|e| panic!("{}: {e}", c.name));
        assert_eq!(module.model_kind(), ModelKind::Relax);
        let f = module.function(&c.function).unwrap_or_else(|| panic!("{}: no {}", c.name, c.function));
        assert_eq!(f.arity, c.inputs.len(), "{}", c.name);
        assert_eq!(f.params.len(), c.inputs.len(), "{}", c.name);
        assert_eq!(f.kind, FunctionKind::Vm, "{}", c.name);
        assert!(f.num_instructions > 0 && f.register_file_size > 0, "{}", c.name);
        let packed = module.packed_functions();
        assert!(!packed.kernels.is_empty(), "{}: {packed:?}", c.name);
        assert!(packed.missing.is_empty(), "{}: {packed:?}", c.name);
        assert!(module.as_text().contains(&c.function), "{}", c.name);
        let tree = module.module_tree();
        assert_eq!(tree.kind, "relax.VMExecutable");
        assert_eq!(tree.imports.iter().map(|m| m.kind.as_str()).collect::<Vec<_>>(), ["library"], "{}", c.name);
        assert!(tree.functions.as_ref().unwrap().contains(&c.function), "{}", c.name);
        let lib = tree.imports[0].functions.as_ref().expect("the library lists its kernels");
        assert!(packed.kernels.iter().all(|k| lib.contains(k)), "{}: {packed:?} vs {lib:?}", c.name);
        // Both allocators; repeated calls give the same outputs.
        for alloc in [tvm_rt::AllocatorKind::Pooled, tvm_rt::AllocatorKind::Naive] {
            let mut vm = RelaxVm::with_allocator(&module, &[Device::cpu()], alloc).unwrap();
            for i in 0..3 {
                let out = vm.call(&c.function, &c.inputs).unwrap_or_else(|e| panic!("{}: {e}", c.name));
                check(&c, out, &format!(" ({alloc:?}, call {i})"));
            }
        }
    }
}

#[test]
fn the_executables_say_what_they_hold() {
    let Some((dir, _)) = manifest() else { return };
    let bound = RelaxModule::load(dir.join("mlp_bound.so")).unwrap();
    let weights: usize = bound
        .constants()
        .iter()
        .filter_map(|c| match c {
            ConstantInfo::Tensor { bytes, .. } => Some(*bytes),
            _ => None,
        })
        .sum();
    // Linear 16->32 and 32->4, float32: the weights and biases.
    assert_eq!(weights, (16 * 32 + 32 + 32 * 4 + 4) * 4, "{:?}", bound.constants());
    let mlp = RelaxModule::load(dir.join("mlp.so")).unwrap();
    assert!(!mlp.constants().iter().any(|c| matches!(c, ConstantInfo::Tensor { .. })), "{:?}", mlp.constants());
    assert!(mlp.packed_functions().globals.iter().any(|g| g.starts_with("vm.builtin.")), "{mlp:?}");
    assert!(mlp.stats().contains("Constant"), "{}", mlp.stats());
    // The recursive function is a VM function of its own.
    let lp = RelaxModule::load(dir.join("loop.so")).unwrap();
    assert!(lp.functions().len() >= 2, "{:?}", lp.functions());
    // topk's kernels call tvm.contrib.sort through the library's imports.
    let topk = RelaxModule::load(dir.join("topk.so")).unwrap();
    assert!(!topk.packed_functions().kernels.is_empty());
}

#[test]
fn four_threads_share_one_module() {
    let Some((dir, m)) = manifest() else { return };
    let cases = Arc::new(cases(&dir, &m));
    let modules: Arc<Vec<RelaxModule>> = Arc::new(cases.iter().map(|c| RelaxModule::load(&c.file).unwrap()).collect());
    let threads: Vec<_> = (0..4)
        .map(|t| {
            let (cases, modules) = (Arc::clone(&cases), Arc::clone(&modules));
            std::thread::spawn(move || {
                let mut vms: Vec<RelaxVm> =
                    modules.iter().map(|m| RelaxVm::new(m, &[Device::cpu()]).unwrap()).collect();
                for round in 0..5 {
                    // Each thread walks the models in its own order.
                    for k in 0..cases.len() {
                        let i = (k + t) % cases.len();
                        let c = &cases[i];
                        let out = vms[i].call(&c.function, &c.inputs).unwrap_or_else(|e| panic!("{}: {e}", c.name));
                        check(c, out, &format!(" (thread {t}, round {round})"));
                    }
                }
            })
        })
        .collect();
    for t in threads {
        t.join().expect("a thread failed");
    }
}

fn err_text(r: tvm_rt::Result<Output>) -> String {
    r.map(|o| o.kind()).expect_err("expected an error").to_string()
}

#[test]
fn bad_calls_are_errors_naming_what() {
    let Some((dir, _)) = manifest() else { return };
    let cpu = Device::cpu();
    let module = RelaxModule::load(dir.join("mlp.so")).unwrap();
    let mut vm = RelaxVm::new(&module, &[cpu]).unwrap();
    let inputs: Vec<NDArray> = (0..5).map(|k| array(&dir.join(format!("mlp.in.{k}.npy")))).collect();
    assert!(vm.call("forward", &inputs).is_ok());
    // Wrong arity.
    let e = err_text(vm.call("forward", &inputs[..4]));
    assert!(e.starts_with("ValueError: forward takes 5 arguments (") && e.ends_with("got 4"), "{e}");
    // Unknown function.
    let e = err_text(vm.call("backward", &inputs));
    assert!(e.starts_with("KeyError: the executable has no function backward (its functions: forward"), "{e}");
    // A wrong shape, dtype or rank: the VM's own checks, with their kind.
    let mut bad = inputs.clone();
    bad[0] = NDArray::from_slice(&[0.5f32; 3 * 16], &[3, 16], cpu).unwrap();
    let e = err_text(vm.call("forward", &bad));
    assert!(e.starts_with("RuntimeError: ErrorContext(fn=forward, loc=param[0], param=x"), "{e}");
    assert!(e.contains("shape[0] mismatch to specified constant: 3 vs 2"), "{e}");
    bad[0] = NDArray::from_slice(&[1i32; 2 * 16], &[2, 16], cpu).unwrap();
    let e = err_text(vm.call("forward", &bad));
    assert!(e.starts_with("ValueError: ErrorContext(fn=forward"), "{e}");
    assert!(e.contains("expect Tensor with dtype float32 but get int32"), "{e}");
    bad[0] = NDArray::from_slice(&[0.5f32; 32], &[32], cpu).unwrap();
    let e = err_text(vm.call("forward", &bad));
    assert!(e.contains("expect Tensor with ndim 2 but get 1"), "{e}");
    // The machine still works after its errors.
    check(
        &Case {
            name: "mlp".into(),
            file: dir.join("mlp.so"),
            function: "forward".into(),
            inputs: inputs.clone(),
            expected: vec![dir.join("mlp.out.0.npy")],
            rtol: 1e-5,
            atol: 1e-5,
        },
        vm.call("forward", &inputs).unwrap(),
        " after errors",
    );
    // A symbolic batch whose weights do not match: match_shape.
    let dynm = RelaxModule::load(dir.join("mlp_dyn.so")).unwrap();
    let mut dvm = RelaxVm::new(&dynm, &[cpu]).unwrap();
    let mut d: Vec<NDArray> = (0..5).map(|k| array(&dir.join(format!("mlp_dyn.in.{k}.npy")))).collect();
    d[0] = NDArray::from_slice(&[0.5f32; 5 * 17], &[5, 17], cpu).unwrap();
    let e = err_text(dvm.call("forward", &d));
    assert!(e.contains("annotation=R.Tensor((batch, 16)") && e.contains("shape[1] mismatch"), "{e}");
    d[0] = array(&dir.join("mlp_dyn.in.0.npy"));
    assert_eq!(dvm.call("forward", &d).unwrap().flatten()[0].shape(), [5, 4]);
}

#[test]
fn files_that_are_not_relax_exports() {
    let Some((dir, _)) = manifest() else { return };
    let tmp = std::env::temp_dir().join(format!("tvm-rt-relax-{}", std::process::id()));
    std::fs::create_dir_all(&tmp).unwrap();
    // A truncated library: an error naming the file, no crash.
    let bytes = std::fs::read(dir.join("mlp.so")).unwrap();
    for (k, n) in [bytes.len() / 2, 64, 0].into_iter().enumerate() {
        let p = tmp.join(format!("truncated{k}.so"));
        std::fs::write(&p, &bytes[..n]).unwrap();
        assert!(!relax::is_relax_export(&p));
        let e = RelaxModule::load(&p).unwrap_err().to_string();
        assert!(e.contains(p.to_str().unwrap()), "{e}");
    }
    // The classic loader refuses a v0.27 export, naming the release.
    let e = Module::load(dir.join("mlp.so")).unwrap_err().to_string();
    assert!(e.contains("TVM v0.22 or later") && e.contains("RelaxModule::load"), "{e}");
    assert!(RelaxModule::load(tmp.join("missing.so")).unwrap_err().to_string().contains("no such file"));
    let _ = std::fs::remove_dir_all(&tmp);
}

#[test]
fn loading_a_file_twice_and_dropping_one_keeps_the_other_working() {
    // The library's `__tvm_ffi__library_ctx` names one module: topk's kernels look the sort
    // functions up through it at their first call. A second load of the same file (dlopen hands
    // back the same mapping) must not leave the first one pointing at a module that is gone.
    let Some((dir, _)) = manifest() else { return };
    let path = dir.join("topk.so");
    let x = array(&dir.join("topk.in.0.npy"));
    let first = RelaxModule::load(&path).unwrap();
    let second = RelaxModule::load(&path).unwrap();
    drop(second);
    // Something else takes the freed memory.
    let noise: Vec<Vec<u64>> = (0..256).map(|i| vec![i; 16]).collect();
    let mut vm = RelaxVm::new(&first, &[Device::cpu()]).unwrap();
    assert_eq!(vm.call("main", std::slice::from_ref(&x)).unwrap().flatten().len(), 4);
    drop(noise);
    // And the other way round: the first goes, the second stays.
    let second = RelaxModule::load(&path).unwrap();
    drop((vm, first));
    let mut vm = RelaxVm::new(&second, &[Device::cpu()]).unwrap();
    assert_eq!(vm.call("main", std::slice::from_ref(&x)).unwrap().flatten().len(), 4);
}

#[test]
fn every_model_loads_from_its_bytes() {
    let Some((dir, m)) = manifest() else { return };
    for c in cases(&dir, &m) {
        let bytes = std::fs::read(&c.file).unwrap();
        let module = RelaxModule::from_bytes_named(&bytes, &c.name).unwrap_or_else(|e| panic!("{}: {e}", c.name));
        assert_eq!(module.path(), Path::new(&format!("<memory:{}>", c.name)));
        assert!(module.packed_functions().missing.is_empty(), "{}", c.name);
        let mut vm = RelaxVm::new(&module, &[Device::cpu()]).unwrap();
        check(&c, vm.call(&c.function, &c.inputs).unwrap_or_else(|e| panic!("{}: {e}", c.name)), " (from bytes)");
    }
    // Not a library; half of one: errors naming what was given, no crash.
    let e = RelaxModule::from_bytes_named(b"not a library, only some bytes of text", "junk").unwrap_err().to_string();
    assert!(e.contains("<memory:junk>") && e.contains("ELF"), "{e}");
    let bytes = std::fs::read(dir.join("mlp.so")).unwrap();
    let e = RelaxModule::from_bytes_named(&bytes[..bytes.len() / 2], "half").unwrap_err().to_string();
    assert!(e.contains("<memory:half>"), "{e}");
}
