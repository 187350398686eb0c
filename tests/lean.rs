//! Weights held once (issue 17, point 1): the pages of a library's `__tvm_dev_mblob` are given
//! back once the factory has copied its weights out, aligned weights are used in place, and the
//! library stays correct when it is needed again: a second executor, a second load, an export
//! (`SaveToBinary`), a library loaded from a `memfd`; the split form's params from a mapped file;
//! `share_params` and `get_output` over shared weights. Everything through the C API, with a
//! model library generated here (a kernel in C, the blob through `.incbin`, so its layout and
//! the alignment of each weight are known), and TVM's resnet18 for the peak resident set.

mod common;

use common::*;
use std::ffi::{c_int, c_void, CString};
use std::path::{Path, PathBuf};
use std::process::Command;
use tvm_runtime::abi::{TVMByteArray, TVMValue};
use tvm_runtime::classic_api::runtime_api as api;
use tvm_runtime::mapped::{page_size, resident_file_page, resident_page};

/// Elements of each tensor: 1 MiB of float32 per weight.
const N: usize = 1 << 18;

const KERNEL: &str = r#"
#include <tvm/runtime/c_backend_api.h>

/* out = a * b, elementwise over float32 tensors of the same size. */
TVM_DLL int lean_mul(TVMValue* args, int* codes, int num_args, TVMValue* rv, int* rc, void* h) {
  (void)codes; (void)rv; (void)rc; (void)h;
  if (num_args != 3) return -1;
  DLTensor* a = (DLTensor*)args[0].v_handle;
  DLTensor* b = (DLTensor*)args[1].v_handle;
  DLTensor* o = (DLTensor*)args[2].v_handle;
  int64_t n = 1;
  for (int i = 0; i < a->ndim; i++) n *= a->shape[i];
  const float* x = (const float*)a->data;
  const float* y = (const float*)b->data;
  float* z = (float*)o->data;
  for (int64_t i = 0; i < n; i++) z[i] = x[i] * y[i];
  return 0;
}
"#;

/// y = (data * w1) * w2; output 1 is the weight w1 itself.
fn graph_json(pad: usize) -> String {
    let n = N;
    let json = format!(
        r#"{{"nodes": [
  {{"op": "null", "name": "data", "inputs": []}},
  {{"op": "null", "name": "w1", "inputs": []}},
  {{"op": "null", "name": "w2", "inputs": []}},
  {{"op": "tvm_op", "name": "m1", "inputs": [[0, 0, 0], [1, 0, 0]],
   "attrs": {{"func_name": "lean_mul", "num_inputs": "2", "num_outputs": "1", "flatten_data": "0"}}}},
  {{"op": "tvm_op", "name": "m2", "inputs": [[3, 0, 0], [2, 0, 0]],
   "attrs": {{"func_name": "lean_mul", "num_inputs": "2", "num_outputs": "1", "flatten_data": "0"}}}}],
 "arg_nodes": [0, 1, 2], "node_row_ptr": [0, 1, 2, 3, 4, 5], "heads": [[4, 0, 0], [1, 0, 0]],
 "attrs": {{"dltype": ["list_str", ["float32", "float32", "float32", "float32", "float32"]],
           "storage_id": ["list_int", [0, 1, 2, 3, 4]],
           "shape": ["list_shape", [[{n}], [{n}], [{n}], [{n}], [{n}]]]}}}}"#
    );
    json + &" ".repeat(pad)
}

fn input() -> Vec<f32> {
    (0..N).map(|i| (i % 11) as f32 - 5.0).collect()
}
fn w1() -> Vec<f32> {
    (0..N).map(|i| (i % 7) as f32 + 1.0).collect()
}
fn w2() -> Vec<f32> {
    (0..N).map(|i| 0.5 * (i % 3) as f32 + 0.25).collect()
}
fn expected(w1: &[f32], w2: &[f32]) -> Vec<f32> {
    input().iter().zip(w1).zip(w2).map(|((x, a), b)| x * a * b).collect()
}

