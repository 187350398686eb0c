//! The Relax VM on TVM v0.27's exports (`../shared/fixtures-v0.27`): every model gives TVM's
//! outputs through the tvm-ffi modules (`ffi.ModuleLoadFromFile`, `vm_load_executable`,
//! `vm_initialization`, the function by name), from one thread and from four at once (one loaded
//! module, a VM per thread); bad calls and bad input get clear errors.

use std::path::{Path, PathBuf};
use tvm_runtime::abi::{DLDataType, DLDevice};
use tvm_runtime::tvm_ffi::any::Any;
use tvm_runtime::tvm_ffi::containers::array::seq_items;
use tvm_runtime::tvm_ffi::object::ObjectRef;
use tvm_runtime::tvm_ffi::{function, module, registry, tensor, ti, FfiError};

const CPU: DLDevice = DLDevice { device_type: 1, device_id: 0 };

fn fixtures() -> Option<PathBuf> {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../shared/fixtures-v0.27");
    if dir.join("manifest.json").is_file() {
        return Some(dir);
    }
    assert!(std::env::var("CI").as_deref() != Ok("true"), "{} is missing (CI=true)", dir.display());
    eprintln!("skipped: {} is absent", dir.display());
    None
}

/// A parsed `.npy`: dtype, shape and raw little-endian data.
struct Npy {
    dtype: DLDataType,
    shape: Vec<i64>,
    data: Vec<u8>,
}

fn read_npy(path: &Path) -> Npy {
    let b = std::fs::read(path).unwrap();
    assert_eq!(&b[..6], b"\x93NUMPY", "{}", path.display());
    let (hlen, start) = if b[6] == 1 {
        (u16::from_le_bytes([b[8], b[9]]) as usize, 10)
    } else {
        (u32::from_le_bytes([b[8], b[9], b[10], b[11]]) as usize, 12)
    };
    let h = std::str::from_utf8(&b[start..start + hlen]).unwrap();
    assert!(h.contains("'fortran_order': False"), "{h}");
    let descr = h.split("'descr': '").nth(1).unwrap().split('\'').next().unwrap();
    let dtype = match descr {
        "<f4" => DLDataType { code: 2, bits: 32, lanes: 1 },
        "<f8" => DLDataType { code: 2, bits: 64, lanes: 1 },
        "<i4" => DLDataType { code: 0, bits: 32, lanes: 1 },
        "<i8" => DLDataType { code: 0, bits: 64, lanes: 1 },
        "|b1" => DLDataType { code: 6, bits: 8, lanes: 1 },
        d => panic!("unexpected npy dtype {d}"),
    };
    let shape_txt = h.split("'shape': (").nth(1).unwrap().split(')').next().unwrap();
    let shape = shape_txt.split(',').filter(|s| !s.trim().is_empty()).map(|s| s.trim().parse().unwrap()).collect();
    Npy { dtype, shape, data: b[start + hlen..].to_vec() }
}

fn to_tensor(n: &Npy) -> ObjectRef {
    let t = tensor::empty(&n.shape, n.dtype, CPU).unwrap();
    // SAFETY: a fresh compact CPU tensor of exactly the npy's byte size.
    unsafe {
        let dl = tensor::dltensor(t.as_ptr());
        std::ptr::copy_nonoverlapping(n.data.as_ptr(), dl.data.cast::<u8>(), n.data.len());
    }
    t
}

/// The outputs depth first, as (dtype, shape, bytes).
fn flatten(v: &Any, out: &mut Vec<Npy>) {
    let o = v.as_object().expect("a tensor or a tuple");
    if o.type_index() == ti::ARRAY {
        for item in seq_items(&o) {
            flatten(item, out);
        }
        return;
    }
    assert_eq!(o.type_index(), ti::TENSOR);
    // SAFETY: a live tensor.
    let dl = unsafe { tensor::dltensor(o.as_ptr()) };
    let shape = tvm_runtime::device::tensor_shape(dl).unwrap().to_vec();
    let n = shape.iter().product::<i64>() as usize * (dl.dtype.bits as usize / 8);
    // SAFETY: a compact CPU tensor of n bytes.
    let data = unsafe { std::slice::from_raw_parts(dl.data.cast::<u8>().add(dl.byte_offset as usize), n) }.to_vec();
    out.push(Npy { dtype: dl.dtype, shape, data });
}

