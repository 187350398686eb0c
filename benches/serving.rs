//! Serving benchmarks (issue 17, points 1 and 2) through the C API of any `libtvm_runtime.so`:
//! ours (`target/release`, or `TVM_RT_LIB`) beside TVM's own (`TVM_REF_LIB`), every measurement
//! in a fresh process, the libraries alternating, `ROUNDS` (3) processes per cell, medians.
//!
//! `cargo bench --bench serving -- [rss] [share] [serve]` (all three without arguments);
//! `MODELS=resnet18,mobilenet` (default) selects the fixtures (`../shared/fixtures`).
//!
//! * `rss`: peak resident set (`VmHWM`) of a process that loads a model, creates an executor,
//!   sets the input and runs it 5 times (output checked against TVM's), with
//!   `TVM_NUM_THREADS=2`, in three forms: `factory` (the exported `model.so`: graph, weights and
//!   code in one library), `split-heap` (graph JSON + a library without weights + a params file
//!   read into the heap and passed to `load_params`, then freed, as TVM's C++ deployment example
//!   does) and `split-mmap` (the params file mapped read-only instead of read). Also the resident
//!   set of the bare process with the runtime loaded (`base`) and, at the end, how much of it is
//!   anonymous memory and how much file pages. The split files are made from `model.so` in
//!   `build/bench/serving/`: the graph and the weights from its blob, and a copy of the library
//!   whose `__tvm_dev_mblob` symbol is renamed, so that neither runtime finds the blob.
//! * `share`: a second process loading the same library while a first one holds it (both after
//!   a run): its `Rss`, `Pss` and the resident bytes it shares with other processes
//!   (`/proc/self/smaps_rollup`).
//! * `serve`: `N` = 1, 2, 4, 16 executors created from one loaded factory, each running on its
//!   own thread for `SECONDS` (3): total inferences per second and peak resident set. Modes:
//!   `factory` (every executor made by the factory's `default`) and `share` (executor 0 from the
//!   factory, the others from `tvm.graph_executor.create` + `share_params(executor 0)`, TVM's way
//!   of sharing weights). `SERVE_THREADS` (1) is `TVM_NUM_THREADS` of each process.
//!
//! The lead's figures come from this bench and `scripts/bench.sh` (rtprobe); both print medians.

use libloading::os::unix::{Library, Symbol, RTLD_GLOBAL, RTLD_LOCAL, RTLD_NOW};
use std::ffi::{c_char, c_int, c_void, CStr, CString};
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

#[repr(C)]
#[derive(Clone, Copy)]
union Value {
    i: i64,
    h: *mut c_void,
    s: *const c_char,
    dev: [i32; 2],
}

#[repr(C)]
struct ByteArray {
    data: *const c_char,
    size: usize,
}

type Handle = *mut c_void;

/// A handle that may cross threads (the runtime's handles are thread-safe to pass around; each
/// executor is used by one thread at a time here).
#[derive(Clone, Copy)]
struct H(Handle);
impl H {
    /// The handle (a method, so closures capture the whole `H`).
    fn get(self) -> Handle {
        self.0
    }
}

// SAFETY: see the type's doc.
unsafe impl Send for H {}
// SAFETY: as above.
unsafe impl Sync for H {}

const CODE_INT: c_int = 0;
const CODE_MODULE: c_int = 9;
const CODE_STR: c_int = 11;
const CODE_BYTES: c_int = 12;
const CODE_NDARRAY: c_int = 13;

type CallFn = unsafe extern "C" fn(Handle, *mut Value, *mut c_int, c_int, *mut Value, *mut c_int) -> c_int;

struct Api {
    _lib: Library,
    load: Symbol<unsafe extern "C" fn(*const c_char, *const c_char, *mut Handle) -> c_int>,
    get_fn: Symbol<unsafe extern "C" fn(Handle, *const c_char, c_int, *mut Handle) -> c_int>,
    get_global: Symbol<unsafe extern "C" fn(*const c_char, *mut Handle) -> c_int>,
    call: Symbol<CallFn>,
    alloc: Symbol<unsafe extern "C" fn(*const i64, c_int, c_int, c_int, c_int, c_int, c_int, *mut Handle) -> c_int>,
    from_bytes: Symbol<unsafe extern "C" fn(Handle, *mut c_void, usize) -> c_int>,
    to_bytes: Symbol<unsafe extern "C" fn(Handle, *mut c_void, usize) -> c_int>,
    last_error: Symbol<unsafe extern "C" fn() -> *const c_char>,
}

