//! Support for the module tests: the C API called the way a C program calls it, a generator of
//! model libraries in TVM's export conventions (C source + `__tvm_dev_mblob`, built with
//! `cc -shared -fPIC`), the real TVM fixtures, and a small `.npy` reader.
#![allow(dead_code, reason = "each test binary uses a different part of this support module")]

pub mod byoc;
pub mod vm;

use std::ffi::{c_char, c_int, c_void, CStr, CString};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicUsize, Ordering};
use tvm_runtime::abi::TVMValue;
use tvm_runtime::classic_api::runtime_api as api;

// ---------------------------------------------------------------------------------------------
// Fixtures exported by TVM v0.8

/// The repository's root: `TVMRT_SOURCE_DIR` when set (test binaries carried to another
/// machine, see `scripts/gpu-check.sh`), else the one they were built from.
pub fn source_dir() -> PathBuf {
    std::env::var_os("TVMRT_SOURCE_DIR").map_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")), PathBuf::from)
}

/// The folder holding `fixtures`, `fixtures-v0.18`, `fixtures-vm`: `TVMRT_SHARED_DIR` when
/// set, else `../shared` beside the repository.
pub fn shared_dir() -> PathBuf {
    std::env::var_os("TVMRT_SHARED_DIR").map_or_else(|| source_dir().join("../shared"), PathBuf::from)
}

/// The directory of TVM's fixtures, or `None` (after printing why) when it is absent; under
/// `CI=true` an absent directory is a failure.
pub fn fixtures_dir() -> Option<PathBuf> {
    let dir = shared_dir().join("fixtures");
    if dir.join("manifest.json").is_file() {
        return Some(dir);
    }
    assert!(std::env::var("CI").as_deref() != Ok("true"), "fixtures missing at {} (required under CI)", dir.display());
    println!("SKIP: TVM fixtures not found at {}", dir.display());
    None
}

/// One fixture file, or `None` (skip) as for [`fixtures_dir`].
pub fn fixture(name: &str) -> Option<PathBuf> {
    let p = fixtures_dir()?.join(name);
    if p.is_file() {
        return Some(p);
    }
    assert!(std::env::var("CI").as_deref() != Ok("true"), "fixture {} missing (required under CI)", p.display());
    println!("SKIP: fixture {} not found", p.display());
    None
}

