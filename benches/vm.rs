//! Relay VM benchmarks through the C API of any `libtvm_runtime.so` (ours, and TVM v0.8's own
//! when `TVM_REF_LIB` names one), on TVM's exports `vm_mlp.so` and `vm_dyn_batch.so` (batch 16),
//! each library in its own processes (`ROUNDS`, default 5, alternating), medians:
//!
//! * `load`: `TVMModLoadFromFile` of the exported library (the executable parsed, the kernel
//!   library opened), then `TVMModFree`; the first load of the process and the median of 20;
//! * `init`: `exe["vm_load_executable"]()` + `init(cpu, 0, pooled)` (what
//!   `tvm.runtime.vm.VirtualMachine(exe, tvm.cpu())` does), median of 200;
//! * `invoke`: `invoke("main")` with the inputs set once, median of 500 after 20 warm-up calls;
//! * `set+invoke`: `set_input("main", x)` + `invoke("main")`, as `vm.invoke("main", x)` does.
//!
//! `cargo bench --bench vm` (fixtures from `../shared/fixtures-vm`; `TVM_NUM_THREADS` is set to 1
//! in the children unless given, so the kernels' thread pools do not differ).

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
}

type Handle = *mut c_void;

struct Api {
    _lib: Library,
    load: Symbol<unsafe extern "C" fn(*const c_char, *const c_char, *mut Handle) -> c_int>,
    mod_free: Symbol<unsafe extern "C" fn(Handle) -> c_int>,
    get_fn: Symbol<unsafe extern "C" fn(Handle, *const c_char, c_int, *mut Handle) -> c_int>,
    func_free: Symbol<unsafe extern "C" fn(Handle) -> c_int>,
    call: Symbol<unsafe extern "C" fn(Handle, *mut Value, *mut c_int, c_int, *mut Value, *mut c_int) -> c_int>,
    alloc: Symbol<unsafe extern "C" fn(*const i64, c_int, c_int, c_int, c_int, c_int, c_int, *mut Handle) -> c_int>,
    array_free: Symbol<unsafe extern "C" fn(Handle) -> c_int>,
    from_bytes: Symbol<unsafe extern "C" fn(Handle, *mut c_void, usize) -> c_int>,
    to_bytes: Symbol<unsafe extern "C" fn(Handle, *mut c_void, usize) -> c_int>,
    last_error: Symbol<unsafe extern "C" fn() -> *const c_char>,
}

