//! OpenCL through the C API, on whatever OpenCL platform the machine has (CI: PoCL, the CPU
//! implementation): the device API, kernels of the project's own sources in TVM's conventions
//! (from a `.cl` file and from a model library's blob, called the way generated host code calls
//! them), bad input, concurrency, the program cache, TVM v0.8's `mlp2_opencl.so`, and machines
//! without a driver or platform (child processes). Without an OpenCL device the tests skip with
//! a message, except under `CI=true`, where that is a failure.

mod common;

use common::*;
use std::ffi::c_void;
use std::path::{Path, PathBuf};
use std::process::Command;
use tvm_runtime::abi::DLTensor;
use tvm_runtime::classic_api::ndarray as napi;

const OPENCL: i32 = 4;

/// A module or function handle shared between threads.
struct Shared<T>(T);
// SAFETY: module and function handles may be used from any thread; the runtime
// synchronises.
unsafe impl<T> Send for Shared<T> {}
// SAFETY: as above.
unsafe impl<T> Sync for Shared<T> {}

/// Whether OpenCL device 0 exists; prints why the caller skips if not (fails under CI).
fn opencl_ready() -> bool {
    let exist = call_global("runtime.GetDeviceAttr", &[Arg::Int(4), Arg::Int(0), Arg::Int(0)]).unwrap().int();
    if exist == 1 {
        return true;
    }
    if std::env::var("CI").as_deref() == Ok("true") {
        panic!("no OpenCL device under CI=true (scripts/test.sh installs pocl-opencl-icd)");
    }
    eprintln!("SKIP: no OpenCL device here (install pocl-opencl-icd and ocl-icd-libopencl1 to run this test)");
    false
}

const SOURCE: &str = include_str!("fixtures/opencl_kernels.cl");

const META: &str = include_str!("fixtures/opencl_kernels.tvm_meta.json");