fn values(n: &Npy) -> Vec<f64> {
    let c = |k: usize, w: usize| &n.data[k * w..k * w + w];
    let count = n.shape.iter().product::<i64>() as usize;
    (0..count)
        .map(|k| match (n.dtype.code, n.dtype.bits) {
            (2, 32) => f32::from_le_bytes(c(k, 4).try_into().unwrap()) as f64,
            (2, 64) => f64::from_le_bytes(c(k, 8).try_into().unwrap()),
            (0, 32) => i32::from_le_bytes(c(k, 4).try_into().unwrap()) as f64,
            (0, 64) => i64::from_le_bytes(c(k, 8).try_into().unwrap()) as f64,
            (6, 8) => n.data[k] as f64,
            t => panic!("unexpected dtype {t:?}"),
        })
        .collect()
}

struct Model {
    name: String,
    func: String,
    inputs: Vec<Npy>,
    outputs: Vec<Npy>,
    rtol: f64,
    atol: f64,
}

fn models(dir: &Path) -> Vec<Model> {
    let m: serde_json::Value = serde_json::from_slice(&std::fs::read(dir.join("manifest.json")).unwrap()).unwrap();
    let mut out = Vec::new();
    for (name, v) in m["models"].as_object().unwrap() {
        let ni = v["inputs"].as_array().unwrap().len();
        let no = v["outputs"].as_array().unwrap().len();
        out.push(Model {
            name: name.clone(),
            func: v["function"].as_str().unwrap().to_owned(),
            inputs: (0..ni).map(|k| read_npy(&dir.join(format!("{name}.in.{k}.npy")))).collect(),
            outputs: (0..no).map(|k| read_npy(&dir.join(format!("{name}.out.{k}.npy")))).collect(),
            rtol: v["rtol"].as_f64().unwrap(),
            atol: v["atol"].as_f64().unwrap(),
        });
    }
    out
}

fn get(m: &ObjectRef, name: &str) -> ObjectRef {
    module::get_function(m, name, false).unwrap().unwrap_or_else(|| panic!("no function {name}"))
}

fn new_vm(exec: &ObjectRef) -> ObjectRef {
    let vm = function::call_any(&get(exec, "vm_load_executable"), &[]).unwrap().into_object().ok().unwrap();
    let init = get(&vm, "vm_initialization");
    function::call_any(&init, &[Any::int(1), Any::int(0), Any::int(2)]).unwrap();
    vm
}

fn check(m: &Model, got: &Any) {
    let mut flat = Vec::new();
    flatten(got, &mut flat);
    assert_eq!(flat.len(), m.outputs.len(), "{}: number of outputs", m.name);
    for (k, (g, w)) in flat.iter().zip(&m.outputs).enumerate() {
        assert_eq!((g.dtype, &g.shape), (w.dtype, &w.shape), "{} output {k}", m.name);
        for (a, b) in values(g).iter().zip(values(w)) {
            assert!((a - b).abs() <= m.atol + m.rtol * b.abs(), "{} output {k}: {a} vs {b}", m.name);
        }
    }
}

fn run(vm: &ObjectRef, m: &Model) -> Result<Any, FfiError> {
    let f = get(vm, &m.func);
    let args: Vec<Any> = m.inputs.iter().map(|n| Any::object(to_tensor(n))).collect();
    function::call_any(&f, &args)
}

#[test]
fn every_model_gives_tvms_outputs_from_one_and_four_threads() {
    let Some(dir) = fixtures() else { return };
    let models = models(&dir);
    assert_eq!(models.len(), 6);
    for m in &models {
        let exec = module::load_from_file(dir.join(format!("{}.so", m.name)).to_str().unwrap())
            .map_err(|e| e.message())
            .unwrap();
        let kind = function::call_any(&registry::get("ffi.ModuleGetKind").unwrap(), &[Any::object(exec.clone())]);
        assert_eq!(kind.unwrap().as_str(), Some("relax.VMExecutable"));
        let vm = new_vm(&exec);
        for _ in 0..3 {
            check(m, &run(&vm, m).unwrap());
        }
        std::thread::scope(|s| {
            for _ in 0..4 {
                s.spawn(|| {
                    let vm = new_vm(&exec);
                    for _ in 0..20 {
                        check(m, &run(&vm, m).unwrap());
                    }
                });
            }
        });
    }
}

