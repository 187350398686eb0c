//! GPU benchmarks through the C API of any `libtvm_runtime.so` (ours, and TVM's own when
//! `TVM_REF_LIB` names one), each measurement in a fresh process so that "first run" really is a
//! process start. `BENCH_DEVICE=opencl` (default) or `cuda`.
//!
//! * launch: a tiny kernel (the project's `vadd_kernel0` on 64 elements, from a `.cl` or `.ptx`
//!   file) called through `TVMFuncCall`: time per call (enqueue) over 2000 calls, and per call
//!   including a final sync;
//! * the model (`mlp2_opencl.so` / `mlp2_nvptx.so`, or the file `BENCH_MODEL` names): `load` (`TVMModLoadFromFile`), `create`
//!   (`default(device(0))`: executor + params upload), `first` (`set_input` + the first `run` +
//!   sync, which builds or JIT-compiles every kernel), `run` (median of 50 `run` + sync).
//!
//! OpenCL scenarios: PoCL's own kernel cache off (`POCL_KERNEL_CACHE=0`, every start compiles),
//! with our program binary cache (`TVM_OPENCL_PROGRAM_CACHE`, warmed first; ours only), and with
//! PoCL's kernel cache on (warmed). Libraries alternate, `ROUNDS` (5) processes per cell; medians.
//!
//! * copies (CUDA only): 64 MB host-to-device and device-to-host, from pageable memory
//!   (`TVMArrayCopyFromBytes` / `ToBytes`) and from pinned memory (`cuda_host` arrays,
//!   `TVMArrayCopyFromTo`): GB/s, best of 5.
//!
//! Besides the table, every figure is printed as a line `BENCH <name>\t<lib>\t<value>\t<unit>`
//! (a failed cell as `BENCH <name>\t<lib>\tfailed\t<reason>`) for `scripts/gpu-check.sh`.
//!
//! `cargo bench --bench gpu` (fixtures from `../shared/fixtures`, or `$TVMRT_SHARED_DIR/fixtures`).

use libloading::os::unix::{Library, Symbol, RTLD_GLOBAL, RTLD_NOW};
use std::ffi::{c_char, c_int, c_void, CStr, CString};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

#[repr(C)]
#[derive(Clone, Copy)]
union Value {
    i: i64,
    f: f64,
    h: *mut c_void,
    s: *const c_char,
    dev: [i32; 2],
}

type Handle = *mut c_void;

struct Api {
    _lib: Library,
    load: Symbol<unsafe extern "C" fn(*const c_char, *const c_char, *mut Handle) -> c_int>,
    get_fn: Symbol<unsafe extern "C" fn(Handle, *const c_char, c_int, *mut Handle) -> c_int>,
    call: Symbol<unsafe extern "C" fn(Handle, *mut Value, *mut c_int, c_int, *mut Value, *mut c_int) -> c_int>,
    alloc: Symbol<unsafe extern "C" fn(*const i64, c_int, c_int, c_int, c_int, c_int, c_int, *mut Handle) -> c_int>,
    copy: Symbol<unsafe extern "C" fn(Handle, Handle, *mut c_void) -> c_int>,
    from_bytes: Symbol<unsafe extern "C" fn(Handle, *mut c_void, usize) -> c_int>,
    to_bytes: Symbol<unsafe extern "C" fn(Handle, *mut c_void, usize) -> c_int>,
    sync: Symbol<unsafe extern "C" fn(c_int, c_int, *mut c_void) -> c_int>,
    last_error: Symbol<unsafe extern "C" fn() -> *const c_char>,
}