fn f32_bytes(v: &[f32]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

fn put_u64(out: &mut Vec<u8>, v: u64) {
    out.extend_from_slice(&v.to_le_bytes());
}
fn put_str(out: &mut Vec<u8>, s: &[u8]) {
    put_u64(out, s.len() as u64);
    out.extend_from_slice(s);
}

/// An NDArray record of a float32 vector.
fn record(v: &[f32]) -> Vec<u8> {
    let mut r = Vec::new();
    put_u64(&mut r, 0xDD5E_40F0_96B4_A13F);
    put_u64(&mut r, 0);
    r.extend_from_slice(&1i32.to_le_bytes());
    r.extend_from_slice(&0i32.to_le_bytes());
    r.extend_from_slice(&1i32.to_le_bytes());
    r.extend_from_slice(&[2, 32, 1, 0]);
    put_u64(&mut r, v.len() as u64);
    put_u64(&mut r, (v.len() * 4) as u64);
    r.extend_from_slice(&f32_bytes(v));
    r
}

/// Bytes of an NDArray record before its data.
const RECORD_HEAD: usize = 48;

/// The generated model: its files and where each weight's data lies in the blob.
struct Model {
    so: PathBuf,
    /// The library without a blob (split form), the graph JSON and a params file.
    lib_only: PathBuf,
    json: String,
    params: PathBuf,
    /// The factory entry's data as stored (for the export round trip).
    factory_entry: Vec<u8>,
    /// Offsets from the blob symbol of w1's and w2's data.
    w1_at: usize,
    w2_at: usize,
}

fn dir() -> PathBuf {
    let d = Path::new(env!("CARGO_TARGET_TMPDIR")).join("lean");
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn compile(name: &str, source: &str) -> PathBuf {
    use std::sync::atomic::{AtomicUsize, Ordering};
    static SEQ: AtomicUsize = AtomicUsize::new(0);
    let id = format!("{name}-{}-{}", std::process::id(), SEQ.fetch_add(1, Ordering::Relaxed));
    let c = dir().join(format!("{id}.c"));
    std::fs::write(&c, source).unwrap();
    let so = dir().join(format!("lib{id}.so"));
    let include = concat!(env!("CARGO_MANIFEST_DIR"), "/include");
    let cc = std::env::var("CC").unwrap_or_else(|_| "cc".into());
    let out =
        Command::new(&cc).args(["-shared", "-fPIC", "-O2", "-I", include, "-o"]).arg(&so).arg(&c).output().unwrap();
    assert!(out.status.success(), "{cc}: {}", String::from_utf8_lossy(&out.stderr));
    so
}

/// Builds the model. The blob starts on a page; the JSON is padded so that w1's data is
/// 128-byte aligned (used in place) and w2's is not (copied, its pages given back).
fn model() -> Model {
    // Blob layout: [len 8][count 8][key "GraphExecutorFactory"][json][nparams 8][names]
    //              [record w1][record w2][module name]["_lib"]["_import_tree" ...]
    let key = b"GraphExecutorFactory";
    let mut names = Vec::new();
    put_u64(&mut names, 2);
    put_str(&mut names, b"w1");
    put_str(&mut names, b"w2");
    let before_json = 8 + 8 + 8 + key.len() + 8;
    let after_json = 8 + names.len() + RECORD_HEAD;
    let unpadded = before_json + graph_json(0).len() + after_json;
    let pad = (128 - unpadded % 128) % 128;
    let json = graph_json(pad);
    let mut entry = Vec::new();
    put_str(&mut entry, json.as_bytes());
    put_u64(&mut entry, 2);
    entry.extend_from_slice(&names);
    entry.extend_from_slice(&record(&w1()));
    entry.extend_from_slice(&record(&w2()));
    put_str(&mut entry, b"default");
    let mut payload = Vec::new();
    put_u64(&mut payload, 3);
    put_str(&mut payload, key);
    payload.extend_from_slice(&entry);
    put_str(&mut payload, b"_lib");
    put_str(&mut payload, b"_import_tree");
    for v in [&[0u64, 1, 1][..], &[1u64][..]] {
        put_u64(&mut payload, v.len() as u64);
        v.iter().for_each(|x| put_u64(&mut payload, *x));
    }
    let mut blob = Vec::new();
    put_u64(&mut blob, payload.len() as u64);
    blob.extend_from_slice(&payload);
    let w1_at = before_json + json.len() + after_json;
    assert_eq!(w1_at % 128, 0);
    assert_eq!(&blob[w1_at..w1_at + 8], &f32_bytes(&w1()[..2])[..]);
    let w2_at = w1_at + N * 4 + RECORD_HEAD;
    assert_ne!(w2_at % 128, 0);
    assert_eq!(&blob[w2_at..w2_at + 8], &f32_bytes(&w2()[..2])[..]);

    // Every call writes its own files: tests run in parallel.
    static SEQ: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let id = format!("{}-{}", std::process::id(), SEQ.fetch_add(1, std::sync::atomic::Ordering::Relaxed));
    let bin = dir().join(format!("blob-{id}.bin"));
    std::fs::write(&bin, &blob).unwrap();
    let asm = format!(
        "__asm__(\".section .rodata\\n.balign 4096\\n.globl __tvm_dev_mblob\\n.type __tvm_dev_mblob, @object\\n\
         __tvm_dev_mblob:\\n.incbin \\\"{}\\\"\\n.size __tvm_dev_mblob, .-__tvm_dev_mblob\\n.previous\\n\");\n",
        bin.display()
    );
    let so = compile("lean-model", &format!("{KERNEL}\n{asm}"));
    let lib_only = compile("lean-lib", KERNEL);
    let mut params = Vec::new();
    put_u64(&mut params, 0xF7E5_8D4F_0504_9CB7);
    put_u64(&mut params, 0);
    params.extend_from_slice(&names);
    put_u64(&mut params, 2);
    params.extend_from_slice(&record(&w1()));
    params.extend_from_slice(&record(&w2()));
    let params_path = dir().join(format!("lean-{id}.params"));
    std::fs::write(&params_path, params).unwrap();
    Model { so, lib_only, json, params: params_path, factory_entry: entry, w1_at, w2_at }
}

fn blob_address(so: &Path) -> usize {
    let c = CString::new(so.to_str().unwrap()).unwrap();
    // SAFETY: the library is loaded already (RTLD_NOLOAD); only a symbol address is read.
    unsafe {
        let h = libc::dlopen(c.as_ptr(), libc::RTLD_NOW | libc::RTLD_NOLOAD);
        assert!(!h.is_null(), "{} is not loaded", so.display());
        let a = libc::dlsym(h, c"__tvm_dev_mblob".as_ptr());
        libc::dlclose(h);
        a as usize
    }
}

/// Whether every whole page of `[at, at + len)` is (`true`) or is not (`false`) resident,
/// except within 128 kB of either end: reading bytes next to the range (a record header) makes
/// the kernel map the neighbouring pages that are in the page cache ("fault-around", 64 kB).
fn pages_resident(at: usize, len: usize, want: bool, file_page: bool) -> bool {
    let p = page_size();
    let margin = 128 << 10;
    let first = (at + margin).next_multiple_of(p);
    (first..at + len - margin).step_by(p).all(|a| {
        let r = if file_page { resident_file_page(a) } else { resident_page(a) };
        r == Some(want)
    })
}

fn executor(factory: &Mod) -> Mod {
    match call(&get_function(factory, "default", false).unwrap(), &[Arg::Device(1, 0)]) {
        Ok(Ret::Module(h)) => Mod(h),
        other => panic!("default: {other:?}"),
    }
}

fn set(ex: &Mod, name: &str, v: &[f32]) {
    let a = DevArray::from_f32(v, 1);
    call(&get_function(ex, "set_input", false).unwrap(), &[Arg::Str(name), Arg::Array(a.0.cast())]).unwrap();
}

fn run_output(ex: &Mod, idx: i64) -> Vec<f32> {
    call(&get_function(ex, "run", false).unwrap(), &[]).unwrap();
    let out = DevArray::new(&[N as i64], 2, 1);
    call(&get_function(ex, "get_output", false).unwrap(), &[Arg::Int(idx), Arg::Array(out.0.cast())]).unwrap();
    out.f32s(N)
}

fn check(ex: &Mod, w1: &[f32], w2: &[f32]) {
    set(ex, "data", &input());
    assert!(run_output(ex, 0) == expected(w1, w2), "wrong output");
}

/// `f(args..., bytes)` through `TVMFuncCall` with the last argument as `kTVMBytes`.
fn call_with_bytes(f: &Func, first: Option<&Mod>, bytes: &[u8]) -> Result<(), String> {
    let ba = TVMByteArray { data: bytes.as_ptr().cast(), size: bytes.len() };
    let mut values = Vec::new();
    let mut codes: Vec<c_int> = Vec::new();
    if let Some(m) = first {
        values.push(TVMValue { v_handle: m.0 });
        codes.push(9);
    }
    values.push(TVMValue { v_handle: (&ba as *const TVMByteArray).cast_mut().cast::<c_void>() });
    codes.push(12);
    let mut rv = TVMValue { v_int64: 0 };
    let mut rc: c_int = 0;
    // SAFETY: live function; arrays of equal length; `ba` outlives the call.
    let st = unsafe {
        api::TVMFuncCall(f.0, values.as_mut_ptr(), codes.as_mut_ptr(), values.len() as c_int, &mut rv, &mut rc)
    };
    if st == 0 {
        Ok(())
    } else {
        Err(last_error())
    }
}

fn create_from_json(json: &str, lib: &Mod) -> Mod {
    match call_global("tvm.graph_executor.create", &[Arg::Str(json), Arg::Module(lib), Arg::Int(1), Arg::Int(0)]) {
        Ok(Ret::Module(h)) => Mod(h),
        other => panic!("tvm.graph_executor.create: {other:?}"),
    }
}

#[test]
fn factory_weights_are_copied_once_or_used_in_place() {
    let m = model();
    let factory = load(&m.so).unwrap();
    let blob = blob_address(&m.so);
    // w2 was copied out during the load and its pages given back; w1 was not touched.
    assert!(pages_resident(blob + m.w2_at, N * 4, false, false), "w2's pages were kept");
    assert!(pages_resident(blob + m.w1_at, N * 4, false, false), "w1 was read during the load");
    let e1 = executor(&factory);
    check(&e1, &w1(), &w2());
    // The kernel read w1 in place: its pages are now resident file pages of the library.
    assert!(pages_resident(blob + m.w1_at, N * 4, true, true), "w1 was not used in place");
    assert!(pages_resident(blob + m.w2_at, N * 4, false, false), "w2 was read from the blob");

    // A second executor, made after the release, sees the same weights.
    let e2 = executor(&factory);
    check(&e2, &w1(), &w2());
    // Writing a shared weight gives that executor its own copy: the others are unaffected,
    // also for the weight used in place (read-only memory).
    let ones = vec![1.0f32; N];
    set(&e2, "w1", &ones);
    set(&e2, "w2", &ones);
    check(&e2, &ones, &ones);
    check(&e1, &w1(), &w2());
    check(&executor(&factory), &w1(), &w2());

    // get_output of an output that is a weight: a view callers may write through.
    let out = match call(&get_function(&e1, "get_output", false).unwrap(), &[Arg::Int(1)]).unwrap() {
        Ret::Other(13, h) => DevArray(h as usize as *mut tvm_runtime::abi::DLTensor),
        other => panic!("get_output: {other:?}"),
    };
    assert_eq!(out.f32s(N), w1());
    let twos = vec![2.0f32; N];
    out.write(twos.as_ptr().cast(), N * 4);
    // As in TVM, the executor now computes with what was written; no other executor does.
    check(&e1, &twos, &w2());
    check(&e2, &ones, &ones);
    check(&executor(&factory), &w1(), &w2());
}

#[test]
fn library_loaded_twice_and_again_after_unloading() {
    let m = model();
    let a = load(&m.so).unwrap();
    let b = load(&m.so).unwrap();
    check(&executor(&a), &w1(), &w2());
    check(&executor(&b), &w1(), &w2());
    drop(a);
    check(&executor(&b), &w1(), &w2());
    drop(b);
    let c = load(&m.so).unwrap();
    check(&executor(&c), &w1(), &w2());
}

#[test]
fn export_after_the_blob_was_given_back() {
    tvm_runtime::classic_api::slots::install().unwrap();
    let m = model();
    let root = tvm_runtime::module::load_from_file(m.so.to_str().unwrap(), "").unwrap();
    assert_eq!(root.type_key(), "GraphExecutorFactory");
    // SaveToBinary reads the weights (one in place, one copied): the stored entry, byte for byte.
    assert!(root.node().save_to_binary().unwrap() == m.factory_entry);
}

#[test]
fn library_loaded_from_a_memfd() {
    let m = model();
    let bytes = std::fs::read(&m.so).unwrap();
    // SAFETY: a new anonymous file; checked below.
    let fd = unsafe { libc::memfd_create(c"lean-model".as_ptr(), 0) };
    assert!(fd >= 0);
    // SAFETY: `fd` is ours; writes `bytes.len()` bytes from a live buffer.
    assert_eq!(unsafe { libc::write(fd, bytes.as_ptr().cast(), bytes.len()) }, bytes.len() as isize);
    let path = format!("/proc/self/fd/{fd}");
    let p = CString::new(path.clone()).unwrap();
    let mut h = std::ptr::null_mut();
    // SAFETY: valid strings and out-pointer.
    assert_eq!(unsafe { api::TVMModLoadFromFile(p.as_ptr(), c"so".as_ptr(), &mut h) }, 0, "{}", last_error());
    let factory = Mod(h);
    let blob = blob_address(Path::new(&path));
    assert!(pages_resident(blob + m.w2_at, N * 4, false, false), "w2's pages were kept");
    check(&executor(&factory), &w1(), &w2());
    drop(factory);
    // SAFETY: our descriptor.
    unsafe { libc::close(fd) };
}

#[test]
fn split_form_params_from_a_mapped_file_or_the_heap() {
    let m = model();
    let lib = load(&m.lib_only).unwrap();
    let ex = create_from_json(&m.json, &lib);
    let load_params = get_function(&ex, "load_params", false).unwrap();
    let file = std::fs::File::open(&m.params).unwrap();
    let len = file.metadata().unwrap().len() as usize;
    // SAFETY: a read-only private mapping of an open file; checked below.
    let p = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            len,
            libc::PROT_READ,
            libc::MAP_PRIVATE,
            std::os::fd::AsRawFd::as_raw_fd(&file),
            0,
        )
    };
    assert_ne!(p, libc::MAP_FAILED);
    // SAFETY: `len` readable bytes while mapped.
    let mapped = unsafe { std::slice::from_raw_parts(p.cast::<u8>(), len) };
    call_with_bytes(&load_params, None, mapped).unwrap();
    // The mapping's pages were copied and given back; reading them again gives the file.
    assert!(pages_resident(p as usize, len, false, false), "the params file stays resident");
    assert!(mapped == std::fs::read(&m.params).unwrap());
    check(&ex, &w1(), &w2());
    // SAFETY: our mapping.
    unsafe { libc::munmap(p, len) };
    // From the heap: nothing is given back, the caller's bytes are untouched.
    let heap = std::fs::read(&m.params).unwrap();
    let ex2 = create_from_json(&m.json, &lib);
    call_with_bytes(&get_function(&ex2, "load_params", false).unwrap(), None, &heap).unwrap();
    assert!(heap == std::fs::read(&m.params).unwrap());
    check(&ex2, &w1(), &w2());
    // A damaged file changes nothing: every record is checked before any is applied.
    let ones = vec![1.0f32; N];
    set(&ex2, "w1", &ones);
    let e =
        call_with_bytes(&get_function(&ex2, "load_params", false).unwrap(), None, &heap[..heap.len() - 1]).unwrap_err();
    assert!(e.contains("param w2"), "{e}");
    check(&ex2, &ones, &w2());
}

