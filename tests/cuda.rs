//! CUDA through the C API. Everywhere: CUDA exports and modules load without a driver, queries
//! degrade to "not there", operations fail with a clear `CUDA: ...` error, CPU models keep
//! running. With a GPU (`cuda(0).exist`): the device API, a hand-written PTX kernel in TVM's
//! conventions, the architecture check, streams, pinned memory, threads and TVM v0.8's
//! `mlp2_nvptx.so` against the manifest. Without one those tests print why they skip (CI never
//! has a GPU).

mod common;

use common::*;
use std::ffi::c_void;
use std::path::PathBuf;
use tvm_runtime::abi::DLTensor;
use tvm_runtime::ffi::ndarray as napi;

const CUDA: i32 = 2;
const CUDA_HOST: i32 = 3;

fn attr(t: i64, id: i64, kind: i64) -> Result<Ret, String> {
    call_global("runtime.GetDeviceAttr", &[Arg::Int(t), Arg::Int(id), Arg::Int(kind)])
}

/// Whether CUDA device 0 exists; prints why the caller skips if not.
fn gpu_ready() -> bool {
    if attr(2, 0, 0).unwrap().int() == 1 {
        return true;
    }
    eprintln!("SKIP: no CUDA driver or GPU here (cuda(0).exist == 0); the GPU tests need one");
    false
}

const PTX: &str = include_str!("fixtures/cuda_vadd.ptx");

const META: &str = include_str!("fixtures/cuda_vadd.tvm_meta.json");

