//! TVM v0.18 Relax exports (`../shared/fixtures-v0.18-relax`) behind the classic C API: the
//! classic loader gives a `relax.Executable` module, its `vm_load_executable` a
//! `relax.VirtualMachine` whose functions take and give classic values; every model gives
//! TVM v0.18's outputs, also from four threads (one module, a VM each).

use std::path::{Path, PathBuf};
use tvm_runtime::abi::{DLDataType, DLDevice};
use tvm_runtime::module::{load_from_file, Module};
use tvm_runtime::ndarray::NDArray;
use tvm_runtime::object::ArrayObj;
use tvm_runtime::value::Value;

const CPU: DLDevice = DLDevice { device_type: 1, device_id: 0 };

fn fixtures() -> Option<PathBuf> {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../shared/fixtures-v0.18-relax");
    if dir.join("manifest.json").is_file() {
        return Some(dir);
    }
    assert!(std::env::var("CI").as_deref() != Ok("true"), "{} is missing (CI=true)", dir.display());
    eprintln!("skipped: {} is absent", dir.display());
    None
}

/// An `.npy` as a classic array (bool as TVM v0.18 spells it, `uint1`).
fn load_npy(path: &Path) -> NDArray {
    let b = std::fs::read(path).unwrap();
    let hlen = u16::from_le_bytes([b[8], b[9]]) as usize;
    let h = std::str::from_utf8(&b[10..10 + hlen]).unwrap();
    let descr = h.split("'descr': '").nth(1).unwrap().split('\'').next().unwrap();
    let dtype = match descr {
        "<f4" => DLDataType { code: 2, bits: 32, lanes: 1 },
        "<i4" => DLDataType { code: 0, bits: 32, lanes: 1 },
        "|b1" => DLDataType { code: 1, bits: 1, lanes: 1 },
        d => panic!("unexpected npy dtype {d}"),
    };
    let shape_txt = h.split("'shape': (").nth(1).unwrap().split(')').next().unwrap();
    let shape: Vec<i64> =
        shape_txt.split(',').filter(|s| !s.trim().is_empty()).map(|s| s.trim().parse().unwrap()).collect();
    let a = NDArray::empty(&shape, dtype, CPU).unwrap();
    a.copy_from_bytes(&b[10 + hlen..]).unwrap();
    a
}

fn flatten(v: Value, out: &mut Vec<NDArray>) {
    match v {
        Value::NDArray(a) => out.push(a),
        Value::Object(o) => {
            let arr = o.downcast::<ArrayObj>().expect("a tuple");
            for item in &arr.items {
                let item = item.clone().expect("no None in results");
                match NDArray::from_object(item.clone()) {
                    Some(a) => out.push(a),
                    None => flatten(Value::Object(item), out),
                }
            }
        }
        other => panic!("unexpected result {other:?}"),
    }
}

fn f32s(b: &[u8]) -> Vec<f32> {
    b.chunks(4).map(|c| f32::from_le_bytes(c.try_into().unwrap())).collect()
}

fn load(path: &Path) -> Module {
    tvm_runtime::classic_api::slots::install().unwrap();
    load_from_file(path.to_str().unwrap(), "").unwrap()
}

fn new_vm(exec: &Module) -> Module {
    let load = exec.get_function("vm_load_executable", false).unwrap().unwrap();
    let Value::Module(vm) = load.call(&[]).unwrap() else { panic!("vm_load_executable gives a module") };
    let init = vm.get_function("vm_initialization", false).unwrap().unwrap();
    init.call(&[Value::Int(1), Value::Int(0), Value::Int(2)]).unwrap();
    vm
}

fn run_and_check(dir: &Path, name: &str, m: &serde_json::Value, vm: &Module) {
    let n_in = m["inputs"].as_array().unwrap().len();
    let args: Vec<Value> =
        (0..n_in).map(|k| Value::NDArray(load_npy(&dir.join(format!("{name}.in.{k}.npy"))))).collect();
    let f = vm.get_function(m["function"].as_str().unwrap(), false).unwrap().expect("the function");
    let mut outs = Vec::new();
    flatten(f.call(&args).unwrap(), &mut outs);
    let n_out = m["outputs"].as_array().unwrap().len();
    assert_eq!(outs.len(), n_out, "{name}");
    let (rtol, atol) = (m["rtol"].as_f64().unwrap() as f32, m["atol"].as_f64().unwrap() as f32);
    for (k, got) in outs.iter().enumerate() {
        let want = load_npy(&dir.join(format!("{name}.out.{k}.npy")));
        assert_eq!((got.shape(), got.dtype()), (want.shape(), want.dtype()), "{name} output {k}");
        let (g, w) = (got.to_bytes().unwrap(), want.to_bytes().unwrap());
        if want.dtype().code == 2 {
            for (a, b) in f32s(&g).iter().zip(f32s(&w)) {
                assert!((a - b).abs() <= atol + rtol * b.abs(), "{name} output {k}: {a} vs {b}");
            }
        } else {
            assert_eq!(g, w, "{name} output {k}");
        }
    }
}

#[test]
fn v018_relax_exports_run_behind_the_classic_api() {
    let Some(dir) = fixtures() else { return };
    let manifest: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.join("manifest.json")).unwrap()).unwrap();
    for (name, m) in manifest["models"].as_object().unwrap() {
        let exec = load(&dir.join(format!("{name}.so")));
        assert_eq!(exec.type_key(), "relax.Executable", "{name}");
        let vm = new_vm(&exec);
        for _ in 0..2 {
            run_and_check(&dir, name, m, &vm);
        }
        std::thread::scope(|s| {
            for _ in 0..4 {
                s.spawn(|| {
                    let vm = new_vm(&exec);
                    for _ in 0..10 {
                        run_and_check(&dir, name, m, &vm);
                    }
                });
            }
        });
    }
}

#[test]
fn wrong_calls_behind_the_classic_api_are_errors() {
    let Some(dir) = fixtures() else { return };
    let exec = load(&dir.join("mlp.so"));
    let vm = new_vm(&exec);
    let f = vm.get_function("forward", false).unwrap().unwrap();
    let e = f.call(&[Value::Int(1)]).unwrap_err().to_string();
    assert!(e.contains("expects 5 arguments"), "{e}");
    let x = NDArray::empty(&[3, 16], DLDataType { code: 2, bits: 32, lanes: 1 }, CPU).unwrap();
    let mut args = vec![Value::NDArray(x)];
    for k in 1..5 {
        args.push(Value::NDArray(load_npy(&dir.join(format!("mlp.in.{k}.npy")))));
    }
    let e = f.call(&args).unwrap_err().to_string();
    assert!(e.contains("match_cast"), "{e}");
    let text = exec.get_function("as_text", false).unwrap().unwrap().call(&[]).unwrap();
    assert!(matches!(text, Value::Str(s) if s.contains("@forward:")));
}
