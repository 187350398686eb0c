//! CUDA through the C API. Everywhere: CUDA exports and modules load without a driver, queries
//! degrade to "not there", operations fail with a clear `CUDA: ...` error, CPU models keep
//! running (checked in a child process whose `TVM_CUDA_LIBRARY` names no file). With a driver
//! (`cuda(0).exist`): the device API, hand-written PTX kernels in TVM's conventions, the
//! architecture check, streams, pinned memory, threads, workspaces, the global barrier,
//! dynamic shared memory, an out-of-bounds kernel, a model on device 1 and TVM v0.8's
//! `mlp2_nvptx.so` against the manifest. CI runs them on the simulated driver of
//! `tools/cudasim` (`TVM_CUDA_LIBRARY`), where none may skip; with a real driver they run
//! unchanged; with neither they print why they skip.

mod common;

use common::*;
use std::ffi::c_void;
use std::path::PathBuf;
use tvm_runtime::abi::DLTensor;
use tvm_runtime::classic_api::ndarray as napi;

const CUDA: i32 = 2;
const CUDA_HOST: i32 = 3;

fn attr(t: i64, id: i64, kind: i64) -> Result<Ret, String> {
    call_global("runtime.GetDeviceAttr", &[Arg::Int(t), Arg::Int(id), Arg::Int(kind)])
}

/// Whether CUDA device 0 exists; prints why the caller skips if not. Under `CI=true` with
/// `TVM_CUDA_LIBRARY` set (the simulated driver), or with `TVMRT_REQUIRE_CUDA=1` (the GPU
/// check), a missing device is a failure.
fn gpu_ready() -> bool {
    if attr(2, 0, 0).unwrap().int() == 1 {
        return true;
    }
    if std::env::var("TVMRT_REQUIRE_CUDA").as_deref() == Ok("1") {
        let why = DevArray::try_new(&[1], 2, CUDA).err().unwrap_or_default();
        panic!("TVMRT_REQUIRE_CUDA=1 but cuda(0) does not exist: {why}");
    }
    if let Ok(lib) = std::env::var("TVM_CUDA_LIBRARY") {
        if std::env::var("CI").as_deref() == Ok("true") && !lib.is_empty() {
            let why = DevArray::try_new(&[1], 2, CUDA).err().unwrap_or_default();
            panic!("TVM_CUDA_LIBRARY={lib} is set under CI but cuda(0) does not exist: {why}");
        }
    }
    eprintln!("SKIP: no CUDA driver or GPU here (cuda(0).exist == 0); the GPU tests need one");
    false
}

/// Whether the driver is the simulator (its device names say so).
fn simulated() -> bool {
    matches!(attr(2, 0, 5), Ok(Ret::Str(n)) if n.contains("cudasim"))
}