/// Writes `<name>.cl` and its side file into a fresh directory and returns the `.cl` path.
fn write_cl(name: &str, source: &str, meta: &str) -> PathBuf {
    let dir = out_dir().join(format!("cl-{}-{name}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let p = dir.join(format!("{name}.cl"));
    std::fs::write(&p, source).unwrap();
    std::fs::write(dir.join(format!("{name}.tvm_meta.json")), meta).unwrap();
    p
}

fn vadd_expected(a: &[f32], b: &[f32], s: f32) -> Vec<f32> {
    a.iter().zip(b).map(|(x, y)| x + s * y).collect()
}

/// Runs vadd_kernel0 of `m` on `n` elements and checks the result.
fn check_vadd(m: &Mod, n: usize, s: f32) {
    let f = get_function(m, "vadd_kernel0", false).expect("kernel function");
    common::check_vadd(&f, OPENCL, n, s, 64);
}

#[test]
fn device_api_and_attributes() {
    if !opencl_ready() {
        return;
    }
    let attr = |id: i64, kind: i64| call_global("runtime.GetDeviceAttr", &[Arg::Int(4), Arg::Int(id), Arg::Int(kind)]);
    assert_eq!(attr(99, 0).unwrap().int(), 0);
    assert!(attr(0, 1).unwrap().int() > 0, "max threads per block");
    assert_eq!(attr(0, 2).unwrap().int(), 1, "warp size");
    assert!(attr(0, 3).unwrap().int() > 0, "local memory");
    let Ok(Ret::Str(v)) = attr(0, 4) else { panic!("compute version") };
    assert!(v.contains('.') && !v.contains('\0'), "{v:?}");
    let Ok(Ret::Str(name)) = attr(0, 5) else { panic!("device name") };
    assert!(!name.is_empty() && !name.ends_with('\0'));
    assert!(attr(0, 7).unwrap().int() > 0, "compute units");
    let Ok(Ret::Str(dims)) = attr(0, 8) else { panic!("max thread dimensions") };
    assert!(dims.starts_with('[') && dims.matches(", ").count() == 2, "{dims}");
    assert_eq!(attr(0, 11).unwrap().int(), 120);
    assert!(matches!(attr(0, 9), Ok(Ret::Null)));
    assert!(attr(7, 1).unwrap_err().contains("Invalid device id 7"));

    // Copies: CPU -> CL -> CL -> CPU, with the checks of TVMArrayCopyFromTo.
    let v: Vec<f32> = (0..777).map(|i| i as f32).collect();
    let host = DevArray::from_f32(&v, 1);
    let d1 = DevArray::new(&[777], 2, OPENCL);
    let d2 = DevArray::new(&[777], 2, OPENCL);
    // SAFETY: live arrays of equal size.
    unsafe {
        assert_eq!(napi::TVMArrayCopyFromTo(host.0, d1.0, std::ptr::null_mut()), 0);
        assert_eq!(napi::TVMArrayCopyFromTo(d1.0, d2.0, std::ptr::null_mut()), 0);
    }
    assert_eq!(d2.f32s(777), v);
    // The data pointer is a descriptor whose first word is the cl_mem.
    // SAFETY: an OpenCL array's data is a descriptor of at least one pointer.
    assert!(!unsafe { *d1.data().cast::<*mut c_void>() }.is_null());
    let small = DevArray::new(&[5], 2, OPENCL);
    // SAFETY: live arrays.
    assert_ne!(unsafe { napi::TVMArrayCopyFromTo(host.0, small.0, std::ptr::null_mut()) }, 0);
    assert!(last_error().contains("size must exactly match"), "{}", last_error());
    // A texture scope is a clear error.
    let shape = [2i64, 2, 4];
    let e = call_global(
        "runtime.TVMArrayAllocWithScope",
        &[
            Arg::Handle(shape.as_ptr() as *mut c_void),
            Arg::Int(3),
            Arg::Str("float32"),
            Arg::Device(4, 0),
            Arg::Str("global.texture"),
        ],
    );
    assert!(e.is_err());
    // Workspaces from the per-thread pool: the same block comes back.
    let ws = tvm_runtime::classic_api::backend::TVMBackendAllocWorkspace(4, 0, 1000, 2, 32);
    assert!(!ws.is_null(), "{}", last_error());
    // SAFETY: from the pool above, same thread and device.
    assert_eq!(unsafe { tvm_runtime::classic_api::backend::TVMBackendFreeWorkspace(4, 0, ws) }, 0);
    let again = tvm_runtime::classic_api::backend::TVMBackendAllocWorkspace(4, 0, 10, 2, 32);
    assert_eq!(again, ws);
    // SAFETY: as above.
    assert_eq!(unsafe { tvm_runtime::classic_api::backend::TVMBackendFreeWorkspace(4, 0, again) }, 0);
    // Sync of the queue.
    // SAFETY: plain call.
    assert_eq!(unsafe { tvm_runtime::classic_api::device::TVMSynchronize(4, 0, std::ptr::null_mut()) }, 0);
}

#[test]
fn kernels_from_a_cl_file() {
    if !opencl_ready() {
        return;
    }
    let path = write_cl("own", SOURCE, META);
    let m = load(&path).expect("loadfile_cl");
    assert_eq!(type_key(&m), "opencl");
    assert!(get_function(&m, "nope", false).is_none());
    check_vadd(&m, 1000, 2.0);
    check_vadd(&m, 64, -1.0);

    // Two-dimensional NDRange: tags [blockIdx.y, blockIdx.x, threadIdx.x], extents (3, 5, 32)
    // give global [160, 3], local [32, 1].
    let f = get_function(&m, "fill2d_kernel0", false).unwrap();
    let out = DevArray::new(&[3, 160], 0, OPENCL);
    call(&f, &[Arg::Handle(out.data()), Arg::Int(160), Arg::Int(3), Arg::Int(5), Arg::Int(32)]).unwrap();
    let got = out.i32s(480);
    let want: Vec<i32> = (0..3).flat_map(|y| (0..160).map(move |x| y * 1000 + x)).collect();
    assert_eq!(got, want);

    // Bad calls: too few arguments, a wrong type code, a negative extent.
    let e = call(&f, &[Arg::Handle(out.data()), Arg::Int(160), Arg::Int(3)]).unwrap_err();
    assert!(e.contains("fill2d_kernel0 expects 5 arguments"), "{e}");
    let e = call(&f, &[Arg::Int(0), Arg::Int(160), Arg::Int(3), Arg::Int(5), Arg::Int(32)]).unwrap_err();
    assert!(e.contains("argument 0"), "{e}");
    let e = call(&f, &[Arg::Handle(out.data()), Arg::Int(160), Arg::Int(-3), Arg::Int(5), Arg::Int(32)]).unwrap_err();
    assert!(e.contains("out of range"), "{e}");

    // A device id beyond the platform's devices, set on another thread.
    let f = Shared(f);
    std::thread::spawn(move || {
        let f = &f;
        let f = &f.0;
        call_global("__tvm_set_device", &[Arg::Int(4), Arg::Int(7)]).unwrap();
        let e = call(f, &[Arg::Handle(std::ptr::null_mut()), Arg::Int(1), Arg::Int(1), Arg::Int(1), Arg::Int(1)])
            .unwrap_err();
        assert!(e.contains("Invalid OpenCL device_id=7"), "{e}");
    })
    .join()
    .unwrap();

    // Saved through the module API and loaded again: same kernels.
    let bytes = match call_global(
        "runtime.ModuleSaveToFile",
        &[Arg::Module(&m), Arg::Str(path.with_file_name("copy.cl").to_str().unwrap()), Arg::Str("")],
    ) {
        Ok(_) => std::fs::read(path.with_file_name("copy.cl")).unwrap(),
        Err(e) => panic!("save: {e}"),
    };
    assert_eq!(bytes, SOURCE.as_bytes());
}

#[test]
fn build_errors_and_missing_kernels() {
    if !opencl_ready() {
        return;
    }
    let src = "// Function: broken_kernel0\n__kernel void broken_kernel0(__global float* a) { this is not C; }\n\
               // Function: ghost_kernel0\n__kernel void other_name(__global float* a) { a[0] = 1.0f; }\n";
    let meta = r#"{"tvm_version": "0.8.0", "func_info": {
        "broken_kernel0": {"arg_types": ["handle"], "launch_param_tags": ["threadIdx.x"]},
        "ghost_kernel0": {"arg_types": ["handle"], "launch_param_tags": ["threadIdx.x"]}}}"#;
    let m = load(&write_cl("bad", src, meta)).expect("a bad kernel only fails when built");
    let buf = DevArray::new(&[4], 2, OPENCL);
    let f = get_function(&m, "broken_kernel0", false).unwrap();
    let e = call(&f, &[Arg::Handle(buf.data()), Arg::Int(1)]).unwrap_err();
    assert!(e.contains("OpenCL build error for device="), "{e}");
    assert!(e.lines().count() > 1 && e.to_lowercase().contains("error"), "the build log is in the error: {e}");
    // Failing again is the same clean error (nothing half-built was kept).
    assert!(call(&f, &[Arg::Handle(buf.data()), Arg::Int(1)]).unwrap_err().contains("OpenCL build error"));
    let g = get_function(&m, "ghost_kernel0", false).unwrap();
    let e = call(&g, &[Arg::Handle(buf.data()), Arg::Int(1)]).unwrap_err();
    assert!(e.contains("CL_INVALID_KERNEL_NAME") && e.contains("ghost_kernel0"), "{e}");

    // Load-time errors need no device: sources not matching the function info.
    let one = r#"{"tvm_version": "0.8.0", "func_info": {"vadd_kernel0": {"arg_types": ["handle"]}}}"#;
    let e = load(&write_cl("count", SOURCE, one)).unwrap_err();
    assert!(e.contains("number of parsed kernel sources does not match"), "{e}");
    let e = load(&write_cl("nodelim", "__kernel void k() {}", one)).unwrap_err();
    assert!(e.contains("no kernel delimiter was found"), "{e}");
    let bad_type = r#"{"tvm_version": "0.8.0", "func_info": {"vadd_kernel0": {"arg_types": ["int8"]},
        "fill2d_kernel0": {"arg_types": ["handle"]}}}"#;
    let m = load(&write_cl("int8", SOURCE, bad_type)).unwrap();
    let n = c("vadd_kernel0");
    let mut out = std::ptr::null_mut();
    // SAFETY: live module, valid string and out-pointer.
    let rc = unsafe { tvm_runtime::classic_api::runtime_api::TVMModGetFunction(m.0, n.as_ptr(), 0, &mut out) };
    assert_eq!(rc, -1);
    assert!(last_error().contains("Cannot handle int8 as device function argument"), "{}", last_error());
}