impl Api {
    fn open(path: &str) -> Api {
        // SAFETY: loading a TVM runtime library; RTLD_GLOBAL so that model libraries resolve
        // the runtime symbols they import, as they do in a program linked against it.
        let lib = unsafe { Library::open(Some(path), RTLD_NOW | RTLD_GLOBAL) }.expect("open the runtime library");
        // SAFETY: the C API's prototypes (c_runtime_api.h).
        unsafe {
            Api {
                load: lib.get(b"TVMModLoadFromFile\0").unwrap(),
                get_fn: lib.get(b"TVMModGetFunction\0").unwrap(),
                call: lib.get(b"TVMFuncCall\0").unwrap(),
                alloc: lib.get(b"TVMArrayAlloc\0").unwrap(),
                copy: lib.get(b"TVMArrayCopyFromTo\0").unwrap(),
                from_bytes: lib.get(b"TVMArrayCopyFromBytes\0").unwrap(),
                to_bytes: lib.get(b"TVMArrayCopyToBytes\0").unwrap(),
                sync: lib.get(b"TVMSynchronize\0").unwrap(),
                last_error: lib.get(b"TVMGetLastError\0").unwrap(),
                _lib: lib,
            }
        }
    }

    fn check(&self, rc: c_int, what: &str) {
        if rc != 0 {
            // SAFETY: the runtime's thread-local error string.
            let e = unsafe { CStr::from_ptr((self.last_error)()) };
            panic!("{what}: {}", e.to_string_lossy());
        }
    }

    fn func(&self, m: Handle, name: &str) -> Handle {
        let n = CString::new(name).unwrap();
        let mut f = std::ptr::null_mut();
        // SAFETY: live module, valid string and out-pointer.
        self.check(unsafe { (self.get_fn)(m, n.as_ptr(), 0, &mut f) }, name);
        assert!(!f.is_null(), "{name} missing");
        f
    }

    fn invoke(&self, f: Handle, args: &mut [Value], codes: &mut [c_int], what: &str) -> Value {
        let mut rv = Value { i: 0 };
        let mut rc = 0;
        // SAFETY: live function; arrays of equal length.
        let st =
            unsafe { (self.call)(f, args.as_mut_ptr(), codes.as_mut_ptr(), args.len() as c_int, &mut rv, &mut rc) };
        self.check(st, what);
        rv
    }
}

fn npy_f32(path: &Path) -> (Vec<i64>, Vec<u8>) {
    let b = std::fs::read(path).unwrap();
    let hl = u16::from_le_bytes([b[8], b[9]]) as usize;
    let header = String::from_utf8_lossy(&b[10..10 + hl]).into_owned();
    let shape_txt = header.split("'shape': (").nth(1).unwrap().split(')').next().unwrap();
    let shape = shape_txt.split(',').filter_map(|s| s.trim().parse().ok()).collect();
    (shape, b[10 + hl..].to_vec())
}