impl Api {
    fn open(path: &str) -> Api {
        // SAFETY: loading a TVM runtime library; RTLD_GLOBAL so that model libraries resolve the
        // runtime symbols they import, as in a program linked against it.
        let lib = unsafe { Library::open(Some(path), RTLD_NOW | RTLD_GLOBAL) }.expect("open the runtime library");
        // SAFETY: the C API's prototypes (c_runtime_api.h).
        unsafe {
            Api {
                load: lib.get(b"TVMModLoadFromFile\0").unwrap(),
                mod_free: lib.get(b"TVMModFree\0").unwrap(),
                get_fn: lib.get(b"TVMModGetFunction\0").unwrap(),
                func_free: lib.get(b"TVMFuncFree\0").unwrap(),
                call: lib.get(b"TVMFuncCall\0").unwrap(),
                alloc: lib.get(b"TVMArrayAlloc\0").unwrap(),
                array_free: lib.get(b"TVMArrayFree\0").unwrap(),
                from_bytes: lib.get(b"TVMArrayCopyFromBytes\0").unwrap(),
                to_bytes: lib.get(b"TVMArrayCopyToBytes\0").unwrap(),
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

    fn load(&self, path: &Path) -> Handle {
        let p = CString::new(path.to_str().unwrap()).unwrap();
        let fmt = CString::new("").unwrap();
        let mut m = std::ptr::null_mut();
        // SAFETY: valid strings and out-pointer.
        self.check(unsafe { (self.load)(p.as_ptr(), fmt.as_ptr(), &mut m) }, "load");
        m
    }

    fn func(&self, m: Handle, name: &str) -> Handle {
        let n = CString::new(name).unwrap();
        let mut f = std::ptr::null_mut();
        // SAFETY: live module, valid string and out-pointer.
        self.check(unsafe { (self.get_fn)(m, n.as_ptr(), 0, &mut f) }, name);
        assert!(!f.is_null(), "{name} missing");
        f
    }

    fn call(&self, f: Handle, args: &mut [Value], codes: &mut [c_int], what: &str) -> (Value, c_int) {
        let mut rv = Value { i: 0 };
        let mut rc = 0;
        // SAFETY: live function; arrays of equal length.
        let st =
            unsafe { (self.call)(f, args.as_mut_ptr(), codes.as_mut_ptr(), args.len() as c_int, &mut rv, &mut rc) };
        self.check(st, what);
        (rv, rc)
    }

    /// Frees a returned module, array or object.
    fn release(&self, rv: Value, code: c_int) {
        // SAFETY: an owned handle of the given kind, freed once.
        unsafe {
            match code {
                9 => self.check((self.mod_free)(rv.h), "free module"),
                13 => self.check((self.array_free)(rv.h), "free array"),
                _ => {}
            }
        }
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

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    v[v.len() / 2]
}

fn time_us(mut f: impl FnMut()) -> f64 {
    let t = Instant::now();
    f();
    t.elapsed().as_secs_f64() * 1e6
}

/// One process's measurements (microseconds): first load, load, init, invoke, set+invoke.
fn child(api: &Api, model: &Path, input: &Path, want: &Path) -> [f64; 5] {
    let first_load = time_us(|| {
        let m = api.load(model);
        // SAFETY: an owned module handle.
        api.check(unsafe { (api.mod_free)(m) }, "free");
    });
    let load = median(
        (0..20)
            .map(|_| {
                time_us(|| {
                    let m = api.load(model);
                    // SAFETY: an owned module handle.
                    api.check(unsafe { (api.mod_free)(m) }, "free");
                })
            })
            .collect(),
    );
    let exec = api.load(model);
    let make = api.func(exec, "vm_load_executable");
    let new_vm = || -> Handle {
        let (rv, rc) = api.call(make, &mut [], &mut [], "vm_load_executable");
        assert_eq!(rc, 9);
        // SAFETY: code 9 carries a module handle.
        let vm = unsafe { rv.h };
        let init = api.func(vm, "init");
        let mut args = [Value { i: 1 }, Value { i: 0 }, Value { i: 2 }];
        api.call(init, &mut args, &mut [0, 0, 0], "init");
        // SAFETY: an owned function handle.
        api.check(unsafe { (api.func_free)(init) }, "free");
        vm
    };
    let init = median(
        (0..200)
            .map(|_| {
                let mut vm = std::ptr::null_mut();
                let t = time_us(|| vm = new_vm());
                // SAFETY: an owned module handle.
                api.check(unsafe { (api.mod_free)(vm) }, "free");
                t
            })
            .collect(),
    );
    let vm = new_vm();
    let (shape, data) = npy_f32(input);
    let mut arr = std::ptr::null_mut();
    // SAFETY: valid shape and out-pointer; `data` holds the array's bytes.
    unsafe {
        api.check((api.alloc)(shape.as_ptr(), shape.len() as c_int, 2, 32, 1, 1, 0, &mut arr), "alloc");
        api.check((api.from_bytes)(arr, data.as_ptr().cast_mut().cast(), data.len()), "copy in");
    }
    let main = CString::new("main").unwrap();
    let set_input = api.func(vm, "set_input");
    let invoke = api.func(vm, "invoke");
    let set_args = [Value { s: main.as_ptr() }, Value { h: arr }];
    let set_codes = [11, 13];
    let run = |with_set: bool| {
        if with_set {
            api.call(set_input, &mut { set_args }, &mut { set_codes }, "set_input");
        }
        let (rv, rc) = api.call(invoke, &mut [Value { s: main.as_ptr() }], &mut [11], "invoke");
        api.release(rv, rc);
    };
    api.call(set_input, &mut { set_args }, &mut { set_codes }, "set_input");
    // Check the result once, against TVM's output.
    let (rv, rc) = api.call(invoke, &mut [Value { s: main.as_ptr() }], &mut [11], "invoke");
    assert_eq!(rc, 13);
    let (_, want) = npy_f32(want);
    let mut got = vec![0u8; want.len()];
    // SAFETY: `got` holds the output's bytes.
    api.check(unsafe { (api.to_bytes)(rv.h, got.as_mut_ptr().cast(), got.len()) }, "copy out");
    api.release(rv, rc);
    for (g, w) in got.chunks_exact(4).zip(want.chunks_exact(4)) {
        let (g, w) = (f32::from_le_bytes(g.try_into().unwrap()), f32::from_le_bytes(w.try_into().unwrap()));
        assert!((g - w).abs() <= 1e-5 + 1e-5 * w.abs(), "wrong output: {g} vs {w}");
    }
    for _ in 0..20 {
        run(true);
    }
    let invoke_us = median((0..500).map(|_| time_us(|| run(false))).collect());
    let set_invoke_us = median((0..500).map(|_| time_us(|| run(true))).collect());
    // SAFETY: owned handles, freed once.
    unsafe {
        api.check((api.func_free)(set_input), "free");
        api.check((api.func_free)(invoke), "free");
        api.check((api.func_free)(make), "free");
        api.check((api.array_free)(arr), "free");
        api.check((api.mod_free)(vm), "free");
        api.check((api.mod_free)(exec), "free");
    }
    [first_load, load, init, invoke_us, set_invoke_us]
}

fn main() {
    let fixtures = Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/fixtures-vm");
    // (model, input, expected output) of each measured case.
    let cases = [("vm_mlp", "run0"), ("vm_dyn_batch", "run2")];
    if let Ok(lib) = std::env::var("TVMRT_BENCH_CHILD") {
        let api = Api::open(&lib);
        let (name, run) = cases[std::env::var("TVMRT_BENCH_CASE").unwrap().parse::<usize>().unwrap()];
        let v = child(
            &api,
            &fixtures.join(format!("{name}.so")),
            &fixtures.join(format!("{name}.{run}.input0.npy")),
            &fixtures.join(format!("{name}.{run}.output0.npy")),
        );
        println!("RESULT {}", v.iter().map(|x| format!("{x:.3}")).collect::<Vec<_>>().join(" "));
        return;
    }
    if std::env::args().any(|a| a == "--list") {
        return;
    }
    if !fixtures.join("vm_mlp.so").is_file() {
        println!("SKIP: VM fixtures not found at {}", fixtures.display());
        return;
    }
    let ours = std::env::var("TVM_RT_LIB")
        .map(PathBuf::from)
        .unwrap_or_else(|_| Path::new(env!("CARGO_MANIFEST_DIR")).join("target/release/libtvm_runtime.so"));
    let mut libs = vec![("ours", ours.to_str().unwrap().to_owned())];
    if let Ok(r) = std::env::var("TVM_REF_LIB") {
        libs.push(("tvm", r));
    }
    let rounds: usize = std::env::var("ROUNDS").ok().and_then(|r| r.parse().ok()).unwrap_or(5);
    let threads = std::env::var("TVM_NUM_THREADS").unwrap_or_else(|_| "1".into());
    let exe = std::env::current_exe().unwrap();
    println!("Relay VM on the CPU, TVM_NUM_THREADS={threads}, {rounds} processes per cell, medians (microseconds)");
    println!(
        "{:<22} {:<5} {:>12} {:>10} {:>10} {:>10} {:>12}",
        "model", "lib", "first load", "load", "init", "invoke", "set+invoke"
    );
    for (ci, (name, _)) in cases.iter().enumerate() {
        let mut res: Vec<Vec<Vec<f64>>> = vec![Vec::new(); libs.len()];
        for _ in 0..rounds {
            for (i, (_, lib)) in libs.iter().enumerate() {
                let out = Command::new(&exe)
                    .env("TVMRT_BENCH_CHILD", lib)
                    .env("TVMRT_BENCH_CASE", ci.to_string())
                    .env("TVM_NUM_THREADS", &threads)
                    .output()
                    .unwrap();
                let text = String::from_utf8_lossy(&out.stdout);
                match text.lines().find(|l| l.starts_with("RESULT ")) {
                    Some(line) => res[i].push(line[7..].split(' ').map(|s| s.parse().unwrap()).collect()),
                    None => eprintln!("child ({lib}, {name}) failed: {text}\n{}", String::from_utf8_lossy(&out.stderr)),
                }
            }
        }
        let label = if *name == "vm_dyn_batch" { format!("{name} (batch 16)") } else { (*name).to_owned() };
        let mut medians = Vec::new();
        for (i, (tag, _)) in libs.iter().enumerate() {
            if res[i].is_empty() {
                continue;
            }
            let m: Vec<f64> = (0..5).map(|k| median(res[i].iter().map(|v| v[k]).collect())).collect();
            println!("{label:<22} {tag:<5} {:>12.1} {:>10.1} {:>10.2} {:>10.2} {:>12.2}", m[0], m[1], m[2], m[3], m[4]);
            medians.push(m);
        }
        if medians.len() == 2 {
            let r: Vec<f64> = (0..5).map(|k| medians[0][k] / medians[1][k]).collect();
            println!(
                "{label:<22} {:<5} {:>11.2}x {:>9.2}x {:>9.2}x {:>9.2}x {:>11.2}x",
                "ratio", r[0], r[1], r[2], r[3], r[4]
            );
        }
    }
}