impl Api {
    fn open(path: &str) -> Api {
        // SAFETY: loading a TVM runtime library; RTLD_GLOBAL as for a program linked with it.
        let lib = unsafe { Library::open(Some(path), RTLD_NOW | RTLD_GLOBAL) }.expect("open the runtime library");
        // SAFETY: the C API's prototypes (c_runtime_api.h).
        unsafe {
            Api {
                load: lib.get(b"TVMModLoadFromFile\0").unwrap(),
                get_fn: lib.get(b"TVMModGetFunction\0").unwrap(),
                get_global: lib.get(b"TVMFuncGetGlobal\0").unwrap(),
                call: lib.get(b"TVMFuncCall\0").unwrap(),
                alloc: lib.get(b"TVMArrayAlloc\0").unwrap(),
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
        let mut m = std::ptr::null_mut();
        // SAFETY: valid strings and out-pointer.
        self.check(unsafe { (self.load)(p.as_ptr(), c"".as_ptr(), &mut m) }, "load");
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

    fn global(&self, name: &str) -> Handle {
        let n = CString::new(name).unwrap();
        let mut f = std::ptr::null_mut();
        // SAFETY: valid string and out-pointer.
        self.check(unsafe { (self.get_global)(n.as_ptr(), &mut f) }, name);
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

    /// Calls a function that returns a module; its handle.
    fn module(&self, f: Handle, args: &mut [Value], codes: &mut [c_int], what: &str) -> Handle {
        // SAFETY: a module return (code 9) uses the `h` member.
        unsafe { self.invoke(f, args, codes, what).h }
    }

    fn array(&self, shape: &[i64], bytes: Option<&[u8]>) -> Handle {
        let mut a = std::ptr::null_mut();
        // SAFETY: valid shape and out-pointer; the byte count matches the float32 array.
        unsafe {
            self.check((self.alloc)(shape.as_ptr(), shape.len() as c_int, 2, 32, 1, 1, 0, &mut a), "alloc");
            if let Some(b) = bytes {
                self.check((self.from_bytes)(a, b.as_ptr() as *mut c_void, b.len()), "copy in");
            }
        }
        a
    }
}

fn npy_f32(path: &Path) -> (Vec<i64>, Vec<u8>) {
    let b = std::fs::read(path).unwrap();
    let hl = u16::from_le_bytes([b[8], b[9]]) as usize;
    let header = String::from_utf8_lossy(&b[10..10 + hl]).into_owned();
    assert!(header.contains("'<f4'"), "{} is not float32", path.display());
    let shape_txt = header.split("'shape': (").nth(1).unwrap().split(')').next().unwrap();
    let shape = shape_txt.split(',').filter_map(|s| s.trim().parse().ok()).collect();
    (shape, b[10 + hl..].to_vec())
}

fn close_enough(got: &[u8], want: &[u8]) {
    assert_eq!(got.len(), want.len());
    for (g, w) in got.chunks(4).zip(want.chunks(4)) {
        let (g, w) = (f32::from_le_bytes(g.try_into().unwrap()), f32::from_le_bytes(w.try_into().unwrap()));
        assert!((g - w).abs() <= 1e-4 + 1e-3 * w.abs(), "wrong output {g} vs {w}");
    }
}

/// `/proc/self/status` fields, in kB.
fn status_kb(field: &str) -> u64 {
    let s = std::fs::read_to_string("/proc/self/status").unwrap();
    s.lines()
        .find(|l| l.starts_with(field) && l[field.len()..].starts_with(':'))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}

/// `/proc/self/smaps_rollup` fields, in kB.
fn rollup_kb(field: &str) -> u64 {
    let s = std::fs::read_to_string("/proc/self/smaps_rollup").unwrap_or_default();
    s.lines()
        .find(|l| l.starts_with(field) && l[field.len()..].starts_with(':'))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}

struct Paths {
    fixtures: PathBuf,
    split: PathBuf,
}

impl Paths {
    fn model(&self, m: &str) -> PathBuf {
        self.fixtures.join(format!("{m}.so"))
    }
    fn input(&self, m: &str) -> PathBuf {
        self.fixtures.join(format!("{m}.input.data.npy"))
    }
    fn output(&self, m: &str) -> PathBuf {
        self.fixtures.join(format!("{m}.output.0.npy"))
    }
    fn split_file(&self, m: &str, ext: &str) -> PathBuf {
        self.split.join(format!("{m}.{ext}"))
    }
}

/// An executor with its input set, ready to run.
struct Ready {
    ex: H,
    run: H,
    get_output: H,
    out_shape: Vec<i64>,
    want: Vec<u8>,
}

impl Ready {
    fn new(api: &Api, p: &Paths, model: &str, ex: Handle) -> Ready {
        let (in_shape, input) = npy_f32(&p.input(model));
        let (out_shape, want) = npy_f32(&p.output(model));
        let x = api.array(&in_shape, Some(&input));
        let set_input = api.func(ex, "set_input");
        api.invoke(
            set_input,
            &mut [Value { s: c"data".as_ptr() }, Value { h: x }],
            &mut [CODE_STR, CODE_NDARRAY],
            "set_input",
        );
        Ready { ex: H(ex), run: H(api.func(ex, "run")), get_output: H(api.func(ex, "get_output")), out_shape, want }
    }

    fn run(&self, api: &Api) {
        api.invoke(self.run.0, &mut [], &mut [], "run");
    }

    fn check(&self, api: &Api) {
        let y = api.array(&self.out_shape, None);
        api.invoke(
            self.get_output.0,
            &mut [Value { i: 0 }, Value { h: y }],
            &mut [CODE_INT, CODE_NDARRAY],
            "get_output",
        );
        let mut got = vec![0u8; self.want.len()];
        // SAFETY: `got` has the output's byte size.
        api.check(unsafe { (api.to_bytes)(y, got.as_mut_ptr().cast(), got.len()) }, "copy out");
        close_enough(&got, &self.want);
    }
}

/// `load_params(bytes)` on an executor.
fn load_params(api: &Api, ex: Handle, bytes: &[u8]) {
    let f = api.func(ex, "load_params");
    let ba = ByteArray { data: bytes.as_ptr().cast(), size: bytes.len() };
    api.invoke(f, &mut [Value { h: (&ba as *const ByteArray).cast_mut().cast() }], &mut [CODE_BYTES], "load_params");
}

/// `tvm.graph_executor.create(json, lib, cpu, 0)`.
fn create_from_json(api: &Api, json: &CStr, lib: Handle) -> Handle {
    let f = api.global("tvm.graph_executor.create");
    api.module(
        f,
        &mut [Value { s: json.as_ptr() }, Value { h: lib }, Value { i: 1 }, Value { i: 0 }],
        &mut [CODE_STR, CODE_MODULE, CODE_INT, CODE_INT],
        "tvm.graph_executor.create",
    )
}

/// A read-only private mapping of a whole file.
struct MappedFile(*mut u8, usize);

impl MappedFile {
    fn open(path: &Path) -> MappedFile {
        let f = std::fs::File::open(path).unwrap();
        let len = f.metadata().unwrap().len() as usize;
        // SAFETY: a fresh read-only mapping of an open file; checked below.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ,
                libc::MAP_PRIVATE,
                std::os::fd::AsRawFd::as_raw_fd(&f),
                0,
            )
        };
        assert_ne!(p, libc::MAP_FAILED);
        MappedFile(p.cast(), len)
    }
    fn bytes(&self) -> &[u8] {
        // SAFETY: `len` readable bytes while mapped.
        unsafe { std::slice::from_raw_parts(self.0, self.1) }
    }
}

impl Drop for MappedFile {
    fn drop(&mut self) {
        // SAFETY: our own mapping.
        unsafe { libc::munmap(self.0.cast(), self.1) };
    }
}

/// Child: one `rss` measurement; with `hold`, waits for a line on stdin before exiting.
fn child_rss(api: &Api, p: &Paths, model: &str, form: &str, hold: bool) -> String {
    let base = status_kb("VmRSS");
    let ex = match form {
        "factory" => {
            let m = api.load(&p.model(model));
            api.module(api.func(m, "default"), &mut [Value { dev: [1, 0] }], &mut [6], "default")
        }
        "split-heap" | "split-mmap" => {
            let lib = api.load(&p.split_file(model, "lib.so"));
            let json = CString::new(std::fs::read(p.split_file(model, "json")).unwrap()).unwrap();
            let ex = create_from_json(api, &json, lib);
            if form == "split-heap" {
                let bytes = std::fs::read(p.split_file(model, "params")).unwrap();
                load_params(api, ex, &bytes);
            } else {
                let mapped = MappedFile::open(&p.split_file(model, "params"));
                load_params(api, ex, mapped.bytes());
            }
            ex
        }
        _ => panic!("unknown form {form}"),
    };
    let created = status_kb("VmRSS");
    let r = Ready::new(api, p, model, ex);
    for _ in 0..5 {
        r.run(api);
    }
    r.check(api);
    if std::env::var_os("SERVE_SMAPS").is_some() {
        dump_smaps();
    }
    let out = format!(
        "base={base} created={created} peak={} anon={} file={}",
        status_kb("VmHWM"),
        status_kb("RssAnon"),
        status_kb("RssFile")
    );
    if hold {
        println!("READY");
        std::io::stdout().flush().unwrap();
        let mut line = String::new();
        let _ = std::io::stdin().read_line(&mut line);
    } else {
        let shared = rollup_kb("Shared_Clean") + rollup_kb("Shared_Dirty");
        return format!("{out} rss={} pss={} shared={shared}", rollup_kb("Rss"), rollup_kb("Pss"));
    }
    out
}

/// Prints the mappings with more than 64 kB resident (`SERVE_SMAPS=1`), to stderr.
fn dump_smaps() {
    let s = std::fs::read_to_string("/proc/self/smaps").unwrap_or_default();
    let mut name = String::new();
    for l in s.lines() {
        if l.split_whitespace().next().is_some_and(|f| f.contains('-') && !f.ends_with(':')) {
            name = l.to_owned();
        } else if let Some(v) = l.strip_prefix("Rss:") {
            let kb: u64 = v.split_whitespace().next().and_then(|x| x.parse().ok()).unwrap_or(0);
            if kb > 64 {
                eprintln!("{kb:>8} kB  {name}");
            }
        }
    }
}

/// Child: `n` executors on `n` threads for `secs` seconds.
fn child_serve(api: &Api, p: &Paths, model: &str, n: usize, mode: &str, secs: f64) -> String {
    let factory = api.load(&p.model(model));
    let default = H(api.func(factory, "default"));
    let make_default = || api.module(default.get(), &mut [Value { dev: [1, 0] }], &mut [6], "default");
    let ex0 = H(make_default());
    let (lib, json, names) = if mode == "share" {
        let get_import = api.global("runtime.ModuleGetImport");
        let lib =
            api.module(get_import, &mut [Value { h: factory }, Value { i: 0 }], &mut [CODE_MODULE, CODE_INT], "import");
        let json = CString::new(std::fs::read(p.split_file(model, "json")).unwrap()).unwrap();
        (H(lib), json, std::fs::read(p.split_file(model, "names")).unwrap())
    } else {
        (H(std::ptr::null_mut()), CString::default(), Vec::new())
    };
    let count = AtomicU64::new(0);
    let start_line = std::sync::Barrier::new(n + 1);
    let deadline = std::sync::OnceLock::<Instant>::new();
    std::thread::scope(|s| {
        for k in 0..n {
            let (count, start_line, deadline, json, names) = (&count, &start_line, &deadline, &json, &names);
            s.spawn(move || {
                let ex = match (k, mode) {
                    (0, _) => ex0.get(),
                    (_, "factory") => make_default(),
                    _ => {
                        let ex = create_from_json(api, json, lib.get());
                        let share = api.func(ex, "share_params");
                        let ba = ByteArray { data: names.as_ptr().cast(), size: names.len() };
                        api.invoke(
                            share,
                            &mut [Value { h: ex0.get() }, Value { h: (&ba as *const ByteArray).cast_mut().cast() }],
                            &mut [CODE_MODULE, CODE_BYTES],
                            "share_params",
                        );
                        ex
                    }
                };
                let r = Ready::new(api, p, model, ex);
                r.run(api);
                start_line.wait();
                // The main thread sets the deadline between the two waits.
                start_line.wait();
                let end = *deadline.get().expect("deadline set");
                let mut done = 0;
                while Instant::now() < end {
                    r.run(api);
                    done += 1;
                }
                r.check(api);
                count.fetch_add(done, Ordering::Relaxed);
                let _ = r.ex;
            });
        }
        start_line.wait();
        let _ = deadline.set(Instant::now() + Duration::from_secs_f64(secs));
        start_line.wait();
    });
    let ips = count.load(Ordering::Relaxed) as f64 / secs;
    format!("ips={ips:.2} peak={}", status_kb("VmHWM"))
}

/// Parses `model.so`'s factory blob into the split form: graph JSON, params file, the names-only
/// params blob for `share_params`, and a copy of the library whose blob symbol is renamed.
fn prepare_split(p: &Paths, model: &str) {
    let so = p.model(model);
    let lib_out = p.split_file(model, "lib.so");
    if lib_out.is_file() && p.split_file(model, "names").is_file() {
        return;
    }
    std::fs::create_dir_all(&p.split).unwrap();
    // SAFETY: a model library's initialisers are the compiler's; its context slots stay NULL
    // and nothing in it is called.
    let lib = unsafe { Library::open(Some(&so), RTLD_NOW | RTLD_LOCAL) }.unwrap();
    // SAFETY: the blob symbol: an 8-byte length, then that many bytes.
    let payload: Vec<u8> = unsafe {
        let addr: Symbol<*const u8> = lib.get(b"__tvm_dev_mblob\0").unwrap();
        let base = *addr;
        let n = u64::from_le_bytes(std::ptr::read_unaligned(base.cast::<[u8; 8]>())) as usize;
        std::slice::from_raw_parts(base.add(8), n).to_vec()
    };
    let pos = std::cell::Cell::new(0usize);
    let take = |n: usize| {
        let s = &payload[pos.get()..pos.get() + n];
        pos.set(pos.get() + n);
        s
    };
    let u64_at = |b: &[u8]| u64::from_le_bytes(b.try_into().unwrap()) as usize;
    let count = u64_at(take(8));
    for _ in 0..count {
        let klen = u64_at(take(8));
        let key = String::from_utf8(take(klen).to_vec()).unwrap();
        match key.as_str() {
            "_lib" => {}
            "_import_tree" => {
                for _ in 0..2 {
                    let n = u64_at(take(8));
                    take(8 * n);
                }
            }
            "GraphExecutorFactory" => {
                let jlen = u64_at(take(8));
                std::fs::write(p.split_file(model, "json"), take(jlen)).unwrap();
                let nparams = u64_at(take(8));
                let names_start = pos.get();
                let nnames = u64_at(take(8));
                for _ in 0..nnames {
                    let l = u64_at(take(8));
                    take(l);
                }
                let names = payload[names_start..pos.get()].to_vec();
                let records_start = pos.get();
                for _ in 0..nparams {
                    take(8 + 8 + 8); // magic, reserved, device
                    let ndim = u32::from_le_bytes(take(4).try_into().unwrap()) as usize;
                    take(4 + 8 * ndim); // dtype, shape
                    let size = u64_at(take(8));
                    take(size);
                }
                let mut head = Vec::new();
                head.extend_from_slice(&0xF7E5_8D4F_0504_9CB7u64.to_le_bytes());
                head.extend_from_slice(&0u64.to_le_bytes());
                head.extend_from_slice(&names);
                head.extend_from_slice(&(nparams as u64).to_le_bytes());
                let mut params = head.clone();
                params.extend_from_slice(&payload[records_start..pos.get()]);
                std::fs::write(p.split_file(model, "params"), params).unwrap();
                let mlen = u64_at(take(8));
                take(mlen);
                // share_params reads only the header and names.
                std::fs::write(p.split_file(model, "names.tmp"), head).unwrap();
            }
            other => panic!("{model}.so: unexpected blob entry {other}"),
        }
    }
    let mut file = std::fs::read(&so).unwrap();
    let (from, to) = (b"__tvm_dev_mblob\0", b"__tvm_dev_mblox\0");
    let mut renamed = 0;
    for i in 0..file.len().saturating_sub(from.len()) {
        if &file[i..i + from.len()] == from {
            file[i..i + from.len()].copy_from_slice(to);
            renamed += 1;
        }
    }
    assert!(renamed > 0);
    std::fs::write(&lib_out, file).unwrap();
    std::fs::rename(p.split_file(model, "names.tmp"), p.split_file(model, "names")).unwrap();
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// `k=v` pairs of a child's result line.
fn field(line: &str, k: &str) -> f64 {
    line.split_whitespace()
        .find_map(|kv| kv.strip_prefix(k).and_then(|r| r.strip_prefix('=')))
        .and_then(|v| v.parse().ok())
        .unwrap_or(f64::NAN)
}

struct Runner {
    exe: PathBuf,
    libs: Vec<(&'static str, String)>,
    rounds: usize,
}

impl Runner {
    fn command(&self, lib: &str, task: &str, threads: &str) -> Command {
        let mut cmd = Command::new(&self.exe);
        cmd.env("TVMRT_SERVE_CHILD", lib).env("TVMRT_SERVE_TASK", task).env("TVM_NUM_THREADS", threads);
        cmd
    }

    /// One child's result line.
    fn once(&self, lib: &str, task: &str, threads: &str) -> Option<String> {
        let out = self.command(lib, task, threads).output().unwrap();
        let text = String::from_utf8_lossy(&out.stdout);
        match text.lines().find_map(|l| l.strip_prefix("RESULT ")) {
            Some(l) => Some(l.to_owned()),
            None => {
                eprintln!("child ({lib}, {task}) failed: {text}\n{}", String::from_utf8_lossy(&out.stderr));
                None
            }
        }
    }

    /// `rounds` results per library, alternating.
    fn cells(&self, task: &str, threads: &str) -> Vec<Vec<String>> {
        let mut res = vec![Vec::new(); self.libs.len()];
        for _ in 0..self.rounds {
            for (i, (_, lib)) in self.libs.iter().enumerate() {
                res[i].extend(self.once(lib, task, threads));
            }
        }
        res
    }

    /// A second process while a first one holds the same library.
    fn pair(&self, lib: &str, task: &str) -> Option<String> {
        let mut first = self
            .command(lib, &format!("{task} hold"), "2")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let mut lines = BufReader::new(first.stdout.take().unwrap()).lines();
        let ready = lines.any(|l| l.map(|l| l == "READY").unwrap_or(false));
        let second = ready.then(|| self.once(lib, task, "2")).flatten();
        drop(first.stdin.take());
        let _ = first.wait();
        second
    }
}

fn mb(kb: f64) -> f64 {
    kb / 1024.0
}

fn main() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let paths = Paths { fixtures: root.join("../shared/fixtures"), split: root.join("build/bench/serving") };
    if let Ok(lib) = std::env::var("TVMRT_SERVE_CHILD") {
        let task = std::env::var("TVMRT_SERVE_TASK").unwrap();
        let a: Vec<&str> = task.split(' ').collect();
        let api = Api::open(&lib);
        let line = match a[0] {
            "rss" => child_rss(&api, &paths, a[1], a[2], a.get(3) == Some(&"hold")),
            "serve" => child_serve(&api, &paths, a[1], a[2].parse().unwrap(), a[3], a[4].parse().unwrap()),
            t => panic!("unknown task {t}"),
        };
        println!("RESULT {line}");
        return;
    }
    let args: Vec<String> = std::env::args().skip(1).filter(|a| !a.starts_with('-')).collect();
    if std::env::args().any(|a| a == "--list") {
        return;
    }
    let want = |w: &str| args.is_empty() || args.iter().any(|a| a == w);
    let models: Vec<String> =
        std::env::var("MODELS").unwrap_or_else(|_| "resnet18,mobilenet".into()).split(',').map(str::to_owned).collect();
    if let Some(m) = models.iter().find(|m| !paths.model(m).is_file()) {
        println!("SKIP: {} not found", paths.model(m).display());
        return;
    }
    let ours = std::env::var("TVM_RT_LIB")
        .map(PathBuf::from)
        .unwrap_or_else(|_| root.join("target/release/libtvm_runtime.so"));
    let mut libs = vec![("ours", ours.to_str().unwrap().to_owned())];
    if let Some(r) = std::env::var("TVM_REF_LIB").ok().filter(|r| !r.is_empty()) {
        libs.push(("tvm", r));
    }
    let rounds = std::env::var("ROUNDS").ok().and_then(|r| r.parse().ok()).unwrap_or(3);
    let runner = Runner { exe: std::env::current_exe().unwrap(), libs, rounds };
    for m in &models {
        prepare_split(&paths, m);
    }

    if want("rss") {
        println!("peak RSS (MB), TVM_NUM_THREADS=2, {rounds} processes per cell, medians; ratio = ours / tvm");
        println!(
            "{:<10} {:<11} {:<5} {:>7} {:>8} {:>7} {:>7} {:>7} {:>6}",
            "model", "form", "lib", "base", "created", "peak", "anon", "file", "ratio"
        );
        for m in &models {
            for form in ["factory", "split-heap", "split-mmap"] {
                let res = runner.cells(&format!("rss {m} {form}"), "2");
                let peaks: Vec<f64> =
                    res.iter().map(|r| median(r.iter().map(|l| field(l, "peak")).collect())).collect();
                for (i, (label, _)) in runner.libs.iter().enumerate() {
                    let med = |k: &str| mb(median(res[i].iter().map(|l| field(l, k)).collect()));
                    let ratio =
                        if i == 0 && peaks.len() > 1 { format!("{:.3}", peaks[0] / peaks[1]) } else { String::new() };
                    println!(
                        "{m:<10} {form:<11} {label:<5} {:>7.1} {:>8.1} {:>7.1} {:>7.1} {:>7.1} {ratio:>6}",
                        med("base"),
                        med("created"),
                        med("peak"),
                        med("anon"),
                        med("file")
                    );
                }
            }
        }
    }

    if want("share") {
        println!("second process beside a first that holds the same library (MB, after a run)");
        println!("{:<10} {:<5} {:>7} {:>7} {:>8}", "model", "lib", "rss", "pss", "shared");
        for m in &models {
            for (label, lib) in &runner.libs {
                let v: Vec<String> =
                    (0..rounds).filter_map(|_| runner.pair(lib, &format!("rss {m} factory"))).collect();
                if v.is_empty() {
                    continue;
                }
                let med = |k: &str| mb(median(v.iter().map(|l| field(l, k)).collect()));
                println!("{m:<10} {label:<5} {:>7.1} {:>7.1} {:>8.1}", med("rss"), med("pss"), med("shared"));
            }
        }
    }

    if want("serve") {
        let secs: f64 = std::env::var("SECONDS").ok().and_then(|s| s.parse().ok()).unwrap_or(3.0);
        let threads = std::env::var("SERVE_THREADS").unwrap_or_else(|_| "1".into());
        println!("N executors on N threads from one factory, {secs} s, TVM_NUM_THREADS={threads}: inferences/s (all threads), peak RSS MB");
        println!("{:<10} {:<8} {:<5} {:>4} {:>9} {:>8}", "model", "mode", "lib", "N", "inf/s", "peak");
        for m in &models {
            for mode in ["factory", "share"] {
                for n in [1usize, 2, 4, 16] {
                    let res = runner.cells(&format!("serve {m} {n} {mode} {secs}"), &threads);
                    for (i, (label, _)) in runner.libs.iter().enumerate() {
                        if res[i].is_empty() {
                            continue;
                        }
                        let med = |k: &str| median(res[i].iter().map(|l| field(l, k)).collect());
                        println!("{m:<10} {mode:<8} {label:<5} {n:>4} {:>9.2} {:>8.1}", med("ips"), mb(med("peak")));
                    }
                }
            }
        }
    }
}