fn write_ptx(name: &str, ptx: &str) -> PathBuf {
    let dir = out_dir().join(format!("cuda-{}-{name}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let p = dir.join(format!("{name}.ptx"));
    std::fs::write(&p, ptx).unwrap();
    std::fs::write(dir.join(format!("{name}.tvm_meta.json")), META).unwrap();
    p
}

/// The `cuda` blob entry (formats.md 8), written here independently of the runtime's writer.
fn cuda_entry(ptx: &str) -> Vec<u8> {
    device_entry("ptx", &[VADD_KERNEL], ptx.as_bytes())
}

#[test]
fn loads_everywhere_and_fails_clearly_without_a_driver() {
    assert_eq!(call_global("runtime.RuntimeEnabled", &[Arg::Str("cuda")]).unwrap().int(), 1);
    // A CUDA module loads from a file and from a library's blob without touching the driver.
    let m = load(&write_ptx("nodrv", PTX)).expect("loadfile_ptx");
    assert_eq!(type_key(&m), "cuda");
    assert!(get_function(&m, "missing", false).is_none());
    let blob = Blob::default().lib().module("cuda", &cuda_entry(PTX)).tree(&[0, 1, 1], &[1]);
    let lib = load(&build_testlib("cudalib", Some(&blob.bytes()))).expect("a library with a cuda import loads");
    assert_eq!(type_key(&import(&lib, 0)), "cuda");
    // CPU code of the same library runs.
    assert_eq!(call(&get_function(&lib, "test_answer", false).unwrap(), &[]).unwrap().int(), 42);
    if gpu_ready() {
        return;
    }
    for t in [2, 3] {
        assert_eq!(attr(t, 0, 0).unwrap().int(), 0, "exist of type {t}");
        let e = attr(t, 0, 1).unwrap_err();
        assert!(e.contains("CUDA: "), "{e}");
    }
    let e = DevArray::try_new(&[4], 2, CUDA).err().unwrap();
    assert!(e.contains("CUDA: "), "{e}");
    let e = DevArray::try_new(&[4], 2, CUDA_HOST).err().unwrap();
    assert!(e.contains("CUDA: "), "{e}");
    let k = get_function(&m, "vadd_kernel0", false).unwrap();
    let args = vadd_args([std::ptr::null_mut(); 3], 1.0, 1, 1, 1);
    let e = call(&k, &args).unwrap_err();
    assert!(e.contains("CUDA: "), "{e}");
    // TVM's CUDA export: loads, then creating the executor on cuda(0) is the clear error.
    if let Some(p) = fixture("mlp2_nvptx.so") {
        let m = load(&p).expect("mlp2_nvptx.so loads without a driver");
        let e = call(&get_function(&m, "default", false).unwrap(), &[Arg::Device(CUDA, 0)]).unwrap_err();
        assert!(e.contains("CUDA: "), "{e}");
        // And a CPU model still runs in the same process.
        if let Some(add_one) = fixture("add_one.so") {
            let lib = load(&add_one).unwrap();
            let f = get_function(&lib, "add_one", false).unwrap();
            let (a, b) = (DevArray::from_f32(&[1.0, 2.0], 1), DevArray::new(&[2], 2, 1));
            call(&f, &[Arg::Array(a.0.cast()), Arg::Array(b.0.cast())]).unwrap();
            assert_eq!(b.f32s(2), vec![2.0, 3.0]);
        }
    }
}

#[test]
fn kernel_argument_checks_need_no_driver() {
    let m = load(&write_ptx("args", PTX)).unwrap();
    let k = get_function(&m, "vadd_kernel0", false).unwrap();
    let e = call(&k, &[Arg::Int(1)]).unwrap_err();
    assert!(e.contains("vadd_kernel0 expects 7 arguments"), "{e}");
    let args = vadd_args([std::ptr::null_mut(); 3], 1.0, 1, -1, 1);
    let e = call(&k, &args).unwrap_err();
    assert!(e.contains("out of range"), "{e}");
    let n = c("__tvm_main__");
    let mut out = std::ptr::null_mut();
    // SAFETY: live module, valid string and out-pointer.
    assert_eq!(unsafe { tvm_runtime::ffi::runtime_api::TVMModGetFunction(m.0, n.as_ptr(), 0, &mut out) }, -1);
    assert!(last_error().contains("Device function do not have main"));
}

fn vadd(k: &Func, n: usize, s: f32) {
    check_vadd(k, CUDA, n, s, 128);
}

#[test]
fn gpu_device_api_and_kernels() {
    if !gpu_ready() {
        return;
    }
    assert!(attr(2, 0, 1).unwrap().int() >= 64);
    assert_eq!(attr(2, 0, 2).unwrap().int(), 32);
    let Ok(Ret::Str(cc)) = attr(2, 0, 4) else { panic!("compute version") };
    assert!(cc.contains('.'));
    let Ok(Ret::Str(name)) = attr(2, 0, 5) else { panic!("name") };
    assert!(!name.is_empty());
    let Ok(Ret::Str(dims)) = attr(2, 0, 8) else { panic!("dims") };
    assert!(dims.starts_with('['));
    assert!(attr(2, 0, 11).unwrap().int() > 10000);
    assert!(attr(2, 999, 1).unwrap_err().contains("CUDA: "));

    let m = load(&write_ptx("gpu", PTX)).unwrap();
    let k = get_function(&m, "vadd_kernel0", false).unwrap();
    vadd(&k, 1000, 2.0);
    vadd(&k, 1, -1.0);

    // Pinned host memory: copies to and from device memory.
    let v: Vec<f32> = (0..300).map(|i| i as f32 * 0.25).collect();
    let pinned = DevArray::from_f32(&v, CUDA_HOST);
    let dev = DevArray::new(&[300], 2, CUDA);
    let back = DevArray::new(&[300], 2, CUDA_HOST);
    // SAFETY: live arrays of equal size.
    unsafe {
        assert_eq!(napi::TVMArrayCopyFromTo(pinned.0, dev.0, std::ptr::null_mut()), 0, "{}", last_error());
        assert_eq!(napi::TVMArrayCopyFromTo(dev.0, back.0, std::ptr::null_mut()), 0, "{}", last_error());
    }
    assert_eq!(back.f32s(300), v);

    // A stream set for launches, then synchronised.
    let dapi = tvm_runtime::ffi::device::TVMStreamCreate;
    let mut s = std::ptr::null_mut();
    // SAFETY: plain calls with a valid out-pointer; the stream is freed at the end.
    unsafe {
        assert_eq!(dapi(2, 0, &mut s), 0);
        assert_eq!(tvm_runtime::ffi::device::TVMSetStream(2, 0, s), 0);
    }
    vadd(&k, 4097, 0.5);
    // SAFETY: the stream created above.
    unsafe {
        assert_eq!(tvm_runtime::ffi::device::TVMSynchronize(2, 0, s), 0);
        assert_eq!(tvm_runtime::ffi::device::TVMSetStream(2, 0, std::ptr::null_mut()), 0);
        assert_eq!(tvm_runtime::ffi::device::TVMStreamFree(2, 0, s), 0);
    }

    // Workspaces.
    let w = tvm_runtime::ffi::backend::TVMBackendAllocWorkspace(2, 0, 5000, 2, 32);
    assert!(!w.is_null(), "{}", last_error());
    // SAFETY: from the pool above.
    assert_eq!(unsafe { tvm_runtime::ffi::backend::TVMBackendFreeWorkspace(2, 0, w) }, 0);

    // Kernels from several threads (fresh threads have no current context).
    let m = std::sync::Arc::new(SendMod(m));
    let ts: Vec<_> = (0..4)
        .map(|t| {
            let m = std::sync::Arc::clone(&m);
            std::thread::spawn(move || {
                let m = &m;
                let k = get_function(&m.0, "vadd_kernel0", false).unwrap();
                for r in 0..20 {
                    vadd(&k, 100 + t * 31 + r, t as f32);
                }
            })
        })
        .collect();
    for t in ts {
        t.join().unwrap();
    }
}

/// A module handle shared between threads.
struct SendMod(Mod);
// SAFETY: module handles may be used from any thread (c-api.md).
unsafe impl Send for SendMod {}
// SAFETY: as above.
unsafe impl Sync for SendMod {}

#[test]
fn gpu_newer_architecture_is_named() {
    if !gpu_ready() {
        return;
    }
    let Ok(Ret::Str(cc)) = attr(2, 0, 4) else { panic!("compute version") };
    let (major, minor) = cc.split_once('.').unwrap();
    let sm: u32 = major.parse::<u32>().unwrap() * 10 + minor.parse::<u32>().unwrap();
    let newer = PTX.replace(".target sm_50", &format!(".target sm_{}", sm + 10));
    let m = load(&write_ptx("newer", &newer)).unwrap();
    let k = get_function(&m, "vadd_kernel0", false).unwrap();
    let n = DevArray::new(&[1], 2, CUDA);
    let args = [
        Arg::Handle(n.data()),
        Arg::Handle(n.data()),
        Arg::Handle(n.data()),
        Arg::Float(1.0),
        Arg::Int(1),
        Arg::Int(1),
        Arg::Int(1),
    ];
    let e = call(&k, &args).unwrap_err();
    assert!(e.contains(&format!("sm_{}", sm + 10)) && e.contains(&format!("sm_{sm}")), "{e}");
}

#[test]
fn gpu_tvm_mlp2_nvptx_export() {
    let Some(p) = fixture("mlp2_nvptx.so") else { return };
    if !gpu_ready() {
        return;
    }
    let manifest: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(fixture("manifest.json").unwrap()).unwrap()).unwrap();
    let spec = &manifest["fixtures"]["mlp2_nvptx"];
    let (rtol, atol) = (spec["rtol"].as_f64().unwrap() as f32, spec["atol"].as_f64().unwrap() as f32);
    let (in_shape, in_bytes) = read_npy_f32(&fixture(spec["inputs"]["data"].as_str().unwrap()).unwrap());
    let (_, out_bytes) = read_npy_f32(&fixture(spec["outputs"][0].as_str().unwrap()).unwrap());
    let f32s = |b: &[u8]| b.chunks(4).map(|c| f32::from_le_bytes(c.try_into().unwrap())).collect::<Vec<f32>>();
    let (input, want) = (f32s(&in_bytes), f32s(&out_bytes));
    let m = load(&p).unwrap();
    let Ok(Ret::Module(ex)) = call(&get_function(&m, "default", false).unwrap(), &[Arg::Device(CUDA, 0)]) else {
        panic!("default(cuda): {}", last_error())
    };
    let ex = Mod(ex);
    let x = DevArray::new(&in_shape, 2, 1);
    // SAFETY: `input` holds the array's bytes.
    assert_eq!(unsafe { napi::TVMArrayCopyFromBytes(x.0, input.as_ptr() as *mut c_void, input.len() * 4) }, 0);
    call(&get_function(&ex, "set_input", false).unwrap(), &[Arg::Str("data"), Arg::Array(x.0.cast())]).unwrap();
    call(&get_function(&ex, "run", false).unwrap(), &[]).unwrap();
    let Ok(Ret::Other(13, h)) = call(&get_function(&ex, "get_output", false).unwrap(), &[Arg::Int(0)]) else {
        panic!("get_output: {}", last_error())
    };
    let out = DevArray(h as usize as *mut DLTensor);
    let got = out.f32s(want.len());
    for (g, w) in got.iter().zip(&want) {
        assert!((g - w).abs() <= atol + rtol * w.abs(), "{g} vs {w}");
    }
}
