//! Support for the Relay VM tests: the VM fixtures of TVM v0.8, a writer of VM executables in
//! TVM's serialized format (written here independently of the runtime's own writer), the builder
//! of model libraries holding one (kernels in `tests/fixtures/vm_kernels.c`), and the VM driven
//! through the C API the way TVM's Python `vm.py` drives it.

use super::{blob_c_source, build_shared, c, call, last_error, Blob, Func, Mod, Ret};
use std::ffi::{c_int, c_void};
use std::path::{Path, PathBuf};
use tvm_runtime::abi::{DLTensor, TVMValue};
use tvm_runtime::classic_api::runtime_api as api;

// ---------------------------------------------------------------------------------------------
// The fixtures

/// The directory of the VM fixtures, or `None` (after printing why); absent under `CI=true` is a
/// failure.
pub fn vm_fixtures_dir() -> Option<PathBuf> {
    let dir = super::shared_dir().join("fixtures-vm");
    if dir.join("manifest.json").is_file() {
        return Some(dir);
    }
    assert!(
        std::env::var("CI").as_deref() != Ok("true"),
        "VM fixtures missing at {} (required under CI)",
        dir.display()
    );
    println!("SKIP: VM fixtures not found at {}", dir.display());
    None
}

/// One run of a fixture: input files and the flattened output files.
pub struct Run {
    pub inputs: Vec<PathBuf>,
    pub outputs: Vec<PathBuf>,
}

/// A fixture of kind `vm`.
pub struct VmFixture {
    pub name: String,
    pub file: PathBuf,
    pub function: String,
    pub rtol: f64,
    pub atol: f64,
    pub runs: Vec<Run>,
}

/// Every `vm` fixture of the manifest.
pub fn vm_fixtures() -> Option<Vec<VmFixture>> {
    let dir = vm_fixtures_dir()?;
    let text = std::fs::read_to_string(dir.join("manifest.json")).expect("read manifest");
    let m: serde_json::Value = serde_json::from_str(&text).expect("manifest JSON");
    let mut out = Vec::new();
    for (name, f) in m["fixtures"].as_object().expect("fixtures") {
        if f["kind"] != "vm" {
            continue;
        }
        let paths = |v: &serde_json::Value| -> Vec<PathBuf> {
            v.as_array().expect("list").iter().map(|p| dir.join(p.as_str().expect("path"))).collect()
        };
        let runs = f["runs"]
            .as_array()
            .expect("runs")
            .iter()
            .map(|r| Run { inputs: paths(&r["inputs"]), outputs: paths(&r["outputs"]) })
            .collect();
        out.push(VmFixture {
            name: name.clone(),
            file: dir.join(f["file"].as_str().expect("file")),
            function: f["function"].as_str().unwrap_or("main").to_owned(),
            rtol: f["rtol"].as_f64().unwrap_or(1e-5),
            atol: f["atol"].as_f64().unwrap_or(1e-5),
            runs,
        });
    }
    out.sort_by(|a, b| a.name.cmp(&b.name));
    Some(out)
}

/// A tensor on the host: dtype (code, bits, lanes), shape, raw little-endian bytes.
#[derive(Clone, Debug, PartialEq)]
pub struct Host {
    pub dtype: (u8, u8, u16),
    pub shape: Vec<i64>,
    pub data: Vec<u8>,
}

impl Host {
    /// float32 values.
    pub fn f32(shape: &[i64], v: &[f32]) -> Host {
        assert_eq!(shape.iter().product::<i64>() as usize, v.len());
        Host { dtype: (2, 32, 1), shape: shape.to_vec(), data: v.iter().flat_map(|x| x.to_le_bytes()).collect() }
    }
    /// int64 values.
    pub fn i64s(shape: &[i64], v: &[i64]) -> Host {
        assert_eq!(shape.iter().product::<i64>() as usize, v.len());
        Host { dtype: (0, 64, 1), shape: shape.to_vec(), data: v.iter().flat_map(|x| x.to_le_bytes()).collect() }
    }
    /// The data as float32.
    pub fn as_f32(&self) -> Vec<f32> {
        assert_eq!(self.dtype, (2, 32, 1), "not float32");
        self.data.chunks_exact(4).map(|c| f32::from_le_bytes(c.try_into().unwrap())).collect()
    }
    /// The data as int32.
    pub fn as_i32(&self) -> Vec<i32> {
        assert_eq!(self.dtype, (0, 32, 1), "not int32");
        self.data.chunks_exact(4).map(|c| i32::from_le_bytes(c.try_into().unwrap())).collect()
    }
    /// The data as int64.
    pub fn as_i64(&self) -> Vec<i64> {
        assert_eq!(self.dtype, (0, 64, 1), "not int64");
        self.data.chunks_exact(8).map(|c| i64::from_le_bytes(c.try_into().unwrap())).collect()
    }
}

