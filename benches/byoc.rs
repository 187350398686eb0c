//! BYOC benchmark: TVM's `cnn_dnnl.so` (two DNNL JSON regions on oneDNN, the rest TVM kernels)
//! through the C API of any `libtvm_runtime.so`: ours, and TVM's own (built with oneDNN) when
//! `TVM_REF_LIB` names it. Each measurement is a fresh process, libraries alternating, `ROUNDS`
//! (7) processes per cell, medians:
//!
//! * `load`: `TVMModLoadFromFile` (ours opens oneDNN here; TVM's runtime is linked against it, so
//!   it pays that at process start, outside the measurement);
//! * `create`: `default(cpu(0))`, the executor; it initialises both regions (TVM builds their
//!   oneDNN primitives here; ours starts building them on background threads);
//! * `first`: `set_input` and the first `run` (ours waits for the primitives here);
//! * `run`: median of 200 `run`s;
//! * `region`: median of 500 calls of the first DNNL region's function alone (two fused
//!   convolutions), isolating the DNNL runtime from the thread pool.
//!
//! `TVM_REF_LIB=/path/to/tvm/libtvm_runtime.so cargo bench --bench byoc`. The thread settings
//! of the environment apply to both (`TVM_NUM_THREADS`, `OMP_NUM_THREADS`).

use libloading::os::unix::{Library, Symbol, RTLD_GLOBAL, RTLD_NOW};
use std::ffi::{c_char, c_int, c_void, CStr, CString};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

#[repr(C)]
#[derive(Clone, Copy)]
union Value {
    i: i64,
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
    from_bytes: Symbol<unsafe extern "C" fn(Handle, *mut c_void, usize) -> c_int>,
    last_error: Symbol<unsafe extern "C" fn() -> *const c_char>,
}