/// A little-endian float32 `.npy` file (versions 1-3, C order): shape and raw element bytes.
pub fn read_npy_f32(path: &Path) -> (Vec<i64>, Vec<u8>) {
    let b = std::fs::read(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    assert_eq!(&b[..6], b"\x93NUMPY", "{}: not an .npy file", path.display());
    let (hlen, start) = match b[6] {
        1 => (u16::from_le_bytes([b[8], b[9]]) as usize, 10),
        2 | 3 => (u32::from_le_bytes([b[8], b[9], b[10], b[11]]) as usize, 12),
        v => panic!("{}: .npy version {v}", path.display()),
    };
    let header = std::str::from_utf8(&b[start..start + hlen]).expect("ASCII header");
    assert!(header.contains("'descr': '<f4'"), "{}: not little-endian float32: {header}", path.display());
    assert!(header.contains("'fortran_order': False"), "{}: Fortran order", path.display());
    let shape_text = header.split("'shape': (").nth(1).and_then(|s| s.split(')').next()).expect("shape");
    let shape: Vec<i64> = shape_text.split(',').filter_map(|s| s.trim().parse().ok()).collect();
    let data = b[start + hlen..].to_vec();
    let n: i64 = shape.iter().product();
    assert_eq!(data.len() as i64, n * 4, "{}: data size", path.display());
    (shape, data)
}

// ---------------------------------------------------------------------------------------------
// Blobs and generated libraries

/// Writes a `__tvm_dev_mblob`, independently of the runtime's own writer.
#[derive(Default, Clone)]
pub struct Blob {
    count: u64,
    entries: Vec<u8>,
}

fn put_str(out: &mut Vec<u8>, s: &[u8]) {
    out.extend_from_slice(&(s.len() as u64).to_le_bytes());
    out.extend_from_slice(s);
}

impl Blob {
    /// The `_lib` placeholder.
    pub fn lib(mut self) -> Self {
        put_str(&mut self.entries, b"_lib");
        self.count += 1;
        self
    }
    /// A module: type key, then its data.
    pub fn module(mut self, key: &str, data: &[u8]) -> Self {
        put_str(&mut self.entries, key.as_bytes());
        self.entries.extend_from_slice(data);
        self.count += 1;
        self
    }
    /// The import tree.
    pub fn tree(mut self, row_ptr: &[u64], child: &[u64]) -> Self {
        put_str(&mut self.entries, b"_import_tree");
        for v in [row_ptr, child] {
            self.entries.extend_from_slice(&(v.len() as u64).to_le_bytes());
            v.iter().for_each(|x| self.entries.extend_from_slice(&x.to_le_bytes()));
        }
        self.count += 1;
        self
    }
    /// The payload (count + entries).
    pub fn payload(&self) -> Vec<u8> {
        let mut p = self.count.to_le_bytes().to_vec();
        p.extend_from_slice(&self.entries);
        p
    }
    /// The framed blob: 8-byte payload length, payload.
    pub fn bytes(&self) -> Vec<u8> {
        let p = self.payload();
        let mut b = (p.len() as u64).to_le_bytes().to_vec();
        b.extend_from_slice(&p);
        b
    }
}

/// Data of the test module kinds: one u64.
pub fn u64_data(v: u64) -> Vec<u8> {
    v.to_le_bytes().to_vec()
}

/// C source defining `__tvm_dev_mblob` with exactly `bytes` (the C form of export_library).
pub fn blob_c_source(bytes: &[u8]) -> String {
    let mut s = String::from(
        "/* Generated by tests/common/mod.rs: a __tvm_dev_mblob as export_library's C form writes it. */\n",
    );
    s += &format!(
        "__attribute__((visibility(\"default\"))) const unsigned char __tvm_dev_mblob[{}] = {{",
        bytes.len().max(1)
    );
    for (i, b) in bytes.iter().enumerate() {
        if i % 16 == 0 {
            s += "\n ";
        }
        s += &format!(" 0x{b:02x},");
    }
    s += "\n};\n";
    s
}

/// Where generated libraries go (under `TVMRT_TEST_TMPDIR` when set).
pub fn out_dir() -> PathBuf {
    let tmp =
        std::env::var_os("TVMRT_TEST_TMPDIR").map_or_else(|| PathBuf::from(env!("CARGO_TARGET_TMPDIR")), PathBuf::from);
    let d = tmp.join("module-fixtures");
    std::fs::create_dir_all(&d).expect("create output directory");
    d
}

/// With `TVMRT_PTXAS=<ptxas>` (scripts/gpu-check.sh --simulator, with the ptxas of the
/// `nvidia-cuda-nvcc-cu12` wheel), PTX a test is about to load must be accepted by NVIDIA's
/// assembler for `TVMRT_PTXAS_ARCH` (default sm_90, an H100), as the runtime hands it to the
/// driver (libdevice declarations defined): what a real driver's JIT would refuse fails here,
/// without a GPU. `what` names the module in the failure.
pub fn ptxas_check(ptx: &str, what: &str) {
    let Some(ptxas) = std::env::var_os("TVMRT_PTXAS") else { return };
    let arch = std::env::var("TVMRT_PTXAS_ARCH").unwrap_or_else(|_| "sm_90".into());
    #[cfg(feature = "cuda")]
    let text = tvm_runtime::device::cuda::libdevice::define_externs(ptx).unwrap_or_else(|| ptx.to_owned());
    #[cfg(not(feature = "cuda"))]
    let text = ptx.to_owned();
    static SEQ: AtomicUsize = AtomicUsize::new(0);
    let path =
        out_dir().join(format!("ptxas-{what}-{}-{}.ptx", std::process::id(), SEQ.fetch_add(1, Ordering::Relaxed)));
    std::fs::write(&path, &text).expect("write PTX");
    let out = Command::new(&ptxas)
        .arg(format!("-arch={arch}"))
        .arg(&path)
        .arg("-o")
        .arg(path.with_extension("cubin"))
        .output()
        .unwrap_or_else(|e| panic!("running {}: {e}", Path::new(&ptxas).display()));
    assert!(
        out.status.success(),
        "ptxas -arch={arch} refuses the PTX of {what} ({}): {}",
        path.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    println!("ptxas -arch={arch} accepts {what}");
}

/// The checked-in C source of the test library.
pub fn testlib_c() -> PathBuf {
    source_dir().join("tests/fixtures/testlib.c")
}

/// Compiles a shared library `<name>.so` from `sources` plus extra C text (`extra`, may be
/// empty) with `cc -shared -fPIC`. Every call makes a new file (a unique suffix), so tests
/// running in parallel never share a library.
pub fn build_shared(name: &str, sources: &[PathBuf], extra: &str) -> PathBuf {
    static SEQ: AtomicUsize = AtomicUsize::new(0);
    let id = format!("{name}-{}-{}", std::process::id(), SEQ.fetch_add(1, Ordering::Relaxed));
    let dir = out_dir();
    let mut srcs = sources.to_vec();
    if !extra.is_empty() {
        let p = dir.join(format!("{id}.c"));
        std::fs::write(&p, extra).expect("write generated C");
        srcs.push(p);
    }
    let out = dir.join(format!("lib{id}.so"));
    let cc = std::env::var("CC").unwrap_or_else(|_| "cc".into());
    let res = Command::new(&cc)
        .args(["-shared", "-fPIC", "-O1", "-Wall", "-Werror", "-o"])
        .arg(&out)
        .args(&srcs)
        .output()
        .unwrap_or_else(|e| panic!("running {cc}: {e}"));
    assert!(res.status.success(), "{cc} failed: {}", String::from_utf8_lossy(&res.stderr));
    out
}

/// The test library with a blob (or none).
pub fn build_testlib(name: &str, blob: Option<&[u8]>) -> PathBuf {
    build_shared(name, &[testlib_c()], &blob.map(blob_c_source).unwrap_or_default())
}

/// Whether the dynamic linker still has `path` loaded.
pub fn is_loaded(path: &Path) -> bool {
    let c = CString::new(path.to_str().expect("utf-8 path")).expect("no NUL");
    // SAFETY: RTLD_NOLOAD only looks the library up (no initialisers run); a handle it returns
    // is released at once.
    unsafe {
        let h = libc::dlopen(c.as_ptr(), libc::RTLD_LAZY | libc::RTLD_NOLOAD);
        if h.is_null() {
            false
        } else {
            libc::dlclose(h);
            true
        }
    }
}

// ---------------------------------------------------------------------------------------------
// The C API, as a C program uses it

/// This thread's last error.
pub fn last_error() -> String {
    // SAFETY: TVMGetLastError returns a thread-local NUL-terminated string.
    unsafe { CStr::from_ptr(api::TVMGetLastError()) }.to_string_lossy().into_owned()
}

/// An owned module handle.
#[derive(Debug)]
pub struct Mod(pub *mut c_void);

impl Drop for Mod {
    fn drop(&mut self) {
        // SAFETY: an owned handle, freed once.
        assert_eq!(unsafe { api::TVMModFree(self.0) }, 0);
    }
}

/// An owned function handle.
#[derive(Debug)]
pub struct Func(pub *mut c_void);

impl Drop for Func {
    fn drop(&mut self) {
        // SAFETY: an owned handle, freed once.
        assert_eq!(unsafe { api::TVMFuncFree(self.0) }, 0);
    }
}

fn cstring(s: &str) -> CString {
    CString::new(s).expect("no NUL")
}

/// `TVMModLoadFromFile(path, "")`; on failure the error text. Checks that `*out` is left alone
/// on failure.
pub fn load(path: &Path) -> Result<Mod, String> {
    let p = cstring(path.to_str().expect("utf-8 path"));
    let fmt = cstring("");
    let sentinel = 0x5a5a_usize as *mut c_void;
    let mut out = sentinel;
    // SAFETY: valid strings and out-pointer.
    let rc = unsafe { api::TVMModLoadFromFile(p.as_ptr(), fmt.as_ptr(), &mut out) };
    if rc == 0 {
        Ok(Mod(out))
    } else {
        assert_eq!(rc, -1);
        assert_eq!(out, sentinel, "out written on failure");
        Err(last_error())
    }
}

/// `TVMModGetFunction`.
pub fn get_function(m: &Mod, name: &str, query_imports: bool) -> Option<Func> {
    let n = cstring(name);
    let mut out = std::ptr::null_mut();
    // SAFETY: live module, valid string and out-pointer.
    let rc = unsafe { api::TVMModGetFunction(m.0, n.as_ptr(), c_int::from(query_imports), &mut out) };
    assert_eq!(rc, 0, "TVMModGetFunction({name}): {}", last_error());
    (!out.is_null()).then_some(Func(out))
}

/// `TVMFuncGetGlobal`.
pub fn global(name: &str) -> Option<Func> {
    let n = cstring(name);
    let mut out = std::ptr::null_mut();
    // SAFETY: valid string and out-pointer.
    assert_eq!(unsafe { api::TVMFuncGetGlobal(n.as_ptr(), &mut out) }, 0);
    (!out.is_null()).then_some(Func(out))
}

/// An argument.
pub enum Arg<'a> {
    /// kDLInt.
    Int(i64),
    /// kTVMStr.
    Str(&'a str),
    /// kTVMOpaqueHandle.
    Handle(*mut c_void),
    /// kTVMModuleHandle.
    Module(&'a Mod),
    /// kTVMNDArrayHandle.
    Array(*mut c_void),
    /// kTVMPackedFuncHandle.
    Func(&'a Func),
    /// kDLFloat.
    Float(f64),
    /// kDLDevice: type and id.
    Device(i32, i32),
}

/// A returned value: code and raw value (strings copied out of the thread-local slot).
#[derive(Debug)]
pub enum Ret {
    /// Code 4.
    Null,
    /// Code 0.
    Int(i64),
    /// Code 3.
    Handle(*mut c_void),
    /// Code 11.
    Str(String),
    /// Code 9 (owned).
    Module(*mut c_void),
    /// Code 12 (copied).
    Bytes(Vec<u8>),
    /// Anything else: code and raw bits.
    Other(c_int, i64),
}

impl Ret {
    /// The int, or a panic.
    pub fn int(&self) -> i64 {
        match self {
            Ret::Int(v) => *v,
            other => panic!("expected an int, got {other:?}"),
        }
    }
}

/// `TVMFuncCall`; on failure the error text.
pub fn call(f: &Func, args: &[Arg<'_>]) -> Result<Ret, String> {
    let strings: Vec<CString> =
        args.iter().filter_map(|a| if let Arg::Str(s) = a { Some(cstring(s)) } else { None }).collect();
    let mut si = 0;
    let mut values = Vec::new();
    let mut codes = Vec::new();
    for a in args {
        let (v, c) = match a {
            Arg::Int(x) => (TVMValue { v_int64: *x }, 0),
            Arg::Str(_) => {
                si += 1;
                (TVMValue { v_str: strings[si - 1].as_ptr() }, 11)
            }
            Arg::Handle(h) => (TVMValue { v_handle: *h }, 3),
            Arg::Module(m) => (TVMValue { v_handle: m.0 }, 9),
            Arg::Array(h) => (TVMValue { v_handle: *h }, 13),
            Arg::Func(f) => (TVMValue { v_handle: f.0 }, 10),
            Arg::Float(x) => (TVMValue { v_float64: *x }, 2),
            Arg::Device(t, i) => {
                (TVMValue { v_device: tvm_runtime::abi::DLDevice { device_type: *t, device_id: *i } }, 6)
            }
        };
        values.push(v);
        codes.push(c);
    }
    let mut rv = TVMValue { v_int64: 0 };
    let mut rc: c_int = -100;
    // SAFETY: live function, arrays of `args.len()` valid values, valid out-pointers.
    let status = unsafe {
        api::TVMFuncCall(f.0, values.as_mut_ptr(), codes.as_mut_ptr(), values.len() as c_int, &mut rv, &mut rc)
    };
    if status != 0 {
        return Err(last_error());
    }
    Ok(match rc {
        4 => Ret::Null,
        // SAFETY: code 0 carries v_int64.
        0 => Ret::Int(unsafe { rv.v_int64 }),
        // SAFETY: code 3 carries v_handle.
        3 => Ret::Handle(unsafe { rv.v_handle }),
        // SAFETY: code 9 carries v_handle.
        9 => Ret::Module(unsafe { rv.v_handle }),
        // SAFETY: code 11 carries a thread-local C string, copied at once.
        11 => Ret::Str(unsafe { from_c(rv.v_str) }),
        12 => {
            // SAFETY: code 12 carries a thread-local TVMByteArray, copied at once.
            let ba = unsafe { &*rv.v_handle.cast::<tvm_runtime::abi::TVMByteArray>() };
            // SAFETY: `data` holds `size` bytes.
            Ret::Bytes(unsafe { std::slice::from_raw_parts(ba.data.cast::<u8>(), ba.size) }.to_vec())
        }
        // SAFETY: every member is 8 bytes; the raw bits are reported.
        c => Ret::Other(c, unsafe { rv.v_int64 }),
    })
}

/// Calls global `name`.
pub fn call_global(name: &str, args: &[Arg<'_>]) -> Result<Ret, String> {
    call(&global(name).unwrap_or_else(|| panic!("global {name} missing")), args)
}

/// The type key of a module (`runtime.ModuleGetTypeKey`).
pub fn type_key(m: &Mod) -> String {
    match call_global("runtime.ModuleGetTypeKey", &[Arg::Module(m)]) {
        Ok(Ret::Str(s)) => s,
        other => panic!("ModuleGetTypeKey: {other:?}"),
    }
}

/// The number of imports (`runtime.ModuleImportsSize`).
pub fn imports_size(m: &Mod) -> i64 {
    call_global("runtime.ModuleImportsSize", &[Arg::Module(m)]).expect("ModuleImportsSize").int()
}

/// Import `i` (`runtime.ModuleGetImport`).
pub fn import(m: &Mod, i: i64) -> Mod {
    match call_global("runtime.ModuleGetImport", &[Arg::Module(m), Arg::Int(i)]) {
        Ok(Ret::Module(h)) => Mod(h),
        other => panic!("ModuleGetImport: {other:?}"),
    }
}

/// A C string argument for raw calls.
pub fn c(s: &str) -> CString {
    cstring(s)
}

/// Reads a NUL-terminated string.
///
/// # Safety
/// `p` is a valid C string.
pub unsafe fn from_c(p: *const c_char) -> String {
    // SAFETY: per contract.
    unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned()
}

// ---------------------------------------------------------------------------------------------
// Arrays on any device

/// An owned NDArray (`TVMArrayAlloc` / `TVMArrayFree`).
pub struct DevArray(pub *mut tvm_runtime::abi::DLTensor);

impl DevArray {
    /// A `code`/32-bit array of `shape` on device type `dev_type` (id 0), or the error text.
    pub fn try_new(shape: &[i64], code: i32, dev_type: i32) -> Result<DevArray, String> {
        let mut h = std::ptr::null_mut();
        // SAFETY: valid shape array and out-pointer.
        let rc = unsafe {
            tvm_runtime::classic_api::ndarray::TVMArrayAlloc(
                shape.as_ptr(),
                shape.len() as c_int,
                code,
                32,
                1,
                dev_type,
                0,
                &mut h,
            )
        };
        if rc != 0 {
            return Err(last_error());
        }
        Ok(DevArray(h))
    }

    /// As [`DevArray::try_new`], panicking on failure.
    pub fn new(shape: &[i64], code: i32, dev_type: i32) -> DevArray {
        DevArray::try_new(shape, code, dev_type).unwrap_or_else(|e| panic!("TVMArrayAlloc: {e}"))
    }

    /// A float32 vector on device type `dev_type`.
    pub fn from_f32(v: &[f32], dev_type: i32) -> DevArray {
        let a = DevArray::new(&[v.len() as i64], 2, dev_type);
        a.write(v.as_ptr().cast(), v.len() * 4);
        a
    }

    /// `TVMArrayCopyFromBytes` of `n` bytes at `p`.
    pub fn write(&self, p: *const c_void, n: usize) {
        // SAFETY: `p` holds `n` bytes.
        let rc = unsafe { tvm_runtime::classic_api::ndarray::TVMArrayCopyFromBytes(self.0, p.cast_mut(), n) };
        assert_eq!(rc, 0, "{}", last_error());
    }

    fn read<T: Default + Clone>(&self, n: usize) -> Vec<T> {
        let mut out = vec![T::default(); n];
        let bytes = n * std::mem::size_of::<T>();
        // SAFETY: `out` holds `bytes` bytes.
        let rc =
            unsafe { tvm_runtime::classic_api::ndarray::TVMArrayCopyToBytes(self.0, out.as_mut_ptr().cast(), bytes) };
        assert_eq!(rc, 0, "{}", last_error());
        out
    }

    /// The first `n` elements as float32.
    pub fn f32s(&self, n: usize) -> Vec<f32> {
        self.read(n)
    }

    /// The first `n` elements as int32.
    pub fn i32s(&self, n: usize) -> Vec<i32> {
        self.read(n)
    }

    /// The data pointer (a device handle for GPU arrays).
    pub fn data(&self) -> *mut c_void {
        // SAFETY: a live array.
        unsafe { (*self.0).data }
    }
}

impl Drop for DevArray {
    fn drop(&mut self) {
        // SAFETY: an owned handle, freed once.
        assert_eq!(unsafe { tvm_runtime::classic_api::ndarray::TVMArrayFree(self.0) }, 0);
    }
}

/// The arguments of the tests' `vadd_kernel0(A, B, C, s, n)` with tags `[blockIdx.x,
/// threadIdx.x]`, as generated host code passes them: three buffers, the scalars, the extents.
pub fn vadd_args<'a>(bufs: [*mut c_void; 3], s: f64, n: i64, blocks: i64, threads: i64) -> [Arg<'a>; 7] {
    [
        Arg::Handle(bufs[0]),
        Arg::Handle(bufs[1]),
        Arg::Handle(bufs[2]),
        Arg::Float(s),
        Arg::Int(n),
        Arg::Int(blocks),
        Arg::Int(threads),
    ]
}

/// Runs `vadd_kernel0` on `n` elements of device type `dev_type` with `threads` per block and
/// checks the result (the inputs are chosen so that every result is exact in float32).
pub fn check_vadd(k: &Func, dev_type: i32, n: usize, s: f32, threads: usize) {
    let a: Vec<f32> = (0..n).map(|i| i as f32 * 0.5).collect();
    let b: Vec<f32> = (0..n).map(|i| 1.0 - (i % 7) as f32).collect();
    let (da, db) = (DevArray::from_f32(&a, dev_type), DevArray::from_f32(&b, dev_type));
    let dc = DevArray::new(&[n as i64], 2, dev_type);
    let blocks = n.div_ceil(threads) as i64;
    let args = vadd_args([da.data(), db.data(), dc.data()], f64::from(s), n as i64, blocks, threads as i64);
    call(k, &args).expect("vadd launch");
    let want: Vec<f32> = a.iter().zip(&b).map(|(x, y)| x + s * y).collect();
    assert_eq!(dc.f32s(n), want);
}

/// One kernel of a device module: name, parameter types as (code, bits, lanes), thread tags.
pub type KernelInfo<'a> = (&'a str, &'a [(u8, u8, u16)], &'a [&'a str]);

/// The tests' `vadd_kernel0(A, B, C: handle, s: float32, n: int32)`.
pub const VADD_KERNEL: KernelInfo<'static> =
    ("vadd_kernel0", &[(3, 64, 1), (3, 64, 1), (3, 64, 1), (2, 32, 1), (0, 32, 1)], &["blockIdx.x", "threadIdx.x"]);

/// A `cuda` / `opencl` blob entry (format, function map, image), written here
/// independently of the runtime's writer.
pub fn device_entry(fmt: &str, kernels: &[KernelInfo<'_>], image: &[u8]) -> Vec<u8> {
    let mut d = Vec::new();
    put_str(&mut d, fmt.as_bytes());
    d.extend_from_slice(&(kernels.len() as u64).to_le_bytes());
    for (name, types, tags) in kernels {
        put_str(&mut d, name.as_bytes());
        put_str(&mut d, b"");
        d.extend_from_slice(&(types.len() as u64).to_le_bytes());
        for &(code, bits, lanes) in *types {
            d.push(code);
            d.push(bits);
            d.extend_from_slice(&lanes.to_le_bytes());
        }
        d.extend_from_slice(&(tags.len() as u64).to_le_bytes());
        tags.iter().for_each(|t| put_str(&mut d, t.as_bytes()));
    }
    put_str(&mut d, image);
    d
}