/// The device under test.
struct Target {
    /// DLPack device type.
    dev_type: i32,
    /// The model fixture's stem.
    model: &'static str,
    /// The tiny kernel's file extension, source and side file.
    kernel: (&'static str, &'static str, &'static str),
}

fn target() -> Target {
    match std::env::var("BENCH_DEVICE").as_deref() {
        Ok("cuda") => Target {
            dev_type: 2,
            model: "mlp2_nvptx",
            kernel: (
                "ptx",
                include_str!("../tests/fixtures/cuda_vadd.ptx"),
                include_str!("../tests/fixtures/cuda_vadd.tvm_meta.json"),
            ),
        },
        _ => Target {
            dev_type: 4,
            model: "mlp2_opencl",
            kernel: (
                "cl",
                include_str!("../tests/fixtures/opencl_kernels.cl"),
                include_str!("../tests/fixtures/opencl_kernels.tvm_meta.json"),
            ),
        },
    }
}

/// One process's model measurements (milliseconds): load, create, first run, run.
fn child_model(api: &Api, t: &Target, fixtures: &Path) -> [f64; 4] {
    let (in_shape, input) = npy_f32(&fixtures.join(format!("{}.input.data.npy", t.model)));
    let (out_shape, want) = npy_f32(&fixtures.join("mlp2.output.0.npy"));
    let model = CString::new(model_path(t, fixtures).to_str().unwrap()).unwrap();
    let empty = CString::new("").unwrap();

    let t0 = Instant::now();
    let mut m = std::ptr::null_mut();
    // SAFETY: valid strings and out-pointer.
    api.check(unsafe { (api.load)(model.as_ptr(), empty.as_ptr(), &mut m) }, "load");
    let t_load = t0.elapsed();

    let t0 = Instant::now();
    let default = api.func(m, "default");
    // SAFETY: `default` returns a module (code 9), whose handle is the `h` member.
    let ex = unsafe { api.invoke(default, &mut [Value { dev: [t.dev_type, 0] }], &mut [6], "default").h };
    let t_create = t0.elapsed();

    let (set_input, run, get_output) = (api.func(ex, "set_input"), api.func(ex, "run"), api.func(ex, "get_output"));
    let mut x = std::ptr::null_mut();
    let mut y = std::ptr::null_mut();
    // SAFETY: valid shapes and out-pointers; byte counts match the arrays.
    unsafe {
        api.check((api.alloc)(in_shape.as_ptr(), in_shape.len() as c_int, 2, 32, 1, 1, 0, &mut x), "alloc");
        api.check((api.alloc)(out_shape.as_ptr(), out_shape.len() as c_int, 2, 32, 1, 1, 0, &mut y), "alloc");
        api.check((api.from_bytes)(x, input.as_ptr() as *mut c_void, input.len()), "copy in");
    }
    let data = CString::new("data").unwrap();
    let run_sync = || {
        api.invoke(run, &mut [], &mut [], "run");
        // SAFETY: plain call.
        api.check(unsafe { (api.sync)(t.dev_type, 0, std::ptr::null_mut()) }, "sync");
    };

    let t0 = Instant::now();
    api.invoke(set_input, &mut [Value { s: data.as_ptr() }, Value { h: x }], &mut [11, 13], "set_input");
    run_sync();
    let t_first = t0.elapsed();

    let mut runs: Vec<f64> = (0..50)
        .map(|_| {
            let t = Instant::now();
            run_sync();
            t.elapsed().as_secs_f64() * 1e3
        })
        .collect();
    runs.sort_by(f64::total_cmp);

    api.invoke(get_output, &mut [Value { i: 0 }, Value { h: y }], &mut [0, 13], "get_output");
    let mut got = vec![0u8; want.len()];
    // SAFETY: `got` has the output's byte size.
    api.check(unsafe { (api.to_bytes)(y, got.as_mut_ptr().cast(), got.len()) }, "copy out");
    for (g, w) in got.chunks(4).zip(want.chunks(4)) {
        let (g, w) = (f32::from_le_bytes(g.try_into().unwrap()), f32::from_le_bytes(w.try_into().unwrap()));
        assert!((g - w).abs() <= 1e-4 + 1e-4 * w.abs(), "wrong output {g} vs {w}");
    }
    [t_load.as_secs_f64() * 1e3, t_create.as_secs_f64() * 1e3, t_first.as_secs_f64() * 1e3, runs[runs.len() / 2]]
}

/// The model file: `BENCH_MODEL` when set (e.g. the copy of mlp2_nvptx.so whose PTX defines
/// `__nv_fmaf`, which TVM's own runtime can load on a real GPU), else the fixture.
fn model_path(t: &Target, fixtures: &Path) -> PathBuf {
    std::env::var_os("BENCH_MODEL").map_or_else(|| fixtures.join(format!("{}.so", t.model)), PathBuf::from)
}

/// One process's tiny-kernel launch cost (microseconds): per enqueue, per call with the sync.
fn child_launch(api: &Api, t: &Target) -> [f64; 2] {
    let dir = std::env::temp_dir().join(format!("tvmrt-bench-kernel-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let (ext, source, meta) = t.kernel;
    let path = dir.join(format!("k.{ext}"));
    std::fs::write(&path, source).unwrap();
    std::fs::write(dir.join("k.tvm_meta.json"), meta).unwrap();
    let cpath = CString::new(path.to_str().unwrap()).unwrap();
    let empty = CString::new("").unwrap();
    let mut m = std::ptr::null_mut();
    // SAFETY: valid strings and out-pointer.
    api.check(unsafe { (api.load)(cpath.as_ptr(), empty.as_ptr(), &mut m) }, "load kernel");
    let f = api.func(m, "vadd_kernel0");
    let shape = [64i64];
    let mut bufs = [std::ptr::null_mut(); 3];
    for b in &mut bufs {
        // SAFETY: valid shape and out-pointer.
        api.check(unsafe { (api.alloc)(shape.as_ptr(), 1, 2, 32, 1, t.dev_type, 0, b) }, "alloc");
    }
    // SAFETY: the arrays are live DLTensors; `data` is their first field.
    let data: Vec<*mut c_void> = bufs.iter().map(|&b| unsafe { *b.cast::<*mut c_void>() }).collect();
    let call = || {
        let mut args = [
            Value { h: data[0] },
            Value { h: data[1] },
            Value { h: data[2] },
            Value { f: 1.0 },
            Value { i: 64 },
            Value { i: 1 },
            Value { i: 64 },
        ];
        api.invoke(f, &mut args, &mut [3, 3, 3, 2, 0, 0, 0], "kernel");
    };
    let sync = || {
        // SAFETY: plain call.
        api.check(unsafe { (api.sync)(t.dev_type, 0, std::ptr::null_mut()) }, "sync")
    };
    for _ in 0..100 {
        call();
    }
    sync();
    const N: u32 = 2000;
    let t0 = Instant::now();
    for _ in 0..N {
        call();
    }
    let enqueue = t0.elapsed();
    sync();
    let total = t0.elapsed();
    let _ = std::fs::remove_dir_all(&dir);
    [enqueue.as_secs_f64() * 1e6 / f64::from(N), total.as_secs_f64() * 1e6 / f64::from(N)]
}

/// One process's 64 MB copies (GB/s, best of 5): to and from the device from pageable memory,
/// then from and to pinned (`cuda_host`) memory.
fn child_copy(api: &Api, t: &Target) -> [f64; 4] {
    const BYTES: usize = 64 << 20;
    let shape = [(BYTES / 4) as i64];
    let (mut dev, mut pinned) = (std::ptr::null_mut(), std::ptr::null_mut());
    // SAFETY: valid shape and out-pointers.
    unsafe {
        api.check((api.alloc)(shape.as_ptr(), 1, 2, 32, 1, t.dev_type, 0, &mut dev), "alloc device");
        api.check((api.alloc)(shape.as_ptr(), 1, 2, 32, 1, 3, 0, &mut pinned), "alloc cuda_host");
    }
    let mut host = vec![1u8; BYTES];
    let best = |f: &dyn Fn()| {
        f();
        let t = (0..5)
            .map(|_| {
                let t0 = Instant::now();
                f();
                t0.elapsed().as_secs_f64()
            })
            .fold(f64::INFINITY, f64::min);
        BYTES as f64 / t / 1e9
    };
    let h = host.as_mut_ptr().cast::<c_void>();
    // SAFETY: a live array of BYTES bytes; `host` holds BYTES bytes.
    let h2d = best(&|| api.check(unsafe { (api.from_bytes)(dev, h, BYTES) }, "copy to device"));
    // SAFETY: as above.
    let d2h = best(&|| api.check(unsafe { (api.to_bytes)(dev, h, BYTES) }, "copy from device"));
    let sync = || {
        // SAFETY: plain call.
        api.check(unsafe { (api.sync)(t.dev_type, 0, std::ptr::null_mut()) }, "sync")
    };
    let p2d = best(&|| {
        // SAFETY: live arrays of equal size; the legacy stream.
        api.check(unsafe { (api.copy)(pinned, dev, std::ptr::null_mut()) }, "pinned to device");
        sync();
    });
    let d2p = best(&|| {
        // SAFETY: as above.
        api.check(unsafe { (api.copy)(dev, pinned, std::ptr::null_mut()) }, "device to pinned");
        sync();
    });
    [h2d, d2h, p2d, d2p]
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn main() {
    let fixtures = std::env::var_os("TVMRT_SHARED_DIR")
        .map_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared"), PathBuf::from)
        .join("fixtures");
    let t = target();
    if let Ok(lib) = std::env::var("TVMRT_BENCH_CHILD") {
        let api = Api::open(&lib);
        let v: Vec<f64> = match std::env::var("TVMRT_BENCH_MODE").as_deref() {
            Ok("launch") => child_launch(&api, &t).to_vec(),
            Ok("copy") => child_copy(&api, &t).to_vec(),
            _ => child_model(&api, &t, &fixtures).to_vec(),
        };
        println!("RESULT {}", v.iter().map(|x| format!("{x:.4}")).collect::<Vec<_>>().join(" "));
        return;
    }
    if std::env::args().any(|a| a == "--list") {
        return;
    }
    let model = model_path(&t, &fixtures);
    if !model.is_file() {
        println!("SKIP: {} not found", model.display());
        return;
    }
    let ours = std::env::var("TVM_RT_LIB")
        .map(PathBuf::from)
        .unwrap_or_else(|_| Path::new(env!("CARGO_MANIFEST_DIR")).join("target/release/libtvm_runtime.so"));
    let mut libs = vec![("ours", ours.to_str().unwrap().to_owned())];
    if let Ok(r) = std::env::var("TVM_REF_LIB") {
        libs.push(("tvm", r));
    }
    let cache = std::env::temp_dir().join(format!("tvmrt-bench-clcache-{}", std::process::id()));
    let rounds: usize = std::env::var("ROUNDS").ok().and_then(|r| r.parse().ok()).unwrap_or(5);
    let exe = std::env::current_exe().unwrap();
    let failures = std::cell::RefCell::new(Vec::<(String, String, String)>::new());
    let spawn = |lib: &str, mode: &str, env: &[(&str, &str)]| -> Option<Vec<f64>> {
        let mut cmd = Command::new(&exe);
        cmd.env("TVMRT_BENCH_CHILD", lib).env("TVMRT_BENCH_MODE", mode).env_remove("TVM_OPENCL_PROGRAM_CACHE");
        for (k, v) in env {
            cmd.env(k, v);
        }
        let out = cmd.output().unwrap();
        let text = String::from_utf8_lossy(&out.stdout);
        match text.lines().find(|l| l.starts_with("RESULT ")) {
            Some(line) => Some(line[7..].split(' ').map(|s| s.parse().unwrap()).collect()),
            None => {
                let err = String::from_utf8_lossy(&out.stderr);
                eprintln!("child ({lib}, {mode}) failed: {text}\n{err}");
                // The panic's message (the line after "panicked at"), for the BENCH line.
                let why = err.lines().skip_while(|l| !l.contains("panicked at")).nth(1).unwrap_or("no result");
                failures.borrow_mut().push((lib.to_owned(), mode.to_owned(), why.replace('\t', " ")));
                None
            }
        }
    };
    let device = if t.dev_type == 2 { "CUDA" } else { "OpenCL" };
    println!("{device} device 0, {rounds} processes per cell, medians");

    // Launch cost of a tiny kernel.
    println!("{:<36} {:<5} {:>14} {:>16}", "tiny kernel (64 elements)", "lib", "enqueue (us)", "with sync (us)");
    let mut res: Vec<Vec<Vec<f64>>> = vec![Vec::new(); libs.len()];
    for _ in 0..rounds {
        for (i, (_, lib)) in libs.iter().enumerate() {
            res[i].extend(spawn(lib, "launch", &[]));
        }
    }
    for (i, (label, _)) in libs.iter().enumerate() {
        if res[i].is_empty() {
            continue;
        }
        let m = |k: usize| median(res[i].iter().map(|v| v[k]).collect());
        println!("{:<36} {label:<5} {:>14.3} {:>16.3}", "vadd_kernel0 through TVMFuncCall", m(0), m(1));
        bench_line("launch_enqueue", label, m(0), "us");
        bench_line("launch_with_sync", label, m(1), "us");
    }

    let cache_s = cache.to_str().unwrap().to_owned();
    type Scenario<'a> = (&'a str, Vec<(&'a str, &'a str)>, bool);
    let scenarios: Vec<Scenario<'_>> = if t.dev_type == 4 {
        vec![
            ("pocl cache off, no program cache", vec![("POCL_KERNEL_CACHE", "0")], false),
            (
                "pocl cache off, our program cache",
                vec![("POCL_KERNEL_CACHE", "0"), ("TVM_OPENCL_PROGRAM_CACHE", &cache_s)],
                true,
            ),
            ("pocl kernel cache on (warm)", vec![("POCL_KERNEL_CACHE", "1")], false),
        ]
    } else {
        vec![("driver JIT cache as configured", vec![], false)]
    };
    println!(
        "{:<36} {:<5} {:>9} {:>9} {:>11} {:>9}",
        format!("{}.so (ms)", t.model),
        "lib",
        "load",
        "create",
        "first run",
        "run"
    );
    for (name, env, ours_only) in &scenarios {
        // Warm whatever cache the scenario uses.
        for (_, lib) in &libs {
            spawn(lib, "model", env);
        }
        let mut res: Vec<Vec<Vec<f64>>> = vec![Vec::new(); libs.len()];
        for _ in 0..rounds {
            for (i, (_, lib)) in libs.iter().enumerate() {
                if !(*ours_only && i > 0) {
                    res[i].extend(spawn(lib, "model", env));
                }
            }
        }
        for (i, (label, _)) in libs.iter().enumerate() {
            if res[i].is_empty() {
                continue;
            }
            let m = |k: usize| median(res[i].iter().map(|v| v[k]).collect());
            println!("{name:<36} {label:<5} {:>9.3} {:>9.3} {:>11.3} {:>9.4}", m(0), m(1), m(2), m(3));
            if scenarios.len() == 1 {
                for (k, what) in ["load", "create", "first_run", "run"].iter().enumerate() {
                    bench_line(&format!("{}_{what}", t.model), label, m(k), "ms");
                }
            }
        }
    }
    let _ = std::fs::remove_dir_all(&cache);

    if t.dev_type == 2 {
        println!(
            "{:<36} {:<5} {:>9} {:>9} {:>11} {:>9}",
            "64 MB copies (GB/s, best of 5)", "lib", "to dev", "from dev", "pinned to", "pinned from"
        );
        for (label, lib) in &libs {
            let Some(v) = spawn(lib, "copy", &[]) else { continue };
            println!(
                "{:<36} {label:<5} {:>9.2} {:>9.2} {:>11.2} {:>9.2}",
                "pageable / pinned host memory", v[0], v[1], v[2], v[3]
            );
            for (k, what) in
                ["copy64mb_h2d", "copy64mb_d2h", "copy64mb_pinned_h2d", "copy64mb_pinned_d2h"].iter().enumerate()
            {
                bench_line(what, label, v[k], "GB/s");
            }
        }
    }
    let mut failed = failures.into_inner();
    failed.sort();
    failed.dedup();
    for (lib, mode, why) in failed {
        let label = libs.iter().find(|(_, l)| *l == lib).map_or("?", |(n, _)| n);
        println!("BENCH {mode}\t{label}\tfailed\t{why}");
    }
}

/// A figure in the form `scripts/gpu-check.sh` collects.
fn bench_line(name: &str, lib: &str, value: f64, unit: &str) {
    println!("BENCH {name}\t{lib}\t{value:.4}\t{unit}");
}