/// A little-endian `.npy` file (float32, int32, int64, bool; C order).
pub fn read_npy(path: &Path) -> Host {
    let b = std::fs::read(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    assert_eq!(&b[..6], b"\x93NUMPY", "{}: not an .npy file", path.display());
    let (hlen, start) = match b[6] {
        1 => (u16::from_le_bytes([b[8], b[9]]) as usize, 10),
        _ => (u32::from_le_bytes([b[8], b[9], b[10], b[11]]) as usize, 12),
    };
    let header = std::str::from_utf8(&b[start..start + hlen]).expect("ASCII header");
    assert!(header.contains("'fortran_order': False"), "{}: Fortran order", path.display());
    let dtype = if header.contains("'<f4'") {
        (2, 32, 1)
    } else if header.contains("'<i4'") {
        (0, 32, 1)
    } else if header.contains("'<i8'") {
        (0, 64, 1)
    } else if header.contains("'|b1'") {
        (1, 1, 1)
    } else {
        panic!("{}: unsupported dtype: {header}", path.display())
    };
    let shape_text = header.split("'shape': (").nth(1).and_then(|s| s.split(')').next()).expect("shape");
    let shape: Vec<i64> = shape_text.split(',').filter_map(|s| s.trim().parse().ok()).collect();
    let data = b[start + hlen..].to_vec();
    let elem = (dtype.1 as usize).div_ceil(8);
    assert_eq!(data.len(), shape.iter().product::<i64>() as usize * elem, "{}: data size", path.display());
    Host { dtype, shape, data }
}

// ---------------------------------------------------------------------------------------------
// Executables in TVM v0.8's serialized format

/// The magic of a serialized executable.
pub const VM_MAGIC: u64 = 0xD225_DE2F_4214_151D;

/// One instruction: opcode and fields (the hash is computed when written).
#[derive(Clone, Debug)]
pub struct Ins {
    pub op: i64,
    pub fields: Vec<i64>,
}

fn ins(op: i64, fields: Vec<i64>) -> Ins {
    Ins { op, fields }
}

/// The instruction constructors of bytecode.h, in their field order (executable.cc).
pub mod op {
    use super::{ins, Ins};
    pub fn mov(from: i64, dst: i64) -> Ins {
        ins(0, vec![from, dst])
    }
    pub fn ret(r: i64) -> Ins {
        ins(1, vec![r])
    }
    pub fn invoke(func: i64, args: &[i64], dst: i64) -> Ins {
        ins(2, [&[func, args.len() as i64, dst][..], args].concat())
    }
    pub fn invoke_closure(closure: i64, args: &[i64], dst: i64) -> Ins {
        ins(3, [&[closure, args.len() as i64, dst][..], args].concat())
    }
    pub fn invoke_packed(index: i64, outputs: i64, args: &[i64]) -> Ins {
        ins(4, [&[index, args.len() as i64, outputs][..], args].concat())
    }
    pub fn alloc_tensor(storage: i64, offset: i64, shape: &[i64], dtype: (u8, u8, u16), dst: i64) -> Ins {
        let head = [storage, offset, dtype.0.into(), dtype.1.into(), dtype.2.into(), shape.len() as i64, dst];
        ins(5, [&head[..], shape].concat())
    }
    pub fn alloc_tensor_reg(storage: i64, offset: i64, shape: i64, dtype: (u8, u8, u16), dst: i64) -> Ins {
        ins(6, vec![storage, offset, shape, dtype.0.into(), dtype.1.into(), dtype.2.into(), dst])
    }
    pub fn alloc_adt(tag: i64, fields: &[i64], dst: i64) -> Ins {
        ins(7, [&[tag, fields.len() as i64, dst][..], fields].concat())
    }
    pub fn alloc_closure(func: i64, free: &[i64], dst: i64) -> Ins {
        ins(8, [&[func, free.len() as i64, dst][..], free].concat())
    }
    pub fn get_field(object: i64, index: i64, dst: i64) -> Ins {
        ins(9, vec![object, index, dst])
    }
    pub fn if_(test: i64, target: i64, true_off: i64, false_off: i64) -> Ins {
        ins(10, vec![test, target, true_off, false_off])
    }
    pub fn load_const(index: i64, dst: i64) -> Ins {
        ins(11, vec![index, dst])
    }
    pub fn goto(offset: i64) -> Ins {
        ins(12, vec![offset])
    }
    pub fn get_tag(object: i64, dst: i64) -> Ins {
        ins(13, vec![object, dst])
    }
    pub fn load_consti(v: i64, dst: i64) -> Ins {
        ins(14, vec![v, dst])
    }
    pub fn fatal() -> Ins {
        ins(15, vec![])
    }
    pub fn alloc_storage(size: i64, align: i64, hint: (u8, u8, u16), device_type: i64, dst: i64) -> Ins {
        ins(16, vec![size, align, hint.0.into(), hint.1.into(), hint.2.into(), device_type, dst])
    }
    pub fn shape_of(tensor: i64, dst: i64) -> Ins {
        ins(17, vec![tensor, dst])
    }
    pub fn reshape(tensor: i64, shape: i64, dst: i64) -> Ins {
        ins(18, vec![tensor, shape, dst])
    }
    pub fn device_copy(src: i64, src_dev: i64, dst_dev: i64, dst: i64) -> Ins {
        ins(19, vec![src, src_dev, dst_dev, dst])
    }
}

/// One VM function.
#[derive(Clone, Debug)]
pub struct VmFn {
    pub name: String,
    pub params: Vec<String>,
    pub param_devices: Vec<i64>,
    pub regs: i64,
    pub code: Vec<Ins>,
    /// Written instead of the instruction count when set (for damaged executables).
    pub count_override: Option<String>,
}

impl VmFn {
    /// A CPU function.
    pub fn new(name: &str, params: &[&str], regs: i64, code: Vec<Ins>) -> VmFn {
        VmFn {
            name: name.into(),
            params: params.iter().map(|p| p.to_string()).collect(),
            param_devices: vec![1; params.len()],
            regs,
            code,
            count_override: None,
        }
    }
}

/// A constant and the device type it is used on.
#[derive(Clone, Debug)]
pub struct Const {
    pub value: Host,
    pub device_type: i64,
}

/// An executable to serialize.
#[derive(Clone, Debug)]
pub struct Exe {
    pub version: String,
    pub constants: Vec<Const>,
    pub primitives: Vec<String>,
    pub attrs: Vec<(u64, Vec<(String, String)>)>,
    pub funcs: Vec<VmFn>,
}

/// TVM's HashCombine over the opcode and fields.
pub fn ins_hash(op: i64, fields: &[i64]) -> i64 {
    let mut key = op as u64;
    for &f in fields {
        key ^= (f as u64).wrapping_add(0x9e37_79b9).wrapping_add(key << 6).wrapping_add(key >> 2);
    }
    key as i64
}

fn w64(o: &mut Vec<u8>, v: u64) {
    o.extend_from_slice(&v.to_le_bytes());
}

fn wstr(o: &mut Vec<u8>, s: &[u8]) {
    w64(o, s.len() as u64);
    o.extend_from_slice(s);
}

fn wstrs<S: AsRef<str>>(o: &mut Vec<u8>, v: &[S]) {
    w64(o, v.len() as u64);
    v.iter().for_each(|s| wstr(o, s.as_ref().as_bytes()));
}

fn wi64s(o: &mut Vec<u8>, v: &[i64]) {
    w64(o, v.len() as u64);
    v.iter().for_each(|&x| w64(o, x as u64));
}

/// An NDArray record of a CPU tensor.
pub fn ndarray_record(h: &Host) -> Vec<u8> {
    let mut o = Vec::new();
    w64(&mut o, 0xDD5E_40F0_96B4_A13F);
    w64(&mut o, 0);
    o.extend_from_slice(&1i32.to_le_bytes());
    o.extend_from_slice(&0i32.to_le_bytes());
    o.extend_from_slice(&(h.shape.len() as i32).to_le_bytes());
    o.push(h.dtype.0);
    o.push(h.dtype.1);
    o.extend_from_slice(&h.dtype.2.to_le_bytes());
    h.shape.iter().for_each(|&d| w64(&mut o, d as u64));
    w64(&mut o, h.data.len() as u64);
    o.extend_from_slice(&h.data);
    o
}

impl Exe {
    /// An empty v0.8 executable.
    pub fn new() -> Exe {
        Exe {
            version: "0.8.0".into(),
            constants: Vec::new(),
            primitives: Vec::new(),
            attrs: Vec::new(),
            funcs: Vec::new(),
        }
    }

    /// Adds a CPU constant; returns its index.
    pub fn constant(&mut self, h: Host) -> i64 {
        self.constants.push(Const { value: h, device_type: 1 });
        self.constants.len() as i64 - 1
    }

    /// Adds a primitive; returns its index.
    pub fn primitive(&mut self, name: &str) -> i64 {
        self.primitives.push(name.into());
        self.primitives.len() as i64 - 1
    }

    /// The serialized executable (what `exe.save()` returns).
    pub fn bytes(&self) -> Vec<u8> {
        let mut o = Vec::new();
        w64(&mut o, VM_MAGIC);
        wstr(&mut o, self.version.as_bytes());
        let globals: Vec<&str> = self.funcs.iter().map(|f| f.name.as_str()).collect();
        wstrs(&mut o, &globals);
        w64(&mut o, self.constants.len() as u64);
        for c in &self.constants {
            o.extend_from_slice(&ndarray_record(&c.value));
        }
        let devs: Vec<i64> = self.constants.iter().map(|c| c.device_type).collect();
        wi64s(&mut o, &devs);
        wstrs(&mut o, &self.primitives);
        w64(&mut o, self.attrs.len() as u64);
        for (k, m) in &self.attrs {
            w64(&mut o, *k);
            w64(&mut o, m.len() as u64);
            for (a, b) in m {
                wstr(&mut o, a.as_bytes());
                wstr(&mut o, b.as_bytes());
            }
        }
        w64(&mut o, self.funcs.len() as u64);
        for f in &self.funcs {
            let count = f.count_override.clone().unwrap_or_else(|| f.code.len().to_string());
            wstrs(&mut o, &[f.name.clone(), f.regs.to_string(), count]);
            wstrs(&mut o, &f.params);
            wi64s(&mut o, &f.param_devices);
            for i in &f.code {
                let mut v = vec![ins_hash(i.op, &i.fields), i.op];
                v.extend_from_slice(&i.fields);
                wi64s(&mut o, &v);
            }
        }
        o
    }
}

impl Default for Exe {
    fn default() -> Self {
        Exe::new()
    }
}

/// The C file of the test kernels.
pub fn vm_kernels_c() -> PathBuf {
    super::source_dir().join("tests/fixtures/vm_kernels.c")
}

/// The `__tvm_dev_mblob` of an exported VM executable: the `VMExecutable` entry (the code as one
/// length-prefixed string), `_lib`, and the tree making the executable the root.
pub fn vm_blob(code: &[u8]) -> Vec<u8> {
    let mut framed = Vec::new();
    wstr(&mut framed, code);
    Blob::default().module("VMExecutable", &framed).lib().tree(&[0, 1, 1], &[1]).bytes()
}

/// A model library with the test kernels (plus `extra_sources`) and `code` as its executable,
/// as `exe.mod.export_library` makes it.
pub fn build_vm_library(name: &str, code: &[u8], extra_sources: &[PathBuf]) -> PathBuf {
    let mut srcs = vec![vm_kernels_c()];
    srcs.extend_from_slice(extra_sources);
    build_shared(name, &srcs, &blob_c_source(&vm_blob(code)))
}

/// The serialized executable inside an exported library (read from its blob with `dlsym`,
/// independently of the runtime's loader).
pub fn executable_bytes_of(lib: &Path) -> Vec<u8> {
    let p = c(lib.to_str().expect("utf-8 path"));
    // SAFETY: opening a model library runs no code of concern (its initialisers are empty);
    // the blob symbol holds the 8-byte length and that many bytes; the handle is closed after
    // the bytes are copied.
    unsafe {
        let h = libc::dlopen(p.as_ptr(), libc::RTLD_LAZY | libc::RTLD_LOCAL);
        assert!(!h.is_null(), "dlopen {}", lib.display());
        let sym = libc::dlsym(h, c("__tvm_dev_mblob").as_ptr()).cast::<u8>();
        assert!(!sym.is_null(), "no blob in {}", lib.display());
        let n = u64::from_le_bytes(std::slice::from_raw_parts(sym, 8).try_into().unwrap()) as usize;
        let payload = std::slice::from_raw_parts(sym.add(8), n).to_vec();
        libc::dlclose(h);
        let rd = |p: &[u8], at: usize| u64::from_le_bytes(p[at..at + 8].try_into().unwrap()) as usize;
        let mut at = 8; // entry count
        loop {
            let klen = rd(&payload, at);
            let key = &payload[at + 8..at + 8 + klen];
            at += 8 + klen;
            if key == b"VMExecutable" {
                let n = rd(&payload, at);
                return payload[at + 8..at + 8 + n].to_vec();
            }
            assert!(key == b"_lib", "unexpected entry before the executable");
        }
    }
}

// ---------------------------------------------------------------------------------------------
// The VM through the C API

/// A host array on the CPU (`TVMArrayAlloc` + copy), freed on drop.
pub struct Array(pub *mut DLTensor);

impl Array {
    /// A CPU array holding `h`.
    pub fn new(h: &Host) -> Array {
        Self::on(h, 1)
    }

    /// An array holding `h` on device type `dev_type` (id 0).
    pub fn on(h: &Host, dev_type: i32) -> Array {
        let mut out = std::ptr::null_mut();
        // SAFETY: valid shape array and out-pointer.
        let rc = unsafe {
            tvm_runtime::classic_api::ndarray::TVMArrayAlloc(
                h.shape.as_ptr(),
                h.shape.len() as c_int,
                h.dtype.0.into(),
                h.dtype.1.into(),
                h.dtype.2.into(),
                dev_type,
                0,
                &mut out,
            )
        };
        assert_eq!(rc, 0, "TVMArrayAlloc: {}", last_error());
        // SAFETY: `data` holds exactly the array's bytes.
        let rc = unsafe {
            tvm_runtime::classic_api::ndarray::TVMArrayCopyFromBytes(
                out,
                h.data.as_ptr().cast_mut().cast(),
                h.data.len(),
            )
        };
        assert_eq!(rc, 0, "TVMArrayCopyFromBytes: {}", last_error());
        Array(out)
    }
}

impl Drop for Array {
    fn drop(&mut self) {
        // SAFETY: an owned handle, freed once.
        assert_eq!(unsafe { tvm_runtime::classic_api::ndarray::TVMArrayFree(self.0) }, 0);
    }
}

/// A result of the VM, copied to the host: a tensor, or an ADT (tag and fields).
#[derive(Clone, Debug, PartialEq)]
pub enum Out {
    Tensor(Host),
    Adt(i32, Vec<Out>),
}

impl Out {
    /// The tensors, depth first (how the manifest lists outputs).
    pub fn flatten(&self) -> Vec<Host> {
        match self {
            Out::Tensor(h) => vec![h.clone()],
            Out::Adt(_, f) => f.iter().flat_map(Out::flatten).collect(),
        }
    }

    /// The tensor, or a panic.
    pub fn tensor(&self) -> &Host {
        match self {
            Out::Tensor(h) => h,
            other => panic!("expected a tensor, got {other:?}"),
        }
    }
}

/// Calls `f` with raw (value, code) pairs.
pub fn call_raw(f: &Func, args: &[(TVMValue, c_int)]) -> Result<(TVMValue, c_int), String> {
    let mut values: Vec<TVMValue> = args.iter().map(|a| a.0).collect();
    let mut codes: Vec<c_int> = args.iter().map(|a| a.1).collect();
    let mut rv = TVMValue { v_int64: 0 };
    let mut rc: c_int = 0;
    // SAFETY: live function, arrays of `args.len()` valid values, valid out-pointers.
    let r = unsafe {
        api::TVMFuncCall(f.0, values.as_mut_ptr(), codes.as_mut_ptr(), values.len() as c_int, &mut rv, &mut rc)
    };
    if r != 0 {
        return Err(last_error());
    }
    Ok((rv, rc))
}

/// Copies a tensor handle to the host.
///
/// # Safety
/// `h` is a live NDArray handle.
pub unsafe fn host_of(h: *mut DLTensor) -> Host {
    // SAFETY: per contract.
    let t = unsafe { &*h };
    // SAFETY: a live tensor's shape holds ndim extents.
    let shape = unsafe { std::slice::from_raw_parts(t.shape, t.ndim as usize) }.to_vec();
    let n = shape.iter().product::<i64>() as usize * (t.dtype.bits as usize * t.dtype.lanes as usize).div_ceil(8);
    let mut data = vec![0u8; n];
    // SAFETY: `data` holds the tensor's bytes.
    let rc = unsafe { tvm_runtime::classic_api::ndarray::TVMArrayCopyToBytes(h, data.as_mut_ptr().cast(), n) };
    assert_eq!(rc, 0, "TVMArrayCopyToBytes: {}", last_error());
    Host { dtype: (t.dtype.code, t.dtype.bits, t.dtype.lanes), shape, data }
}

/// Turns an owned return value (a tensor or an ADT) into an [`Out`], releasing it.
pub fn take_out(rv: TVMValue, rc: c_int) -> Out {
    match rc {
        13 => {
            // SAFETY: code 13 carries an owned NDArray handle.
            let h = unsafe { rv.v_handle }.cast::<DLTensor>();
            // SAFETY: live until freed below.
            let out = Out::Tensor(unsafe { host_of(h) });
            // SAFETY: owned, freed once.
            assert_eq!(unsafe { tvm_runtime::classic_api::ndarray::TVMArrayFree(h) }, 0);
            out
        }
        8 => {
            // SAFETY: code 8 carries an owned object handle.
            let obj = unsafe { rv.v_handle };
            let arg = (TVMValue { v_handle: obj }, 8);
            let g = |name: &str| super::global(name).unwrap_or_else(|| panic!("{name}"));
            // SAFETY: results of code 0 carry v_int64.
            let tag = unsafe { call_raw(&g("runtime.GetADTTag"), &[arg]).expect("GetADTTag").0.v_int64 } as i32;
            // SAFETY: as above.
            let n = unsafe { call_raw(&g("runtime.GetADTSize"), &[arg]).expect("GetADTSize").0.v_int64 };
            let get = g("runtime.GetADTFields");
            let fields = (0..n)
                .map(|i| {
                    let (v, c) = call_raw(&get, &[arg, (TVMValue { v_int64: i }, 0)]).expect("GetADTFields");
                    take_out(v, c)
                })
                .collect();
            // SAFETY: owned object handle, released once.
            assert_eq!(unsafe { tvm_runtime::classic_api::object::TVMObjectFree(obj) }, 0);
            Out::Adt(tag, fields)
        }
        c => panic!("expected a tensor or an ADT, got code {c}"),
    }
}

/// Looks up a module function that must exist.
pub fn func(m: &Mod, name: &str) -> Func {
    let n = c(name);
    let mut out = std::ptr::null_mut();
    // SAFETY: live module, valid string and out-pointer.
    let rc = unsafe { api::TVMModGetFunction(m.0, n.as_ptr(), 0, &mut out) };
    assert_eq!(rc, 0, "TVMModGetFunction({name}): {}", last_error());
    assert!(!out.is_null(), "{name} missing");
    Func(out)
}

/// `TVMModGetFunction`'s error for a name, if it fails.
pub fn func_error(m: &Mod, name: &str) -> Option<String> {
    let n = c(name);
    let mut out: *mut c_void = std::ptr::null_mut();
    // SAFETY: live module, valid string and out-pointer.
    let rc = unsafe { api::TVMModGetFunction(m.0, n.as_ptr(), 0, &mut out) };
    if rc == 0 {
        if !out.is_null() {
            drop(Func(out));
        }
        None
    } else {
        Some(last_error())
    }
}

/// A VirtualMachine as `tvm.runtime.vm.VirtualMachine` drives it.
pub struct Vm {
    pub m: Mod,
}

fn str_arg(s: &std::ffi::CString) -> (TVMValue, c_int) {
    (TVMValue { v_str: s.as_ptr() }, 11)
}

impl Vm {
    /// `exe.mod["vm_load_executable"]()`, then `init` with `devices` (type, id, allocator).
    pub fn new(exec: &Mod, devices: &[(i32, i32, i64)]) -> Vm {
        let vm = Self::create(exec).expect("vm_load_executable");
        vm.init(devices).expect("init");
        vm
    }

    /// `exe.mod["vm_load_executable"]()`.
    pub fn create(exec: &Mod) -> Result<Vm, String> {
        match call(&func(exec, "vm_load_executable"), &[])? {
            Ret::Module(h) => Ok(Vm { m: Mod(h) }),
            other => panic!("vm_load_executable returned {other:?}"),
        }
    }

    /// `init(dev_type, dev_id, alloc_type, ...)`.
    pub fn init(&self, devices: &[(i32, i32, i64)]) -> Result<(), String> {
        let args: Vec<(TVMValue, c_int)> = devices
            .iter()
            .flat_map(|&(t, i, a)| [i64::from(t), i64::from(i), a])
            .map(|v| (TVMValue { v_int64: v }, 0))
            .collect();
        call_raw(&func(&self.m, "init"), &args).map(|_| ())
    }

    /// `set_input(func, *arrays)` with NDArray handles.
    pub fn set_input(&self, name: &str, arrays: &[&Array]) -> Result<(), String> {
        let n = c(name);
        let mut args = vec![str_arg(&n)];
        args.extend(arrays.iter().map(|a| (TVMValue { v_handle: a.0.cast() }, 13)));
        call_raw(&func(&self.m, "set_input"), &args).map(|_| ())
    }

    /// `invoke(func)`.
    pub fn invoke(&self, name: &str) -> Result<Out, String> {
        let n = c(name);
        let (v, code) = call_raw(&func(&self.m, "invoke"), &[str_arg(&n)])?;
        Ok(take_out(v, code))
    }

    /// `set_input` then `invoke` of host tensors (as `vm.invoke("main", *inputs)` does).
    pub fn run(&self, name: &str, inputs: &[Host]) -> Result<Out, String> {
        let arrays: Vec<Array> = inputs.iter().map(Array::new).collect();
        let refs: Vec<&Array> = arrays.iter().collect();
        self.set_input(name, &refs)?;
        self.invoke(name)
    }

    /// `invoke_return_to_device(func, dev_type, dev_id, *arrays)`.
    pub fn invoke_return_to_device(&self, name: &str, dev: (i32, i32), inputs: &[Host]) -> Result<Out, String> {
        let arrays: Vec<Array> = inputs.iter().map(Array::new).collect();
        let n = c(name);
        let mut args =
            vec![str_arg(&n), (TVMValue { v_int64: dev.0.into() }, 0), (TVMValue { v_int64: dev.1.into() }, 0)];
        args.extend(arrays.iter().map(|a| (TVMValue { v_handle: a.0.cast() }, 13)));
        let (v, code) = call_raw(&func(&self.m, "invoke_return_to_device"), &args)?;
        Ok(take_out(v, code))
    }
}

/// Checks `got` against `want`: same dtype and shape; float32 within `atol + rtol * |want|`,
/// other types exactly.
pub fn assert_close(got: &Host, want: &Host, rtol: f64, atol: f64, what: &str) {
    assert_eq!(got.dtype, want.dtype, "{what}: dtype");
    assert_eq!(got.shape, want.shape, "{what}: shape");
    if want.dtype == (2, 32, 1) {
        for (i, (g, w)) in got.as_f32().iter().zip(want.as_f32()).enumerate() {
            let lim = atol + rtol * f64::from(w.abs());
            assert!((f64::from(*g) - f64::from(w)).abs() <= lim, "{what}: element {i}: {g} vs {w}");
        }
    } else {
        assert_eq!(got.data, want.data, "{what}: data");
    }
}