#[test]
fn share_params_over_factory_weights_keeps_tvm_semantics() {
    let m = model();
    let factory = load(&m.so).unwrap();
    let a = executor(&factory);
    let lib = import(&factory, 0);
    let b = create_from_json(&m.json, &lib);
    // share_params reads the names of a params blob.
    let params = std::fs::read(&m.params).unwrap();
    call_with_bytes(&get_function(&b, "share_params", false).unwrap(), Some(&a), &params).unwrap();
    check(&b, &w1(), &w2());
    // As in TVM the two executors share their weights: a write through one reaches the other ...
    let ones = vec![1.0f32; N];
    set(&b, "w1", &ones);
    check(&a, &ones, &w2());
    // ... but not the factory's other executors.
    check(&executor(&factory), &w1(), &w2());
}

#[test]
fn graph_params_handed_out_are_writable_and_reach_only_later_executors() {
    let m = model();
    let factory = load(&m.so).unwrap();
    let before = executor(&factory);
    let params = match call(&get_function(&factory, "get_graph_params", false).unwrap(), &[]).unwrap() {
        Ret::Other(8, h) => h as usize as *mut c_void,
        other => panic!("get_graph_params: {other:?}"),
    };
    let get_item = global("runtime.MapGetItem").unwrap();
    let item = |name: &str| {
        let key = CString::new(name).unwrap();
        let mut values = [TVMValue { v_handle: params }, TVMValue { v_str: key.as_ptr() }];
        let mut codes: [c_int; 2] = [8, 11];
        let mut rv = TVMValue { v_int64: 0 };
        let mut rc: c_int = 0;
        // SAFETY: live function and map; arrays of equal length.
        let st = unsafe { api::TVMFuncCall(get_item.0, values.as_mut_ptr(), codes.as_mut_ptr(), 2, &mut rv, &mut rc) };
        assert_eq!((st, rc), (0, 13), "{}", last_error());
        // SAFETY: code 13 carries an owned NDArray handle.
        DevArray(unsafe { rv.v_handle }.cast())
    };
    // w1 was used in place (read-only memory): what is handed out is a writable copy.
    let w1_out = item("w1");
    assert_eq!(w1_out.f32s(N), w1());
    let threes = vec![3.0f32; N];
    w1_out.write(threes.as_ptr().cast(), N * 4);
    // The same arrays on a second call.
    assert_eq!(item("w1").f32s(N), threes);
    // Executors made afterwards see the write, the one made before does not (as in TVM).
    check(&executor(&factory), &threes, &w2());
    check(&before, &w1(), &w2());
    // SAFETY: an owned map handle.
    assert_eq!(unsafe { tvm_runtime::classic_api::object::TVMObjectFree(params) }, 0);
}