#[test]
fn wrong_calls_get_clear_errors() {
    let Some(dir) = fixtures() else { return };
    let models = models(&dir);
    let m = models.iter().find(|m| m.name == "mlp").unwrap();
    let exec = module::load_from_file(dir.join("mlp.so").to_str().unwrap()).unwrap();
    // Not initialized.
    let vm = function::call_any(&get(&exec, "vm_load_executable"), &[]).unwrap().into_object().ok().unwrap();
    let e = run(&vm, m).unwrap_err();
    assert!(e.message().contains("not initialized"), "{}", e.message());
    let vm = new_vm(&exec);
    let f = get(&vm, "forward");
    // Too few arguments.
    let e = function::call_any(&f, &[Any::object(to_tensor(&m.inputs[0]))]).unwrap_err();
    assert!(e.message().contains("expects 5 arguments"), "{}", e.message());
    // A wrong shape: the input checks name the parameter.
    let mut args: Vec<Any> = m.inputs.iter().map(|n| Any::object(to_tensor(n))).collect();
    let bad = tensor::empty(&[3, 16], DLDataType { code: 2, bits: 32, lanes: 1 }, CPU).unwrap();
    args[0] = Any::object(bad);
    let e = function::call_any(&f, &args).unwrap_err();
    assert!(e.message().contains("match_cast") && e.message().contains("param=x"), "{}", e.message());
    // A wrong dtype.
    args[0] = Any::object(tensor::empty(&[2, 16], DLDataType { code: 0, bits: 32, lanes: 1 }, CPU).unwrap());
    let e = function::call_any(&f, &args).unwrap_err();
    assert!(e.message().contains("dtype"), "{}", e.message());
    // Not a tensor.
    args[0] = Any::int(3);
    let e = function::call_any(&f, &args).unwrap_err();
    assert!(e.message().contains("expect a Tensor"), "{}", e.message());
    // Unknown function; parameters by index.
    assert!(module::get_function(&vm, "nope", false).unwrap().is_none());
    let arity = function::call_any(&get(&vm, "get_function_arity"), &[Any::string("forward")]).unwrap();
    assert_eq!(arity.as_i64(), Some(5));
    let e = function::call_any(&get(&vm, "get_function_param_name"), &[Any::string("forward"), Any::int(9)]);
    assert!(e.unwrap_err().message().contains("Invalid index"));
    // A kernel called with the wrong arguments raises its own error (through
    // TVMFFIErrorSetRaisedFromCStrParts), which reaches the caller.
    let add = module::get_function(&exec, "add", true).unwrap().expect("the kernel library has add");
    let e = function::call_any(&add, &[Any::int(1)]).unwrap_err();
    assert!(!e.message().is_empty() && e.kind() != "Unknown", "{} {}", e.kind(), e.message());
    // The VM still works after the errors.
    check(m, &run(&vm, m).unwrap());
}

#[test]
fn stateful_calls_and_saved_functions() {
    let Some(dir) = fixtures() else { return };
    let models = models(&dir);
    let m = models.iter().find(|m| m.name == "if_tuple").unwrap();
    let exec = module::load_from_file(dir.join("if_tuple.so").to_str().unwrap()).unwrap();
    let vm = new_vm(&exec);
    let args: Vec<Any> = m.inputs.iter().map(|n| Any::object(to_tensor(n))).collect();
    let e = function::call_any(&get(&vm, "invoke_stateful"), &[Any::string("main")]).unwrap_err();
    assert!(e.message().contains("set_input"), "{}", e.message());
    let mut set = vec![Any::string("main")];
    set.extend(args.iter().cloned());
    function::call_any(&get(&vm, "set_input"), &set).unwrap();
    function::call_any(&get(&vm, "invoke_stateful"), &[Any::string("main")]).unwrap();
    let arity = function::call_any(&get(&vm, "get_output_arity"), &[Any::string("main")]).unwrap();
    assert_eq!(arity.as_i64(), Some(2));
    let e = function::call_any(&get(&vm, "get_output"), &[Any::string("main")]).unwrap_err();
    assert!(e.message().contains("cannot return a tuple"), "{}", e.message());
    let last = function::call_any(&get(&vm, "get_output"), &[Any::string("main"), Any::int(1)]).unwrap();
    let mut flat = Vec::new();
    flatten(&last, &mut flat);
    assert_eq!(values(&flat[0]), values(&m.outputs[2]));
    // save_function binds the arguments.
    let mut save = vec![Any::string("main"), Any::string("saved"), Any::bool(true)];
    save.extend(args.iter().cloned());
    function::call_any(&get(&vm, "save_function"), &save).unwrap();
    check(m, &function::call_any(&get(&vm, "saved"), &[]).unwrap());
}