impl Api {
    fn open(path: &str) -> Api {
        // SAFETY: loading a TVM runtime library; RTLD_GLOBAL as a program linked against it.
        let lib = unsafe { Library::open(Some(path), RTLD_NOW | RTLD_GLOBAL) }.expect("open the runtime library");
        // SAFETY: the C API's prototypes (c_runtime_api.h).
        unsafe {
            Api {
                load: lib.get(b"TVMModLoadFromFile\0").unwrap(),
                get_fn: lib.get(b"TVMModGetFunction\0").unwrap(),
                call: lib.get(b"TVMFuncCall\0").unwrap(),
                alloc: lib.get(b"TVMArrayAlloc\0").unwrap(),
                from_bytes: lib.get(b"TVMArrayCopyFromBytes\0").unwrap(),
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

    fn func(&self, m: Handle, name: &str, imports: bool) -> Handle {
        let n = CString::new(name).unwrap();
        let mut f = std::ptr::null_mut();
        // SAFETY: live module, valid string and out-pointer.
        self.check(unsafe { (self.get_fn)(m, n.as_ptr(), c_int::from(imports), &mut f) }, name);
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

    fn array(&self, shape: &[i64], data: Option<&[u8]>) -> Handle {
        let mut h = std::ptr::null_mut();
        // SAFETY: a valid shape array and out-pointer; float32 on CPU.
        self.check(unsafe { (self.alloc)(shape.as_ptr(), shape.len() as c_int, 2, 32, 1, 1, 0, &mut h) }, "alloc");
        if let Some(d) = data {
            // SAFETY: `d` holds the array's bytes.
            self.check(unsafe { (self.from_bytes)(h, d.as_ptr().cast_mut().cast(), d.len()) }, "copy");
        }
        h
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

fn ms(t: Instant) -> f64 {
    t.elapsed().as_secs_f64() * 1e3
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// One process's measurements (ms): load, create, first run, run, region.
fn child(api: &Api, fixtures: &Path) -> [f64; 5] {
    let path = CString::new(fixtures.join("cnn_dnnl.so").to_str().unwrap()).unwrap();
    let (shape, data) = npy_f32(&fixtures.join("cnn_dnnl.input.data.npy"));
    let t = Instant::now();
    let mut m = std::ptr::null_mut();
    // SAFETY: valid strings and out-pointer.
    api.check(unsafe { (api.load)(path.as_ptr(), c"".as_ptr(), &mut m) }, "load");
    let load = ms(t);
    let t = Instant::now();
    let default = api.func(m, "default", false);
    // SAFETY: `default` returns a module (code 9) in v_handle.
    let ex = unsafe { api.invoke(default, &mut [Value { dev: [1, 0] }], &mut [6], "default").h };
    let create = ms(t);
    let x = api.array(&shape, Some(&data));
    let (set_input, run) = (api.func(ex, "set_input", false), api.func(ex, "run", false));
    let t = Instant::now();
    api.invoke(set_input, &mut [Value { s: c"data".as_ptr() }, Value { h: x }], &mut [11, 13], "set_input");
    api.invoke(run, &mut [], &mut [], "run");
    let first = ms(t);
    let runs: Vec<f64> = (0..200)
        .map(|_| {
            let t = Instant::now();
            api.invoke(run, &mut [], &mut [], "run");
            ms(t)
        })
        .collect();
    let region = api.func(m, "tvmgen_default_dnnl_main_0", true);
    let a = [
        api.array(&[1, 3, 32, 32], None),
        api.array(&[1, 16, 1, 1], None),
        api.array(&[1, 16, 1, 1], None),
        api.array(&[1, 16, 32, 32], None),
    ];
    let mut args = a.map(|h| Value { h });
    api.invoke(region, &mut args, &mut [13; 4], "region");
    let calls: Vec<f64> = (0..500)
        .map(|_| {
            let t = Instant::now();
            api.invoke(region, &mut args, &mut [13; 4], "region");
            ms(t)
        })
        .collect();
    [load, create, first, median(runs), median(calls)]
}

fn main() {
    let fixtures = Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/fixtures");
    if let Ok(lib) = std::env::var("TVMRT_BENCH_CHILD") {
        let v = child(&Api::open(&lib), &fixtures);
        println!("RESULT {}", v.iter().map(|x| format!("{x:.4}")).collect::<Vec<_>>().join(" "));
        return;
    }
    if std::env::args().any(|a| a == "--list") {
        return;
    }
    if !fixtures.join("cnn_dnnl.so").is_file() {
        println!("SKIP: {} not found", fixtures.join("cnn_dnnl.so").display());
        return;
    }
    let ours = std::env::var("TVM_RT_LIB")
        .map(PathBuf::from)
        .unwrap_or_else(|_| Path::new(env!("CARGO_MANIFEST_DIR")).join("target/release/libtvm_runtime.so"));
    let mut libs = vec![("ours", ours.to_str().unwrap().to_owned())];
    if let Ok(r) = std::env::var("TVM_REF_LIB") {
        libs.push(("tvm", r));
    }
    let rounds: usize = std::env::var("ROUNDS").ok().and_then(|r| r.parse().ok()).unwrap_or(7);
    let exe = std::env::current_exe().unwrap();
    let mut res: Vec<Vec<Vec<f64>>> = vec![Vec::new(); libs.len()];
    for _ in 0..rounds {
        for (i, (_, lib)) in libs.iter().enumerate() {
            let out = Command::new(&exe).env("TVMRT_BENCH_CHILD", lib).output().unwrap();
            let text = String::from_utf8_lossy(&out.stdout);
            match text.lines().find(|l| l.starts_with("RESULT ")) {
                Some(line) => res[i].push(line[7..].split(' ').map(|s| s.parse().unwrap()).collect()),
                None => eprintln!("child ({lib}) failed: {text}\n{}", String::from_utf8_lossy(&out.stderr)),
            }
        }
    }
    println!("cnn_dnnl.so, {rounds} processes per cell, medians (ms)");
    println!("{:<5} {:>8} {:>8} {:>10} {:>8} {:>8}", "lib", "load", "create", "first run", "run", "region");
    for (i, (label, _)) in libs.iter().enumerate() {
        if res[i].is_empty() {
            continue;
        }
        let m = |k: usize| median(res[i].iter().map(|v| v[k]).collect());
        println!("{label:<5} {:>8.3} {:>8.3} {:>10.3} {:>8.4} {:>8.4}", m(0), m(1), m(2), m(3), m(4));
    }
}