/// Runs this test binary's `test` in a child process with `env` set; its output.
fn run_child(test: &str, env: &[(&str, &str)]) -> std::process::Output {
    let mut cmd = std::process::Command::new(std::env::current_exe().unwrap());
    cmd.args(["--exact", test, "--nocapture", "--test-threads=1"]).env("TVMRT_CUDA_CHILD", test);
    for (k, v) in env {
        cmd.env(k, v);
    }
    let out = cmd.output().unwrap();
    assert!(
        out.status.success(),
        "child {test} failed:\n{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

/// Whether this process is the child running `test`.
fn is_child(test: &str) -> bool {
    std::env::var("TVMRT_CUDA_CHILD").as_deref() == Ok(test)
}

const PTX: &str = include_str!("fixtures/cuda_vadd.ptx");

const META: &str = include_str!("fixtures/cuda_vadd.tvm_meta.json");

/// The global-barrier and dynamic-shared-memory kernels.
const KERNELS: &str = include_str!("fixtures/cuda_kernels.ptx");

const KERNELS_META: &str = include_str!("fixtures/cuda_kernels.tvm_meta.json");

fn write_module(name: &str, ptx: &str, meta: &str) -> PathBuf {
    // (Not the module made for an architecture newer than the device: it is meant to be refused.)
    if name != "newer" {
        ptxas_check(ptx, name);
    }
    let dir = out_dir().join(format!("cuda-{}-{name}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let p = dir.join(format!("{name}.ptx"));
    std::fs::write(&p, ptx).unwrap();
    std::fs::write(dir.join(format!("{name}.tvm_meta.json")), meta).unwrap();
    p
}

fn write_ptx(name: &str, ptx: &str) -> PathBuf {
    write_module(name, ptx, META)
}

/// The `cuda` blob entry, written here independently of the runtime's writer.
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
    if !gpu_ready() {
        driverless_checks(&m, "");
    }
}

/// Without a driver: queries say "not there", operations fail with `CUDA: ...` (containing
/// `expect`), CUDA exports load, CPU models run.
fn driverless_checks(m: &Mod, expect: &str) {
    for t in [2, 3] {
        assert_eq!(attr(t, 0, 0).unwrap().int(), 0, "exist of type {t}");
        let e = attr(t, 0, 1).unwrap_err();
        assert!(e.contains("CUDA: "), "{e}");
    }
    let e = DevArray::try_new(&[4], 2, CUDA).err().unwrap();
    assert!(e.contains("CUDA: ") && e.contains(expect), "{e}");
    let e = DevArray::try_new(&[4], 2, CUDA_HOST).err().unwrap();
    assert!(e.contains("CUDA: "), "{e}");
    let k = get_function(m, "vadd_kernel0", false).unwrap();
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
fn without_a_driver_in_a_child() {
    let out = run_child("child_no_driver", &[("TVM_CUDA_LIBRARY", "/nonexistent/libcuda.so.1")]);
    assert!(String::from_utf8_lossy(&out.stdout).contains("child checks passed"));
    // The simulated driver with no device: cuInit fails, the same way.
    if let Ok(lib) = std::env::var("TVM_CUDA_LIBRARY") {
        if gpu_ready() && simulated() {
            let env = [("TVM_CUDA_LIBRARY", lib.as_str()), ("CUDASIM_DEVICES", "0")];
            let out = run_child("child_no_device", &env);
            assert!(String::from_utf8_lossy(&out.stdout).contains("child checks passed"));
        }
    }
}

/// The body of [`without_a_driver_in_a_child`] with a driver that cannot be loaded.
#[test]
fn child_no_driver() {
    if !is_child("child_no_driver") {
        return;
    }
    let m = load(&write_ptx("nodrv_child", PTX)).unwrap();
    driverless_checks(&m, "/nonexistent/libcuda.so.1");
    println!("child checks passed");
}

/// The body of [`without_a_driver_in_a_child`] with a driver that has no device.
#[test]
fn child_no_device() {
    if !is_child("child_no_device") {
        return;
    }
    let m = load(&write_ptx("nodev_child", PTX)).unwrap();
    driverless_checks(&m, "no CUDA-capable device is detected");
    println!("child checks passed");
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
    assert_eq!(unsafe { tvm_runtime::classic_api::runtime_api::TVMModGetFunction(m.0, n.as_ptr(), 0, &mut out) }, -1);
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
    let dapi = tvm_runtime::classic_api::device::TVMStreamCreate;
    let mut s = std::ptr::null_mut();
    // SAFETY: plain calls with a valid out-pointer; the stream is freed at the end.
    unsafe {
        assert_eq!(dapi(2, 0, &mut s), 0);
        assert_eq!(tvm_runtime::classic_api::device::TVMSetStream(2, 0, s), 0);
    }
    vadd(&k, 4097, 0.5);
    // SAFETY: the stream created above.
    unsafe {
        assert_eq!(tvm_runtime::classic_api::device::TVMSynchronize(2, 0, s), 0);
        assert_eq!(tvm_runtime::classic_api::device::TVMSetStream(2, 0, std::ptr::null_mut()), 0);
        assert_eq!(tvm_runtime::classic_api::device::TVMStreamFree(2, 0, s), 0);
    }

    // Workspaces.
    let w = tvm_runtime::classic_api::backend::TVMBackendAllocWorkspace(2, 0, 5000, 2, 32);
    assert!(!w.is_null(), "{}", last_error());
    // SAFETY: from the pool above.
    assert_eq!(unsafe { tvm_runtime::classic_api::backend::TVMBackendFreeWorkspace(2, 0, w) }, 0);

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
// SAFETY: module handles may be used from any thread.
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
    assert!(e.contains("kernel vadd_kernel0 on cuda(0)"), "the kernel and device are named: {e}");
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
    // Its PTX as the driver gets it (libdevice's __nv_fmaf defined) passes ptxas where it is set.
    let cuda = cuda_import(&m).expect("a cuda module among the imports");
    let Ok(Ret::Str(ptx)) = call_global("runtime.ModuleGetSource", &[Arg::Module(&cuda), Arg::Str("ptx")]) else {
        panic!("ModuleGetSource: {}", last_error())
    };
    assert!(ptx.contains(".extern .func  (.param .b32 func_retval0) __nv_fmaf"), "TVM's PTX as exported");
    ptxas_check(&ptx, "mlp2_nvptx");
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

/// The first `cuda` module in `m`'s import tree.
fn cuda_import(m: &Mod) -> Option<Mod> {
    (0..imports_size(m))
        .map(|i| import(m, i))
        .find_map(|c| if type_key(&c) == "cuda" { Some(c) } else { cuda_import(&c) })
}

/// Runs `mlp2_nvptx.so` on CUDA device `dev` and compares with the manifest; the output's
/// device id.
fn run_mlp2(dev: i32) -> Option<i32> {
    let p = fixture("mlp2_nvptx.so")?;
    let manifest: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(fixture("manifest.json")?).unwrap()).unwrap();
    let spec = &manifest["fixtures"]["mlp2_nvptx"];
    let (rtol, atol) = (spec["rtol"].as_f64().unwrap() as f32, spec["atol"].as_f64().unwrap() as f32);
    let (in_shape, in_bytes) = read_npy_f32(&fixture(spec["inputs"]["data"].as_str().unwrap())?);
    let (_, out_bytes) = read_npy_f32(&fixture(spec["outputs"][0].as_str().unwrap())?);
    let want: Vec<f32> = out_bytes.chunks(4).map(|c| f32::from_le_bytes(c.try_into().unwrap())).collect();
    let m = load(&p).unwrap();
    let Ok(Ret::Module(ex)) = call(&get_function(&m, "default", false).unwrap(), &[Arg::Device(CUDA, dev)]) else {
        panic!("default(cuda({dev})): {}", last_error())
    };
    let ex = Mod(ex);
    let x = DevArray::new(&in_shape, 2, 1);
    x.write(in_bytes.as_ptr().cast(), in_bytes.len());
    call(&get_function(&ex, "set_input", false).unwrap(), &[Arg::Str("data"), Arg::Array(x.0.cast())]).unwrap();
    let run = get_function(&ex, "run", false).unwrap();
    let mut device = -1;
    for _ in 0..2 {
        call(&run, &[]).unwrap();
        let Ok(Ret::Other(13, h)) = call(&get_function(&ex, "get_output", false).unwrap(), &[Arg::Int(0)]) else {
            panic!("get_output: {}", last_error())
        };
        let out = DevArray(h as usize as *mut DLTensor);
        // SAFETY: a live array returned by get_output.
        device = unsafe { (*out.0).device.device_id };
        for (g, w) in out.f32s(want.len()).iter().zip(&want) {
            assert!((g - w).abs() <= atol + rtol * w.abs(), "{g} vs {w}");
        }
    }
    Some(device)
}

#[test]
fn gpu_model_on_device_1() {
    if !gpu_ready() {
        return;
    }
    // The simulator configures a second device in the child; a real machine needs two GPUs.
    let out = run_child("child_device_1", &[("CUDASIM_DEVICES", "2")]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("child checks passed") || text.contains("SKIP"), "{text}");
    if simulated() {
        assert!(text.contains("child checks passed"), "{text}");
    }
}

/// The body of [`gpu_model_on_device_1`].
#[test]
fn child_device_1() {
    if !is_child("child_device_1") {
        return;
    }
    if attr(2, 1, 0).unwrap().int() != 1 {
        println!("SKIP: one CUDA device only");
        return;
    }
    if let Some(device) = run_mlp2(1) {
        assert_eq!(device, 1, "the outputs live on device 1");
    }
    // Device 0 still works beside it, from the same thread.
    let m = load(&write_ptx("dev1", PTX)).unwrap();
    vadd(&get_function(&m, "vadd_kernel0", false).unwrap(), 77, 3.0);
    println!("child checks passed");
}

#[test]
fn gpu_global_barrier() {
    if !gpu_ready() {
        return;
    }
    let m = load(&write_module("barrier", KERNELS, KERNELS_META)).unwrap();
    let prepare = get_function(&m, "__tvm_prepare_global_barrier", false).unwrap();
    let k = get_function(&m, "rotate_kernel0", false).unwrap();
    let (blocks, threads) = (6usize, 32usize);
    let n = blocks * threads;
    let (a, b) = (DevArray::new(&[n as i64], 2, CUDA), DevArray::new(&[n as i64], 2, CUDA));
    for _ in 0..2 {
        // The counter is zeroed before every launch (it ends at `blocks`).
        call(&prepare, &[]).unwrap();
        let args = [
            Arg::Handle(a.data()),
            Arg::Handle(b.data()),
            Arg::Int(blocks as i64),
            Arg::Int(blocks as i64),
            Arg::Int(threads as i64),
        ];
        call(&k, &args).unwrap();
        let want: Vec<f32> = (0..n).map(|g| ((g + threads) % n) as f32).collect();
        assert_eq!(b.f32s(n), want);
    }
}

#[test]
fn gpu_dynamic_shared_memory() {
    if !gpu_ready() {
        return;
    }
    let m = load(&write_module("dynshared", KERNELS, KERNELS_META)).unwrap();
    let k = get_function(&m, "reverse_kernel0", false).unwrap();
    let (blocks, threads) = (5usize, 96usize);
    let n = blocks * threads;
    let v: Vec<f32> = (0..n).map(|i| i as f32 * 1.5).collect();
    let (a, b) = (DevArray::from_f32(&v, CUDA), DevArray::new(&[n as i64], 2, CUDA));
    let args = [
        Arg::Handle(a.data()),
        Arg::Handle(b.data()),
        Arg::Int(blocks as i64),
        Arg::Int(threads as i64),
        Arg::Int((threads * 4) as i64),
    ];
    call(&k, &args).unwrap();
    let want: Vec<f32> = (0..n).map(|i| v[(i / threads) * threads + threads - 1 - i % threads]).collect();
    assert_eq!(b.f32s(n), want);
}

#[test]
fn gpu_out_of_bounds_kernel_is_a_clear_error() {
    if !gpu_ready() {
        return;
    }
    // In a child: the failed launch leaves the context unusable, as on a GPU.
    let out = run_child("child_out_of_bounds", &[]);
    assert!(String::from_utf8_lossy(&out.stdout).contains("child checks passed"));
    if simulated() {
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            err.contains("CUDA_ERROR_ILLEGAL_ADDRESS")
                && err.contains("vadd_kernel0")
                && err.contains("outside any allocation"),
            "the simulator names the kernel, thread and address: {err}"
        );
    }
}

/// The body of [`gpu_out_of_bounds_kernel_is_a_clear_error`].
#[test]
fn child_out_of_bounds() {
    if !is_child("child_out_of_bounds") {
        return;
    }
    let m = load(&write_ptx("oob", PTX)).unwrap();
    let k = get_function(&m, "vadd_kernel0", false).unwrap();
    let (a, b, c) = (DevArray::new(&[64], 2, CUDA), DevArray::new(&[64], 2, CUDA), DevArray::new(&[64], 2, CUDA));
    // n far beyond the arrays: threads read and write past their ends.
    let n = 1 << 24;
    let args = vadd_args([a.data(), b.data(), c.data()], 1.0, n, n / 256, 256);
    // The launch is asynchronous: its failure shows at the launch or at the next sync.
    let launched = call(&k, &args);
    let mut sync = std::ptr::null_mut::<c_void>();
    // SAFETY: a plain call (the legacy stream).
    let rc = unsafe { tvm_runtime::classic_api::device::TVMSynchronize(2, 0, std::mem::take(&mut sync)) };
    let e = match launched {
        Err(e) => e,
        Ok(_) => {
            assert_eq!(rc, -1, "the failed kernel is reported by the next synchronisation");
            last_error()
        }
    };
    assert!(e.contains("illegal memory access") || e.contains("CUDA_ERROR_ILLEGAL_ADDRESS"), "{e}");
    assert!(
        e.contains("poisons the CUDA context")
            && e.contains("the last kernel this thread launched: vadd_kernel0 on cuda(0)"),
        "{e}"
    );
    // Every later call on the context reports it; nothing crashes.
    let e = DevArray::try_new(&[4], 2, CUDA).err().expect("the context is unusable");
    assert!(e.contains("illegal memory access"), "{e}");
    let e = call(&k, &args).unwrap_err();
    assert!(e.contains("ILLEGAL_ADDRESS") || e.contains("illegal memory access"), "{e}");
    // CPU work goes on.
    let (x, y) = (DevArray::from_f32(&[1.0, 2.0], 1), DevArray::new(&[2], 2, 1));
    // SAFETY: live arrays of equal size.
    assert_eq!(unsafe { napi::TVMArrayCopyFromTo(x.0, y.0, std::ptr::null_mut()) }, 0);
    assert_eq!(y.f32s(2), vec![1.0, 2.0]);
    std::mem::forget((a, b, c));
    println!("child checks passed");
}

#[test]
fn gpu_streams_synchronised_with_each_other() {
    if !gpu_ready() {
        return;
    }
    use tvm_runtime::classic_api::device as dapi;
    let m = load(&write_ptx("streams", PTX)).unwrap();
    let k = get_function(&m, "vadd_kernel0", false).unwrap();
    let (mut s1, mut s2) = (std::ptr::null_mut(), std::ptr::null_mut());
    // SAFETY: valid out-pointers; the streams are freed below.
    unsafe {
        assert_eq!(dapi::TVMStreamCreate(2, 0, &mut s1), 0);
        assert_eq!(dapi::TVMStreamCreate(2, 0, &mut s2), 0);
        assert_eq!(dapi::TVMSetStream(2, 0, s1), 0);
    }
    vadd(&k, 3000, 2.0);
    // SAFETY: live streams.
    unsafe {
        assert_eq!(dapi::TVMStreamStreamSynchronize(2, 0, s1, s2), 0, "{}", last_error());
        assert_eq!(dapi::TVMSetStream(2, 0, s2), 0);
    }
    vadd(&k, 129, -0.5);
    // SAFETY: live streams, freed once.
    unsafe {
        assert_eq!(dapi::TVMSynchronize(2, 0, s2), 0);
        assert_eq!(dapi::TVMSetStream(2, 0, std::ptr::null_mut()), 0);
        assert_eq!(dapi::TVMStreamFree(2, 0, s1), 0);
        assert_eq!(dapi::TVMStreamFree(2, 0, s2), 0);
    }
}

#[test]
fn gpu_workspaces_released_by_exiting_threads() {
    if !gpu_ready() {
        return;
    }
    let free = || match call_global("runtime.GetCudaFreeMemory", &[]) {
        Ok(Ret::Str(s)) => s.split_whitespace().nth(4).unwrap().parse::<u64>().unwrap(),
        other => panic!("GetCudaFreeMemory: {other:?}"),
    };
    let before = free();
    let ts: Vec<_> = (0..4)
        .map(|t| {
            std::thread::spawn(move || {
                for r in 0..10 {
                    let n = 1000 + 4096 * t + 17 * r;
                    let w = tvm_runtime::classic_api::backend::TVMBackendAllocWorkspace(2, 0, n, 2, 32);
                    assert!(!w.is_null(), "{}", last_error());
                    let h = tvm_runtime::classic_api::backend::TVMBackendAllocWorkspace(3, 0, n, 2, 32);
                    assert!(!h.is_null(), "{}", last_error());
                    // SAFETY: from the pools above, freed once, in reverse order.
                    unsafe {
                        assert_eq!(tvm_runtime::classic_api::backend::TVMBackendFreeWorkspace(3, 0, h), 0);
                        assert_eq!(tvm_runtime::classic_api::backend::TVMBackendFreeWorkspace(2, 0, w), 0);
                    }
                }
            })
        })
        .collect();
    for t in ts {
        t.join().unwrap();
    }
    if simulated() {
        // Other tests of this process allocate too: only the simulator's exact accounting of
        // this test's share is checked, in a quiet moment, by retrying.
        let ok = (0..100).any(|_| {
            std::thread::sleep(std::time::Duration::from_millis(50));
            free() >= before
        });
        assert!(ok, "the exiting threads' workspaces were returned to the device");
    }
}

#[test]
fn gpu_unsupported_ptx_is_named() {
    if !gpu_ready() || !simulated() {
        return;
    }
    // Valid PTX the simulator does not run: the load fails naming the instruction.
    let ptx = PTX.replace("DONE:\n\tret;", "DONE:\n\tbrkpt;\n\tret;");
    let m = load(&write_ptx("brkpt", &ptx)).unwrap();
    let k = get_function(&m, "vadd_kernel0", false).unwrap();
    let e = call(&k, &vadd_args([std::ptr::null_mut(); 3], 1.0, 1, 1, 1)).unwrap_err();
    assert!(e.contains("CUDA_ERROR_INVALID_PTX") && e.contains("`brkpt`"), "{e}");
    assert!(e.contains("kernel vadd_kernel0 on cuda(0)"), "{e}");
}

/// A float64 array of `n` elements on CUDA device 0 holding `v`.
fn f64_array(v: &[f64]) -> DevArray {
    let mut h = std::ptr::null_mut();
    let shape = [v.len() as i64];
    // SAFETY: valid shape and out-pointer.
    assert_eq!(unsafe { napi::TVMArrayAlloc(shape.as_ptr(), 1, 2, 64, 1, CUDA, 0, &mut h) }, 0, "{}", last_error());
    let a = DevArray(h);
    a.write(v.as_ptr().cast(), v.len() * 8);
    a
}

#[test]
fn gpu_eight_byte_scalar_parameters() {
    if !gpu_ready() {
        return;
    }
    let m = load(&write_module("axpy64", KERNELS, KERNELS_META)).unwrap();
    let k = get_function(&m, "axpy64_kernel0", false).unwrap();
    let n = 1000usize;
    let x: Vec<f64> = (0..n).map(|i| i as f64 * 0.125).collect();
    let y: Vec<f64> = (0..n).map(|i| 1e10 + i as f64).collect();
    let (dx, dy) = (f64_array(&x), f64_array(&y));
    let a = 3.000_000_000_1;
    // Only the first n - 3 elements: the int64 bound reaches the kernel as 8 bytes.
    let valid = n - 3;
    let args = [
        Arg::Handle(dx.data()),
        Arg::Handle(dy.data()),
        Arg::Float(a),
        Arg::Int(valid as i64),
        Arg::Int(7),
        Arg::Int(4),
        Arg::Int(256),
    ];
    call(&k, &args).unwrap();
    let mut got = vec![0f64; n];
    // SAFETY: `got` holds the array's bytes.
    assert_eq!(unsafe { napi::TVMArrayCopyToBytes(dy.0, got.as_mut_ptr().cast(), n * 8) }, 0);
    for i in 0..n {
        let want = if i < valid { a.mul_add(x[i], y[i]) + 7.0 } else { y[i] };
        assert_eq!(got[i], want, "element {i}");
    }
    // A negative int64 reaches the kernel intact: nothing is written.
    let args = [
        Arg::Handle(dx.data()),
        Arg::Handle(dy.data()),
        Arg::Float(a),
        Arg::Int(-5),
        Arg::Int(7),
        Arg::Int(4),
        Arg::Int(256),
    ];
    call(&k, &args).unwrap();
    let mut again = vec![0f64; n];
    // SAFETY: as above.
    assert_eq!(unsafe { napi::TVMArrayCopyToBytes(dy.0, again.as_mut_ptr().cast(), n * 8) }, 0);
    assert_eq!(again, got);
}

#[test]
fn gpu_huge_allocation_is_a_clear_error() {
    if !gpu_ready() {
        return;
    }
    // 2^45 float32 (128 TiB): more than any GPU has; the error names CUDA, the size and device.
    let e = DevArray::try_new(&[1 << 45], 2, CUDA).err().expect("a 128 TiB array");
    assert!(
        e.contains("CUDA: out of memory")
            && e.contains("140737488355328 bytes on cuda(0)")
            && e.contains("CUDA_ERROR_OUT_OF_MEMORY"),
        "{e}"
    );
    // The device goes on working.
    let a = DevArray::from_f32(&[1.0, 2.0, 3.0], CUDA);
    assert_eq!(a.f32s(3), vec![1.0, 2.0, 3.0]);
}

/// Name, single precision, operand count, CPU reference.
type LibdeviceFn = (&'static str, bool, usize, fn(&[f64]) -> f64);

/// The libdevice functions the runtime defines for PTX that declares them `.extern`, with
/// their operand count and a CPU reference (f64 for both widths; f32 results are rounded).
const LIBDEVICE: &[LibdeviceFn] = &[
    ("__nv_fmaf", true, 3, |a| (a[0] as f32).mul_add(a[1] as f32, a[2] as f32) as f64),
    ("__nv_fma", false, 3, |a| a[0].mul_add(a[1], a[2])),
    ("__nv_fabsf", true, 1, |a| a[0].abs()),
    ("__nv_fabs", false, 1, |a| a[0].abs()),
    ("__nv_sqrtf", true, 1, |a| (a[0] as f32).sqrt() as f64),
    ("__nv_sqrt", false, 1, |a| a[0].sqrt()),
    ("__nv_fminf", true, 2, |a| a[0].min(a[1])),
    ("__nv_fmaxf", true, 2, |a| a[0].max(a[1])),
    ("__nv_fmin", false, 2, |a| a[0].min(a[1])),
    ("__nv_fmax", false, 2, |a| a[0].max(a[1])),
    ("__nv_floorf", true, 1, |a| a[0].floor()),
    ("__nv_ceilf", true, 1, |a| a[0].ceil()),
    ("__nv_truncf", true, 1, |a| a[0].trunc()),
    ("__nv_floor", false, 1, |a| a[0].floor()),
    ("__nv_ceil", false, 1, |a| a[0].ceil()),
    ("__nv_trunc", false, 1, |a| a[0].trunc()),
];

/// A kernel `libdevice_kernel0(X32, Y32, X64, Y64)` in the form TVM's NVPTX back end emits
/// without libdevice linked in: function k of [`LIBDEVICE`] reads its operands at X[3k..] and
/// writes Y[k], each call through an `.extern .func` declaration.
fn libdevice_ptx() -> String {
    let mut decls = String::new();
    let mut body = String::new();
    for (k, (name, single, n, _)) in LIBDEVICE.iter().enumerate() {
        let (b, t, w, reg, x, y) =
            if *single { ("b32", "f32", 4, "%f", "%rd1", "%rd2") } else { ("b64", "f64", 8, "%fd", "%rd3", "%rd4") };
        let params: Vec<String> = (0..*n).map(|i| format!("\t.param .{b} {name}_param_{i}")).collect();
        decls += &format!(".extern .func  (.param .{b} func_retval0) {name}\n(\n{}\n)\n;\n", params.join(",\n"));
        body += &format!("\t{{\n\t.reg .{b} temp_param_reg;\n");
        for i in 0..*n {
            body += &format!("\tld.global.{t} {reg}{}, [{x}+{}];\n", 4 * k + i, (3 * k + i) * w);
            body += &format!("\t.param .{b} param{i};\n\tst.param.{t} [param{i}+0], {reg}{};\n", 4 * k + i);
        }
        let args: Vec<String> = (0..*n).map(|i| format!("param{i}")).collect();
        body += &format!(
            "\t.param .{b} retval0;\n\tcall.uni (retval0), \n\t{name}, \n\t(\n\t{}\n\t);\n",
            args.join(", \n\t")
        );
        body += &format!(
            "\tld.param.{t} {reg}{r}, [retval0+0];\n\t}}\n\tst.global.{t} [{y}+{}], {reg}{r};\n",
            k * w,
            r = 4 * k + 3
        );
    }
    let regs = 4 * LIBDEVICE.len();
    format!(
        ".version 6.0\n.target sm_50\n.address_size 64\n\n{decls}\n.visible .entry libdevice_kernel0(\n\
         \t.param .u64 p0,\n\t.param .u64 p1,\n\t.param .u64 p2,\n\t.param .u64 p3\n)\n{{\n\
         \t.reg .f32 %f<{regs}>;\n\t.reg .f64 %fd<{regs}>;\n\t.reg .b64 %rd<5>;\n\
         \tld.param.u64 %rd1, [p0];\n\tld.param.u64 %rd2, [p1];\n\tld.param.u64 %rd3, [p2];\n\tld.param.u64 %rd4, [p3];\n\
         {body}\tret;\n}}\n"
    )
}

#[test]
fn gpu_libdevice_externs_are_defined() {
    if !gpu_ready() {
        return;
    }
    let meta = r#"{"tvm_version": "0.8.0", "func_info": {"libdevice_kernel0": {"name": "",
        "arg_types": ["handle", "handle", "handle", "handle"], "launch_param_tags": ["threadIdx.x"]}}}"#;
    let ptx = libdevice_ptx();
    // What the driver gets: every declaration defined.
    let defined = tvm_runtime::device::cuda::libdevice::define_externs(&ptx).unwrap();
    assert!(!defined.contains(".extern"), "{defined}");
    let m = load(&write_module("libdevice", &ptx, meta)).unwrap();
    let k = get_function(&m, "libdevice_kernel0", false).unwrap();
    // Operands: fmaf's is the case where a fused multiply-add differs from two roundings.
    let e = 2f64.powi(-12);
    let ops: Vec<[f64; 3]> = vec![[1.0 + e, 1.0 + e, -1.0], [-2.5, -0.75, -1.5], [2.0, 0.0, 0.0], [-4.5, 0.0, 0.0]];
    let operand = |k: usize, i: usize| match (LIBDEVICE[k].0, k) {
        ("__nv_fmaf" | "__nv_fma", _) => ops[0][i],
        (n, _) if n.contains("sqrt") => ops[2][i],
        (n, _) if n.contains("fmin") || n.contains("fmax") => ops[1][i],
        _ => ops[3][i] + 0.25 * (k % 3) as f64,
    };
    let mut x32 = vec![0f32; 3 * LIBDEVICE.len()];
    let mut x64 = vec![0f64; 3 * LIBDEVICE.len()];
    for k in 0..LIBDEVICE.len() {
        for i in 0..3 {
            x32[3 * k + i] = operand(k, i) as f32;
            x64[3 * k + i] = operand(k, i);
        }
    }
    let (dx32, dy32) = (DevArray::from_f32(&x32, CUDA), DevArray::new(&[LIBDEVICE.len() as i64], 2, CUDA));
    let (dx64, dy64) = (f64_array(&x64), f64_array(&vec![0.0; LIBDEVICE.len()]));
    let args = [
        Arg::Handle(dx32.data()),
        Arg::Handle(dy32.data()),
        Arg::Handle(dx64.data()),
        Arg::Handle(dy64.data()),
        Arg::Int(1),
    ];
    call(&k, &args).unwrap();
    let y32 = dy32.f32s(LIBDEVICE.len());
    let mut y64 = vec![0f64; LIBDEVICE.len()];
    // SAFETY: `y64` holds the array's bytes.
    assert_eq!(unsafe { napi::TVMArrayCopyToBytes(dy64.0, y64.as_mut_ptr().cast(), y64.len() * 8) }, 0);
    for (k, (name, single, _, f)) in LIBDEVICE.iter().enumerate() {
        let a: Vec<f64> = (0..3).map(|i| if *single { f64::from(x32[3 * k + i]) } else { x64[3 * k + i] }).collect();
        if *single {
            assert_eq!(y32[k], f(&a) as f32, "{name}{a:?}");
        } else {
            assert_eq!(y64[k], f(&a), "{name}{a:?}");
        }
    }
    assert_eq!(y32[0], (2f32.powi(-11) + 2f32.powi(-24)), "__nv_fmaf rounds once");
}