// ---------------------------------------------------------------------------------------------
// Peak resident set of TVM's resnet18 in a fresh process.

/// Runs in the child process only (`LEAN_CHILD` set): load, create, run resnet18; prints
/// `VmHWM` and the weights' size.
#[test]
fn child_process_entry() {
    let Ok(model) = std::env::var("LEAN_CHILD") else { return };
    let fx = fixtures_dir().unwrap();
    let factory = load(&fx.join(format!("{model}.so"))).unwrap();
    let ex = executor(&factory);
    let (shape, data) = read_npy_f32(&fx.join(format!("{model}.input.data.npy")));
    let x = DevArray::new(&shape, 2, 1);
    x.write(data.as_ptr().cast(), data.len());
    call(&get_function(&ex, "set_input", false).unwrap(), &[Arg::Str("data"), Arg::Array(x.0.cast())]).unwrap();
    call(&get_function(&ex, "run", false).unwrap(), &[]).unwrap();
    let (oshape, want) = read_npy_f32(&fx.join(format!("{model}.output.0.npy")));
    let y = DevArray::new(&oshape, 2, 1);
    call(&get_function(&ex, "get_output", false).unwrap(), &[Arg::Int(0), Arg::Array(y.0.cast())]).unwrap();
    let got = y.f32s(want.len() / 4);
    for (g, w) in got.iter().zip(want.chunks(4)) {
        let w = f32::from_le_bytes(w.try_into().unwrap());
        assert!((g - w).abs() <= 1e-4 + 1e-3 * w.abs(), "{g} vs {w}");
    }
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    let hwm = status.lines().find(|l| l.starts_with("VmHWM:")).unwrap().split_whitespace().nth(1).unwrap().to_owned();
    println!("LEAN_PEAK_KB {hwm}");
}

#[test]
fn resnet18_holds_its_weights_once() {
    let Some(so) = fixture("resnet18.so") else { return };
    // The weights: the blob's size is their size to within the graph JSON (~30 kB).
    let weights_kb = std::fs::metadata(&so).unwrap().len() / 1024;
    let out = Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "child_process_entry", "--nocapture", "--test-threads=1"])
        .env("LEAN_CHILD", "resnet18")
        .env("TVM_NUM_THREADS", "2")
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "child failed: {text}\n{}", String::from_utf8_lossy(&out.stderr));
    let peak: u64 = text
        .lines()
        .find_map(|l| l.split("LEAN_PEAK_KB ").nth(1))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
        .unwrap_or_else(|| panic!("no peak in {text}"));
    // Once: weights + activations (5 MB) + code and the test process (~15 MB) ~ 66 MB. Held
    // twice (the blob's pages beside the copies) it would be above 95 MB.
    println!("resnet18 peak {peak} kB, weights {weights_kb} kB");
    assert!(peak < weights_kb + 30 * 1024, "peak RSS {peak} kB with {weights_kb} kB of weights: held twice?");
}