#[test]
fn kernels_on_many_threads() {
    if !opencl_ready() {
        return;
    }
    let m = std::sync::Arc::new(Shared(load(&write_cl("threads", SOURCE, META)).unwrap()));
    let threads: Vec<_> = (0..4)
        .map(|t| {
            let m = std::sync::Arc::clone(&m);
            std::thread::spawn(move || {
                for round in 0..25 {
                    let m = &m;
                    check_vadd(&m.0, 300 + t * 17 + round, t as f32 + 0.25);
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
}

#[test]
fn program_cache_on_disk() {
    if !opencl_ready() {
        return;
    }
    // Each step is a fresh process (the cache is for the next process start), with the cache
    // directory from the environment.
    let dir = out_dir().join(format!("clcache-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let d = dir.to_str().unwrap();
    let entries =
        || std::fs::read_dir(&dir).map(|d| d.map(|e| e.unwrap().path()).collect::<Vec<_>>()).unwrap_or_default();
    run_child("child_cache", &[("TVM_OPENCL_PROGRAM_CACHE", d), ("TVMRT_EXPECT", "")]);
    let written = entries();
    assert_eq!(written.len(), 1, "one program built, one entry written");
    let first = std::fs::read(&written[0]).unwrap();
    assert!(first.starts_with(b"TVMRTCL1"));
    // Built from the cached binary, same results, nothing new written.
    run_child("child_cache", &[("TVM_OPENCL_PROGRAM_CACHE", d), ("TVMRT_EXPECT", "")]);
    assert_eq!(entries(), written);
    assert_eq!(std::fs::read(&written[0]).unwrap(), first);
    // A damaged entry is ignored: rebuilt from source and written again.
    std::fs::write(&written[0], b"garbage").unwrap();
    run_child("child_cache", &[("TVM_OPENCL_PROGRAM_CACHE", d), ("TVMRT_EXPECT", "")]);
    assert_eq!(std::fs::read(&written[0]).unwrap(), first);
    std::fs::remove_dir_all(&dir).unwrap();
}

/// The body of [`program_cache_on_disk`], run only in its child processes.
#[test]
fn child_cache() {
    if std::env::var("TVMRT_OPENCL_CHILD").is_err() || std::env::var("TVM_OPENCL_PROGRAM_CACHE").is_err() {
        return;
    }
    let src = SOURCE.replace("Generated in", "Cache test, generated in");
    check_vadd(&load(&write_cl("cache", &src, META)).unwrap(), 500, 3.0);
    // Turned off by the config call: a new program writes nothing.
    call_global("runtime.opencl.SetProgramCacheDir", &[Arg::Str("")]).unwrap();
    let other = src.replace("Cache test", "Uncached");
    check_vadd(&load(&write_cl("nocache", &other, META)).unwrap(), 100, 1.0);
}

/// The `opencl` blob entry of a library, written here independently of the
/// runtime's writer.
fn opencl_entry(source: &str) -> Vec<u8> {
    let fill2d: KernelInfo<'_> =
        ("fill2d_kernel0", &[(3, 64, 1), (0, 32, 1)], &["blockIdx.y", "blockIdx.x", "threadIdx.x"]);
    device_entry("cl", &[VADD_KERNEL, fill2d], source.as_bytes())
}

#[test]
fn model_library_with_an_opencl_blob() {
    // Loading needs no device: only the calls do.
    let blob = Blob::default().lib().module("opencl", &opencl_entry(SOURCE)).tree(&[0, 1, 1], &[1]);
    let host = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/opencl_host.c");
    let lib = build_shared("clmodel", &[host], &blob_c_source(&blob.bytes()));
    let m = load(&lib).expect("library with an opencl import loads");
    assert_eq!(imports_size(&m), 1);
    assert_eq!(type_key(&import(&m, 0)), "opencl");
    if !opencl_ready() {
        return;
    }
    let f = get_function(&m, "vadd", false).unwrap();
    let n = 2049;
    let a: Vec<f32> = (0..n).map(|i| (i % 13) as f32).collect();
    let b: Vec<f32> = (0..n).map(|i| (i % 7) as f32 * 0.5).collect();
    let (da, db, dc) =
        (DevArray::from_f32(&a, OPENCL), DevArray::from_f32(&b, OPENCL), DevArray::new(&[n as i64], 2, OPENCL));
    call(&f, &[Arg::Array(da.0.cast()), Arg::Array(db.0.cast()), Arg::Array(dc.0.cast()), Arg::Float(-2.0)]).unwrap();
    assert_eq!(dc.f32s(n), vadd_expected(&a, &b, -2.0));
    // Round trip of the opencl module through its own SaveToBinary (runtime.ModuleSaveToBinary
    // is not a v0.8 global, so check through a saved .cl file instead).
    let dev = import(&m, 0);
    let p = out_dir().join(format!("roundtrip-{}.cl", std::process::id()));
    call_global("runtime.ModuleSaveToFile", &[Arg::Module(&dev), Arg::Str(p.to_str().unwrap()), Arg::Str("cl")])
        .unwrap();
    check_vadd(&load(&p).unwrap(), 129, 0.5);
}

/// Reads an `.npy` of float32 and compares within tolerances.
fn assert_close(got: &[f32], want: &[f32], rtol: f32, atol: f32) {
    assert_eq!(got.len(), want.len());
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        assert!((g - w).abs() <= atol + rtol * w.abs(), "element {i}: {g} vs {w}");
    }
}

#[test]
fn tvm_mlp2_opencl_export() {
    let Some(lib) = fixture("mlp2_opencl.so") else { return };
    let m = load(&lib).expect("mlp2_opencl.so loads (no device needed)");
    if !opencl_ready() {
        return;
    }
    let manifest: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(fixture("manifest.json").unwrap()).unwrap()).unwrap();
    let spec = &manifest["fixtures"]["mlp2_opencl"];
    let (rtol, atol) = (spec["rtol"].as_f64().unwrap() as f32, spec["atol"].as_f64().unwrap() as f32);
    let (in_shape, in_bytes) = read_npy_f32(&fixture(spec["inputs"]["data"].as_str().unwrap()).unwrap());
    let (_, out_bytes) = read_npy_f32(&fixture(spec["outputs"][0].as_str().unwrap()).unwrap());
    let want: Vec<f32> = out_bytes.chunks(4).map(|c| f32::from_le_bytes(c.try_into().unwrap())).collect();

    let default = get_function(&m, "default", false).unwrap();
    let Ok(Ret::Module(ex)) = call(&default, &[Arg::Device(OPENCL, 0)]) else {
        panic!("default(opencl): {}", last_error())
    };
    let ex = Mod(ex);
    let x = DevArray::new(&in_shape, 2, 1);
    x.write(in_bytes.as_ptr().cast(), in_bytes.len());
    call(&get_function(&ex, "set_input", false).unwrap(), &[Arg::Str("data"), Arg::Array(x.0.cast())]).unwrap();
    let run = get_function(&ex, "run", false).unwrap();
    for _ in 0..3 {
        call(&run, &[]).unwrap();
        let Ok(Ret::Other(13, h)) = call(&get_function(&ex, "get_output", false).unwrap(), &[Arg::Int(0)]) else {
            panic!("get_output: {}", last_error())
        };
        let out = DevArray(h as usize as *mut DLTensor);
        // SAFETY: a live array returned by get_output.
        assert_eq!(unsafe { (*out.0).device.device_type }, OPENCL);
        assert_close(&out.f32s(want.len()), &want, rtol, atol);
    }
}

/// Runs this test binary's `test` in a child process with `env` set and returns its output.
fn run_child(test: &str, env: &[(&str, &str)]) -> std::process::Output {
    let mut cmd = Command::new(std::env::current_exe().unwrap());
    cmd.args(["--exact", test, "--nocapture", "--test-threads=1"]).env("TVMRT_OPENCL_CHILD", "1");
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

#[test]
fn without_a_driver_or_platform() {
    let out = run_child(
        "child_no_opencl",
        &[("TVM_OPENCL_LIBRARY", "/nonexistent/libOpenCL.so.1"), ("TVMRT_EXPECT", "could not be loaded")],
    );
    assert!(String::from_utf8_lossy(&out.stdout).contains("child checks passed"));
    // An ICD loader without any platform (ocl-icd reads its vendor list from OCL_ICD_VENDORS).
    if std::env::var("CI").as_deref() == Ok("true") || opencl_ready() {
        let empty = out_dir().join("no-icd-vendors");
        std::fs::create_dir_all(&empty).unwrap();
        let out =
            run_child("child_no_opencl", &[("OCL_ICD_VENDORS", empty.to_str().unwrap()), ("TVMRT_EXPECT", "platform")]);
        assert!(String::from_utf8_lossy(&out.stdout).contains("child checks passed"));
    }
}

#[test]
fn driver_opened_only_when_used() {
    if !opencl_ready() {
        return;
    }
    let out = run_child("child_lazy_driver", &[("TVMRT_EXPECT", "")]);
    assert!(String::from_utf8_lossy(&out.stdout).contains("child checks passed"));
}

/// The body of [`driver_opened_only_when_used`]: loading an OpenCL export and listing its
/// functions leaves the OpenCL library unopened; the first device query opens it.
#[test]
fn child_lazy_driver() {
    if std::env::var("TVMRT_OPENCL_CHILD").is_err() || std::env::var("TVMRT_EXPECT").is_err() {
        return;
    }
    let lib = Path::new("libOpenCL.so.1");
    assert!(!is_loaded(lib), "nothing opened OpenCL yet");
    let blob = Blob::default().lib().module("opencl", &opencl_entry(SOURCE)).tree(&[0, 1, 1], &[1]);
    let host = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/opencl_host.c");
    let m = load(&build_shared("clmodel_lazy", &[host], &blob_c_source(&blob.bytes()))).unwrap();
    assert!(get_function(&import(&m, 0), "vadd_kernel0", false).is_some());
    if let Some(p) = fixture("mlp2_opencl.so") {
        let _m = load(&p).unwrap();
    }
    assert!(!is_loaded(lib), "loading OpenCL modules must not open the driver");
    assert_eq!(call_global("runtime.GetDeviceAttr", &[Arg::Int(4), Arg::Int(0), Arg::Int(0)]).unwrap().int(), 1);
    assert!(is_loaded(lib), "the first OpenCL operation opens the driver");
    println!("child checks passed");
}

/// The body of [`without_a_driver_or_platform`], run only in its child processes.
#[test]
fn child_no_opencl() {
    let Ok(expect) = std::env::var("TVMRT_EXPECT") else { return };
    if std::env::var("TVMRT_OPENCL_CHILD").is_err() {
        return;
    }
    // CPU work runs; an OpenCL library loads.
    let lib = build_testlib("cpu_only", None);
    let m = load(&lib).unwrap();
    assert_eq!(call(&get_function(&m, "test_answer", false).unwrap(), &[]).unwrap().int(), 42);
    let blob = Blob::default().lib().module("opencl", &opencl_entry(SOURCE)).tree(&[0, 1, 1], &[1]);
    let host = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/opencl_host.c");
    let cl = load(&build_shared("clmodel_nodrv", &[host], &blob_c_source(&blob.bytes()))).unwrap();
    // Queries degrade; operations fail with the reason.
    let exist = call_global("runtime.GetDeviceAttr", &[Arg::Int(4), Arg::Int(0), Arg::Int(0)]).unwrap().int();
    assert_eq!(exist, 0);
    let mut h = std::ptr::null_mut();
    // SAFETY: valid shape and out-pointer.
    let rc = unsafe { napi::TVMArrayAlloc([4i64].as_ptr(), 1, 2, 32, 1, OPENCL, 0, &mut h) };
    assert_eq!(rc, -1);
    let e = last_error();
    assert!(e.contains("No OpenCL device (") && e.contains(&expect), "{e}");
    let k = get_function(&import(&cl, 0), "vadd_kernel0", false).unwrap();
    let args = vadd_args([std::ptr::null_mut(); 3], 1.0, 1, 1, 1);
    let e = call(&k, &args).unwrap_err();
    assert!(e.contains("No OpenCL device"), "{e}");
    if let Some(p) = fixture("mlp2_opencl.so") {
        let m = load(&p).expect("GPU export loads without a driver");
        let e = call(&get_function(&m, "default", false).unwrap(), &[Arg::Device(OPENCL, 0)]).unwrap_err();
        assert!(e.contains("No OpenCL device"), "{e}");
    }
    println!("child checks passed");
}