#[test]
fn builtins_refuse_forged_vm_pointers_and_bad_heaps() {
    let call = |name: &str, args: &[Any]| function::call_any(&registry::get(name).unwrap(), args);
    let fake = Any::opaque_ptr(0x1000 as *mut std::ffi::c_void);
    let shape = Any::object(tvm_runtime::tvm_ffi::containers::shape::make_shape(&[16]));
    let u8t = Any::dtype(DLDataType { code: 1, bits: 8, lanes: 1 });
    let e = call("vm.builtin.alloc_storage", &[fake.clone(), shape, Any::int(0), u8t, Any::string("global")]);
    assert!(e.unwrap_err().message().contains("not a virtual machine running"));
    let e = call("vm.builtin.alloc_shape_heap", &[Any::int(5), Any::int(4)]);
    assert!(e.unwrap_err().message().contains("VM context pointer"));
    // A heap index out of range.
    let heap = tensor::empty(&[2], DLDataType { code: 0, bits: 64, lanes: 1 }, CPU).unwrap();
    let s = Any::object(tvm_runtime::tvm_ffi::containers::shape::make_shape(&[7]));
    let e =
        call("vm.builtin.match_shape", &[s.clone(), Any::object(heap.clone()), Any::int(1), Any::int(1), Any::int(5)]);
    assert!(e.unwrap_err().message().contains("out of range"));
    let e = call("vm.builtin.make_shape", &[Any::object(heap), Any::int(3), Any::int(1)]);
    assert!(e.unwrap_err().message().contains("arguments"));
    let e = call("vm.builtin.tuple_getitem", &[s, Any::int(0)]);
    assert!(e.unwrap_err().message().contains("expected a tuple"));
}

#[test]
fn damaged_executables_are_refused() {
    let load = registry::get("ffi.Module.load_from_bytes.relax.VMExecutable").unwrap();
    for bad in [&b""[..], b"garbage", &[0xffu8; 64]] {
        let e = function::call_any(&load, &[Any::bytes(bad)]).unwrap_err();
        assert!(e.message().contains("relax.VMExecutable"), "{}", e.message());
    }
    let Some(dir) = fixtures() else { return };
    // The executable of a real export, cut short anywhere, is refused.
    let exec = module::load_from_file(dir.join("loop.so").to_str().unwrap()).unwrap();
    let bytes = function::call_any(&get(&exec, "save_to_bytes"), &[]).unwrap();
    let bytes = bytes.as_str_bytes().unwrap().to_vec();
    assert!(function::call_any(&load, &[Any::bytes(&bytes)]).is_ok());
    for cut in (0..bytes.len()).step_by(7) {
        assert!(function::call_any(&load, &[Any::bytes(&bytes[..cut])]).is_err(), "cut at {cut}");
    }
}

#[test]
fn deep_recursion_is_an_error_not_a_stack_overflow() {
    let Some(dir) = fixtures() else { return };
    let exec = module::load_from_file(dir.join("loop.so").to_str().unwrap()).unwrap();
    let m = models(&dir).into_iter().find(|m| m.name == "loop").unwrap();
    let x = to_tensor(&m.inputs[1]);
    let n = |v: i32| {
        let t = tensor::empty(&[], DLDataType { code: 0, bits: 32, lanes: 1 }, CPU).unwrap();
        // SAFETY: a fresh 0-d int32 CPU tensor.
        unsafe { *tensor::dltensor(t.as_ptr()).data.cast::<i32>() = v };
        t
    };
    // A level takes about 0.6 KiB of stack in a release build, 2.5 KiB in a debug one.
    for (stack, depth, ok) in [(256 << 10, 20, true), (256 << 10, 100_000, false), (16 << 20, 2000, true)] {
        let (exec, x, n) = (exec.clone(), x.clone(), n(depth));
        let r = std::thread::Builder::new()
            .stack_size(stack)
            .spawn(move || {
                let vm = new_vm(&exec);
                function::call_any(&get(&vm, "main"), &[Any::object(n), Any::object(x)])
                    .map(|_| ())
                    .map_err(|e| e.message())
            })
            .unwrap()
            .join()
            .unwrap();
        assert_eq!(r.is_ok(), ok, "stack {stack}, depth {depth}: {r:?}");
        if let Err(e) = r {
            assert!(e.contains("maximum recursion depth exceeded"), "{e}");
        }
    }
}

#[test]
fn a_kernel_missing_from_the_library_is_named() {
    let Some(dir) = fixtures() else { return };
    let exec = module::load_from_file(dir.join("mlp.so").to_str().unwrap()).unwrap();
    let bytes = function::call_any(&get(&exec, "save_to_bytes"), &[]).unwrap();
    // The same executable without its kernel library.
    let load = registry::get("ffi.Module.load_from_bytes.relax.VMExecutable").unwrap();
    let bare = function::call_any(&load, &[bytes]).unwrap().into_object().ok().unwrap();
    let vm = function::call_any(&get(&bare, "vm_load_executable"), &[]).unwrap().into_object().ok().unwrap();
    let e = function::call_any(&get(&vm, "vm_initialization"), &[Any::int(1), Any::int(0), Any::int(2)]).unwrap_err();
    assert!(e.message().contains("Cannot find ffi::Function transpose"), "{}", e.message());
    // Calling the uninitialized machine is an error too, not a crash.
    let e = function::call_any(&get(&vm, "forward"), &[]).unwrap_err();
    assert!(e.message().contains("not initialized"), "{}", e.message());
}
