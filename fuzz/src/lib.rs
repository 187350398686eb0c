//! The harnesses behind the fuzz targets in `fuzz_targets/`, one function per parser entry point.
//!
//! Each harness feeds the bytes to the runtime's own entry point (the registered global or module
//! function the C API reaches, called without the C guard, so that a panic is reported as a
//! crash instead of being turned into an error), then checks what a successful parse promises:
//! writing back what was read and reading it again gives the same thing.
//!
//! The process-wide allocator refuses single Rust allocations above [`ALLOC_CAP`] and aborts
//! with a message, so that an allocation sized by the input without a check is a crash that
//! libFuzzer records (its own `-malloc_limit_mb` needs sanitizer hooks, which a stable build
//! without sanitizers lacks; `-rss_limit_mb` still watches the resident size).

use std::alloc::{GlobalAlloc, Layout, System};
use std::any::Any;
use std::io::Write;
use tvm_runtime::abi::DLDevice;
use tvm_runtime::device;
use tvm_runtime::error::Result;
use tvm_runtime::executor::graph::json::Graph;
use tvm_runtime::function::PackedFunc;
use tvm_runtime::io::{Reader, Writer};
use tvm_runtime::module::{blob, Module, ModuleNode};
use tvm_runtime::ndarray::serialize::{load_ndarray, load_params, save_ndarray, save_params};
use tvm_runtime::ndarray::NDArray;
use tvm_runtime::registry;
use tvm_runtime::value::{code, Value};

/// The largest single allocation a target may make (2 GiB).
pub const ALLOC_CAP: usize = 2 << 30;

/// Graphs whose entries need more than this are parsed but not instantiated (the fuzzer looks
/// for parser bugs, not for models that are merely large).
pub const GRAPH_CREATE_CAP: usize = 256 << 20;

/// Graphs whose entries need more than this are instantiated but not run.
pub const GRAPH_RUN_CAP: usize = 16 << 20;

/// The system allocator with a cap on one allocation.
struct Capped;

fn over_cap(size: usize) -> ! {
    // No allocation here: a fixed message, then the number through a stack buffer.
    let mut buf = [0u8; 20];
    let mut i = buf.len();
    let mut n = size;
    loop {
        i -= 1;
        buf[i] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    let mut err = std::io::stderr().lock();
    for part in [&b"==fuzz== allocation above the 2 GiB cap: "[..], &buf[i..], b" bytes\n"] {
        let _ = err.write_all(part);
    }
    std::process::abort()
}

// SAFETY: forwards every call to the system allocator unchanged, after the size check.
unsafe impl GlobalAlloc for Capped {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        if layout.size() > ALLOC_CAP {
            over_cap(layout.size());
        }
        // SAFETY: same contract as ours.
        unsafe { System.alloc(layout) }
    }
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        if layout.size() > ALLOC_CAP {
            over_cap(layout.size());
        }
        // SAFETY: same contract as ours.
        unsafe { System.alloc_zeroed(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: same contract as ours.
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        if new_size > ALLOC_CAP {
            over_cap(new_size);
        }
        // SAFETY: same contract as ours.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static ALLOC: Capped = Capped;

const CPU0: DLDevice = DLDevice { device_type: 1, device_id: 0 };

/// A global function of the runtime (all are registered on first use of the registry).
fn global(name: &str) -> PackedFunc {
    registry::get(name).unwrap_or_else(|| panic!("global {name} is not registered"))
}

/// Zeroes every CPU tensor argument it is given, byte for byte, so that a tensor that is larger
/// than the memory behind it touches memory it should not (a crash, or a report under a
/// sanitizer build).
fn touch_tensors(a: &tvm_runtime::value::Args<'_>) -> Result<Value> {
    for i in 0..a.len() {
        if !matches!(a.code(i)?, code::DLTENSOR | code::NDARRAY) {
            continue;
        }
        let p = a.dltensor(i)?;
        // SAFETY: the callers (graph executor, VM) pass live tensors for the call.
        let Some(t) = (unsafe { p.as_ref() }) else { continue };
        if t.device.device_type != 1 || t.data.is_null() || !device::is_contiguous(t) {
            continue;
        }
        let n = device::tensor_bytes(t)?;
        // SAFETY: a live contiguous CPU tensor owns `n` bytes from `data + byte_offset`.
        unsafe { std::ptr::write_bytes(t.data.cast::<u8>().add(t.byte_offset as usize), 0, n) };
    }
    Ok(Value::Null)
}

/// A code module that has every function: each one zeroes its tensor arguments. It stands in
/// for the model library (`_lib`) of a blob, and for the kernels of a graph or VM executable.
pub struct AnyKernel;

impl ModuleNode for AnyKernel {
    fn type_key(&self) -> &str {
        "library"
    }
    fn get_function(&self, name: &str, _this: &Module) -> Result<Option<PackedFunc>> {
        // Names the runtime asks a library for that are not kernels stay unknown.
        if name.starts_with("__tvm") || name.starts_with("_lookup_linked_param") {
            return Ok(None);
        }
        Ok(Some(PackedFunc::from_fn(touch_tensors)))
    }
    fn as_any(&self) -> &dyn Any {
        self
    }
}

fn any_kernel() -> Module {
    Module::new(AnyKernel)
}

fn func_of(m: &Module, name: &str) -> Option<PackedFunc> {
    m.get_function(name, false).ok().flatten()
}

/// Visits a module tree (imports), breadth first, at most `limit` modules.
fn walk(root: &Module, limit: usize, mut f: impl FnMut(&Module)) {
    let mut queue = std::collections::VecDeque::from([root.clone()]);
    let mut seen = 0;
    while let Some(m) = queue.pop_front() {
        f(&m);
        seen += 1;
        if seen >= limit {
            return;
        }
        queue.extend(m.imports());
    }
}

/// `blob`: the payload of a `__tvm_dev_mblob` (after its 8-byte length prefix), as the blob
/// loader of `TVMModLoadFromFile` processes it after `dlopen`: entries dispatched to every
/// registered `runtime.module.loadbinary_<key>` and the import tree.
pub fn blob(data: &[u8]) {
    let Ok(tree) = blob::process(data, &any_kernel) else { return };
    walk(&tree.root, 64, |m| {
        let _ = m.type_key();
        if let Some(f) = func_of(m, "get_graph_json") {
            let _ = f.call(&[]);
        }
        if let Some(f) = func_of(m, "get_bytecode") {
            let _ = f.call(&[]);
        }
        if let Ok(bytes) = m.node().save_to_binary() {
            let _ = bytes.len();
        }
    });
    // The framing: the same payload behind its length prefix.
    let mut framed = (data.len() as u64).to_le_bytes().to_vec();
    framed.extend_from_slice(data);
    assert_eq!(blob::frame(&framed).ok(), Some(data));
}

/// One blob entry of type `key` whose data is `data` (what a model library holds for a device
/// or executable module), loaded through the blob loader.
fn load_entry(key: &str, data: &[u8]) -> Result<Module> {
    let mut payload = Writer::default();
    payload.u64(1);
    payload.str_bytes(key.as_bytes());
    payload.bytes(data);
    let tree = blob::process(&payload.buf, &any_kernel)?;
    let m = tree.root.imports().into_iter().next();
    Ok(m.unwrap_or_else(|| panic!("the {key} entry made no module")))
}

/// `params`: a params file through `runtime.LoadParams` (what `load_params` and
/// `tvm.runtime.load_param_dict` call), then written back and read again.
pub fn params(data: &[u8]) {
    let via_global = global("runtime.LoadParams").call(&[Value::bytes(data.to_vec())]);
    let direct = load_params(data);
    assert_eq!(via_global.is_ok(), direct.is_ok(), "runtime.LoadParams and load_params disagree");
    let Ok(arrays) = direct else { return };
    let saved = save_params(&arrays).expect("saving loaded params");
    let again = load_params(&saved).expect("reading saved params");
    assert_eq!(arrays.len(), again.len());
    for ((n1, a1), (n2, a2)) in arrays.iter().zip(&again) {
        assert_eq!(n1, n2);
        same_array(a1, a2);
    }
    assert_eq!(save_params(&again).expect("saving again"), saved);
    let _ = tvm_runtime::ndarray::serialize::load_param_names(data).expect("names of loadable params");
}

fn same_array(a: &NDArray, b: &NDArray) {
    assert_eq!(a.shape(), b.shape());
    assert_eq!(a.dtype(), b.dtype());
    assert_eq!(a.to_bytes().expect("bytes"), b.to_bytes().expect("bytes"));
}

/// `ndarray_record`: one NDArray record (the unit of params files, factory payloads and VM
/// constants), then written back and read again.
pub fn ndarray_record(data: &[u8]) {
    let mut r = Reader::new(data, "NDArray record");
    let Ok(a) = load_ndarray(&mut r) else { return };
    let mut w = Writer::default();
    save_ndarray(&mut w, &a).expect("saving a loaded array");
    let b = load_ndarray(&mut Reader::new(&w.buf, "NDArray record")).expect("reading a saved array");
    same_array(&a, &b);
}

/// The bytes the graph's entries need (saturating; entries whose size cannot be computed count 0).
fn graph_bytes(g: &Graph) -> usize {
    g.shape
        .iter()
        .zip(&g.dltype)
        .map(|(s, &t)| device::shape_bytes(s, t).unwrap_or(0))
        .fold(0usize, usize::saturating_add)
}

/// `graph_json`: a graph JSON text through `tvm.graph_executor.create` with a code module that
/// has every kernel, then every input set, the graph run and every output read.
pub fn graph_json(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else { return };
    let Ok(g) = Graph::parse(text) else { return };
    let bytes = graph_bytes(&g);
    if bytes > GRAPH_CREATE_CAP {
        return;
    }
    let created = global("tvm.graph_executor.create").call(&[
        Value::str(text),
        Value::Module(any_kernel()),
        Value::Int(1),
        Value::Int(0),
    ]);
    let Ok(Value::Module(m)) = created else { return };
    let call = |name: &str, args: &[Value]| -> Result<Value> {
        func_of(&m, name).unwrap_or_else(|| panic!("graph executor lacks {name}")).call(args)
    };
    let count = |name: &str| match call(name, &[]) {
        Ok(Value::Int(n)) => usize::try_from(n).expect("a count"),
        other => panic!("{name} returned {other:?}"),
    };
    let (n_in, n_out) = (count("get_num_inputs"), count("get_num_outputs"));
    for i in 0..n_in {
        // Graphs may use data types that TVMArrayAlloc refuses (as in TVM): no input array then.
        if let Ok(Value::NDArray(a)) = call("get_input", &[Value::Int(i as i64)]) {
            if let Ok(copy) = NDArray::empty(a.shape(), a.dtype(), CPU0) {
                call("set_input", &[Value::Int(i as i64), Value::NDArray(copy)]).expect("set_input of its own shape");
            }
        }
    }
    if bytes <= GRAPH_RUN_CAP {
        call("run", &[]).expect("running a graph of kernels that cannot fail");
    }
    for i in 0..n_out {
        let _ = call("get_output", &[Value::Int(i as i64)]);
    }
    assert!(call("get_output", &[Value::Int(n_out as i64)]).is_err());
}

/// `opencl_payload`: the blob entry of an `opencl` module (format, function map, source),
/// through `runtime.module.loadbinary_opencl`, then saved and loaded again. The driver is
/// not touched.
pub fn opencl_payload(data: &[u8]) {
    device_payload("opencl", data);
}

/// `cuda_payload`: the blob entry of a `cuda` module (format, function map, PTX/cubin/fatbin
/// image) through `runtime.module.loadbinary_cuda`, saved and loaded again; the image's
/// architectures read as a GPU load reads them, and each kernel's signature checked.
pub fn cuda_payload(data: &[u8]) {
    device_payload("cuda", data);
    if let Ok((_, fmap, image)) = tvm_runtime::device::kernel::read_payload(&mut Reader::new(data, "cuda")) {
        let _ = tvm_runtime::device::cuda::module::image_archs(&image);
        let _ = tvm_runtime::device::cuda::module::arch_mismatch(&image, 70, "7.0");
        for (name, info) in &fmap {
            let _ = tvm_runtime::device::kernel::KernelSig::new(name, info);
        }
    }
}

fn device_payload(key: &str, data: &[u8]) {
    let Ok(m) = load_entry(key, data) else { return };
    assert_eq!(m.type_key(), key);
    let saved = m.node().save_to_binary().expect("saving a loaded device module");
    let again = load_entry(key, &saved).expect("loading a saved device module");
    assert_eq!(again.node().save_to_binary().expect("saving again"), saved);
}

/// `kernel_meta`: a `.tvm_meta.json` side file (kernel names, argument types, launch tags), each
/// kernel's signature and launch tags checked as a launch checks them, then written back and
/// read again.
pub fn kernel_meta(data: &[u8]) {
    use tvm_runtime::device::kernel;
    let Ok(text) = std::str::from_utf8(data) else { return };
    let Ok(m) = kernel::parse_meta_json(text) else { return };
    for (name, info) in &m {
        let _ = kernel::KernelSig::new(name, info);
    }
    // Formatting normalises (a `handle` of any width prints as `handle`, as in TVM), so the
    // text must be a fixed point after one round.
    let once = kernel::meta_json(&m).expect("formatting parsed metadata");
    let m1 = kernel::parse_meta_json(&once).expect("reading formatted metadata");
    let twice = kernel::meta_json(&m1).expect("formatting again");
    assert_eq!(once, twice);
    assert_eq!(m1.keys().collect::<Vec<_>>(), m.keys().collect::<Vec<_>>());
}

/// `vm_executable`: the bytes of `exe.save()` through `runtime.Load_Executable` with a kernel
/// library that has every primitive, the executable's functions that read it, a VM made from
/// it (primitives resolved, devices initialised), then saved and loaded again byte for byte.
pub fn vm_executable(data: &[u8]) {
    let load = global("runtime.Load_Executable");
    let Ok(Value::Module(exe)) = load.call(&[Value::bytes(data.to_vec()), Value::Module(any_kernel())]) else {
        return;
    };
    for name in ["get_bytecode", "get_constants", "get_stats"] {
        let f = func_of(&exe, name).unwrap_or_else(|| panic!("executable lacks {name}"));
        assert!(matches!(f.call(&[]), Ok(Value::Str(_))), "{name} of a loaded executable");
    }
    if let Ok(Value::Int(n)) = global("runtime.GetNumOfGlobals").call(&[Value::Module(exe.clone())]) {
        for i in 0..n.min(64) {
            if let Ok(Value::Str(g)) =
                global("runtime.GetGlobalFields").call(&[Value::Module(exe.clone()), Value::Int(i)])
            {
                let arity = func_of(&exe, "get_function_arity").expect("get_function_arity");
                if let Ok(Value::Int(k)) = arity.call(&[Value::str(g.as_str())]) {
                    let pname = func_of(&exe, "get_function_param_name").expect("get_function_param_name");
                    for j in 0..k.min(64) {
                        let _ = pname.call(&[Value::str(g.as_str()), Value::Int(j)]);
                    }
                }
            }
        }
    }
    if let Ok(Value::Module(vm)) = global("runtime._VirtualMachine").call(&[Value::Module(exe.clone())]) {
        if let Some(init) = func_of(&vm, "init") {
            let _ = init.call(&[Value::Int(1), Value::Int(0), Value::Int(1)]);
        }
    }
    let save = func_of(&exe, "save").expect("executable lacks save");
    let Ok(Value::Bytes(saved)) = save.call(&[]) else { panic!("save of a loaded executable failed") };
    let Ok(Value::Module(again)) = load.call(&[Value::bytes(saved.to_vec()), Value::Module(any_kernel())]) else {
        panic!("a saved executable does not load again")
    };
    let Ok(Value::Bytes(resaved)) = func_of(&again, "save").expect("save").call(&[]) else { panic!("save again") };
    assert_eq!(resaved, saved, "save(load(save(x))) differs from save(x)");
}

/// `relax_library_bin`: the bytes of a `__tvm_ffi__library_bin` symbol (size header and module
/// tree of a TVM v0.22+ export) through the tree parser; a parsed tree writes back to exactly the
/// bytes it covers, and each `relax.VMExecutable` in it goes through [`relax_executable`].
pub fn relax_library_bin(data: &[u8]) {
    use tvm_runtime::module::library_bin::{LibraryBin, VM_EXECUTABLE_KIND};
    let Ok(bin) = LibraryBin::parse(data) else { return };
    let out = bin.to_bytes();
    assert_eq!(out[..], data[..out.len()], "a parsed tree writes back differently");
    assert!(bin.root().imports.iter().all(|&c| c > 0 && c < bin.modules.len()));
    for (_, m) in bin.of_kind(VM_EXECUTABLE_KIND) {
        relax_executable(m.payload.expect("an executable has bytes"));
    }
}

/// `relax_executable`: the bytes of a Relax VM executable (v0.22+ `SaveToBytes`, or the classic
/// v0.14-v0.20 one) through the checked loader in both constant dialects; what loads saves, and
/// the saved bytes load to the same executable and save the same.
pub fn relax_executable(data: &[u8]) {
    use tvm_runtime::relax::executable::{Dialect, Executable};
    for dialect in [Dialect::Ffi, Dialect::Classic] {
        let Ok(e) = Executable::load_as(data, dialect) else { continue };
        for f in &e.functions {
            let _ = e.code(f);
        }
        let saved = e.save();
        let again = Executable::load_as(&saved, dialect).expect("a saved executable does not load again");
        assert_eq!(again, e, "load(save(x)) differs from x");
        assert_eq!(again.save(), saved, "save(load(save(x))) differs from save(x)");
    }
}

/// `aot_factory`: the blob entry of an `AotExecutorFactory` (TVM v0.9+ AOT exports: params and
/// module name) through `runtime.module.loadbinary_AotExecutorFactory`, then saved and loaded
/// again where the module can be saved.
pub fn aot_factory(data: &[u8]) {
    let Ok(m) = load_entry("AotExecutorFactory", data) else { return };
    assert_eq!(m.type_key(), "AotExecutorFactory");
    if let Ok(saved) = m.node().save_to_binary() {
        let again = load_entry("AotExecutorFactory", &saved).expect("loading a saved AOT factory");
        assert_eq!(again.node().save_to_binary().expect("saving again"), saved);
    }
}

/// `metadata`: the blob entry of a BYOC `metadata` module (v0.8; `const_loader` in v0.9+: same
/// payload): its constants and the constant names of each offloaded region, through
/// `runtime.module.loadbinary_metadata`, then saved and loaded again. The regions' modules are
/// absent here (the blob has only this entry), so initialisation is not reached: what is
/// fuzzed is the payload and its checks.
pub fn metadata(data: &[u8]) {
    for key in ["metadata", "const_loader"] {
        let Ok(m) = load_entry(key, data) else { continue };
        assert_eq!(m.type_key(), key);
        let saved = m.node().save_to_binary().expect("saving a loaded metadata module");
        let again = load_entry(key, &saved).expect("loading a saved metadata module");
        assert_eq!(again.node().save_to_binary().expect("saving again"), saved);
    }
}

/// `json_runtime`: the payload of a JSON runtime module (symbol, graph JSON, constant names) as
/// a `dnnl_json` entry holds it: read, the graph parsed and checked by the JSON runtime base,
/// then each node checked by the DNNL backend's operator analysis (shapes, attributes, arity).
/// oneDNN itself is not called: building its primitives is the library's work, not a parser.
pub fn json_runtime(data: &[u8]) {
    use tvm_runtime::byoc::json::{graph::Graph, read_payload};
    let mut r = Reader::new(data, "json runtime payload");
    let Ok((_symbol, json, consts)) = read_payload(&mut r) else { return };
    let Ok(g) = Graph::parse(&json, &consts) else { return };
    assert!(g.num_entries() >= g.nodes.len(), "a parsed graph has fewer entries than nodes");
    let _ = tvm_runtime::byoc::dnnl::ops::analyze(&g);
}

/// `rpc_packet`: one RPC packet body (code and payload, after the `u64` length) through the
/// decoder both sides use; a decoded call, return, init or system call is encoded again and must
/// decode to the same bytes. Also the split `kCopyToRemote` head reader and the length check.
pub fn rpc_packet(data: &[u8]) {
    use tvm_runtime::rpc::codec::{self, Packet};
    if let Some(head) = data.get(..8) {
        let mut h = [0u8; 8];
        h.copy_from_slice(head);
        let _ = codec::packet_len(h, 1 << 30);
    }
    let _ = codec::copy_to_remote_head_len(data);
    let _ = codec::decode_copy_to_remote_head(data);
    let Ok(p) = codec::decode_packet(data) else { return };
    let mut out = Vec::new();
    let encoded = match &p {
        Packet::CallFunc { handle, args } => codec::encode_call(&mut out, *handle, args),
        Packet::Return(vals) => codec::encode_return(&mut out, vals),
        Packet::InitServer { args, .. } => codec::encode_init_server(&mut out, args),
        Packet::Syscall { code, args } => codec::encode_syscall(&mut out, *code, args),
        Packet::CopyFromRemote { tensor, nbytes } => codec::encode_copy_from_remote(&mut out, tensor, *nbytes),
        Packet::Exception(msg) => {
            codec::encode_exception(&mut out, msg);
            Ok(())
        }
        _ => return,
    };
    if encoded.is_err() {
        return;
    }
    // `out` is framed: the u64 length, then the body.
    let body = out.get(8..).expect("a framed packet");
    let again = codec::decode_packet(body).expect("decoding an encoded packet");
    let mut out2 = Vec::new();
    match &again {
        Packet::CallFunc { handle, args } => codec::encode_call(&mut out2, *handle, args),
        Packet::Return(vals) => codec::encode_return(&mut out2, vals),
        Packet::InitServer { args, .. } => codec::encode_init_server(&mut out2, args),
        Packet::Syscall { code, args } => codec::encode_syscall(&mut out2, *code, args),
        Packet::CopyFromRemote { tensor, nbytes } => codec::encode_copy_from_remote(&mut out2, tensor, *nbytes),
        Packet::Exception(msg) => {
            codec::encode_exception(&mut out2, msg);
            Ok(())
        }
        other => panic!("re-decoded as another kind: {other:?}"),
    }
    .expect("encoding a decoded packet again");
    assert_eq!(out, out2, "encode(decode(encode(p))) differs from encode(p)");
}

/// `rpc_handshake`: what an RPC server reads before any packet: the client's magic, key length
/// and key (incomplete prefixes included), and the key's options (`client:<key> -timeout=...`).
pub fn rpc_handshake(data: &[u8]) {
    use tvm_runtime::rpc::codec;
    for cut in [data.len(), data.len() / 2, 7, 4] {
        if let Some(prefix) = data.get(..cut) {
            if let Ok(Some((key, used))) = codec::parse_client_hello(prefix, 4096) {
                assert!(used <= prefix.len());
                let k = codec::ClientKey::parse(&key);
                let _ = (k.timeout(), k.token());
                let hello = codec::encode_client_hello(&key).expect("encoding a parsed key");
                let back = codec::parse_client_hello(&hello, 1 << 20).expect("parsing an encoded hello");
                assert_eq!(back.map(|(k, _)| k), Some(key));
            }
        }
    }
    if let Ok(text) = std::str::from_utf8(data) {
        let k = codec::ClientKey::parse(text);
        let _ = (k.timeout(), k.token());
    }
}

/// Globals an RPC client may fetch in the `rpc_server` target: ones whose work is bounded by the
/// packet (no file, network or model loading, no allocation sized by a number alone).
const RPC_GLOBALS: &[&str] = &[
    "runtime.GetDeviceAttr",
    "runtime.LoadParams",
    "runtime.SaveParams",
    "runtime.Array",
    "runtime.ArraySize",
    "runtime.ArrayGetItem",
    "runtime.Map",
    "runtime.MapSize",
    "runtime.String",
    "runtime.GetFFIString",
    "runtime.ShapeTuple",
    "runtime.GetShapeTupleSize",
    "runtime.ObjectPtrHash",
];

/// Handles in a request that stand for the k-th handle the server handed out (k = MAX - value),
/// so that inputs can name functions, arrays and data spaces whose addresses they cannot know.
const HANDLE_ALIAS: u64 = u64::MAX - 63;

/// The largest allocation or copy a request may ask for in the `rpc_server` target.
const RPC_BYTES_CAP: u64 = 64 << 20;

fn rpc_alias(h: u64, handed: &[u64]) -> u64 {
    if h >= HANDLE_ALIAS {
        let k = (u64::MAX - h) as usize;
        handed.get(handed.len().wrapping_sub(1 + k)).copied().unwrap_or(h)
    } else {
        h
    }
}

/// `rpc_server`: a client's byte stream after the handshake (packets, each behind its `u64`
/// length) served by the server endpoint on a local session, as `rpc.ServerLoop` serves a
/// connection. Requests that would reach outside the process or allocate by a bare number are
/// left out (session constructors, globals not in `RPC_GLOBALS`, sizes over 64 MiB); handle
/// values near `u64::MAX` stand for handles the server returned. A panic while serving (which
/// the server turns into an exception) is a crash here.
pub fn rpc_server(data: &[u8]) {
    use tvm_runtime::rpc::codec::{self, Packet, RpcCode, WireValue};
    use tvm_runtime::rpc::endpoint::{Flow, ServerEndpoint};
    let mut ep = ServerEndpoint::new("fuzz");
    let mut out = Vec::new();
    let mut init = Vec::new();
    codec::encode_init_server(&mut init, &[]).expect("init packet");
    assert!(matches!(ep.handle_packet(&init[8..], &mut out, None), Ok(Flow::Continue)));
    let mut handed: Vec<u64> = Vec::new();
    let mut rest = data;
    while rest.len() >= 8 {
        let n = u64::from_le_bytes(rest[..8].try_into().expect("8 bytes"));
        rest = &rest[8..];
        let n = usize::try_from(n).unwrap_or(usize::MAX).min(rest.len());
        let (body, tail) = rest.split_at(n);
        rest = tail;
        let mut fixed = Vec::new();
        let body = match codec::decode_packet(body) {
            Err(_) => body,
            Ok(p) => {
                let retensor = |t: &codec::WireTensor<'_>| {
                    let mut t = t.clone().into_owned();
                    t.data = rpc_alias(t.data, &handed);
                    t
                };
                let reargs = |args: &[WireValue<'_>]| -> Vec<WireValue<'static>> {
                    args.iter()
                        .map(|v| match v {
                            WireValue::Handle(h) => WireValue::Handle(rpc_alias(*h, &handed)),
                            WireValue::Func(h) => WireValue::Func(rpc_alias(*h, &handed)),
                            WireValue::Module(h) => WireValue::Module(rpc_alias(*h, &handed)),
                            WireValue::Tensor(t) => WireValue::Tensor(retensor(t)),
                            other => other.clone().into_owned(),
                        })
                        .collect()
                };
                let ok = match &p {
                    Packet::InitServer { args, .. } => args.is_empty(),
                    Packet::Syscall { code: RpcCode::GetGlobalFunc, args } => match args.first() {
                        Some(WireValue::Str(s)) => RPC_GLOBALS.iter().any(|g| g.as_bytes() == &s[..]),
                        _ => true,
                    },
                    Packet::Syscall { code: RpcCode::DevAllocData, args } => {
                        args.get(1).and_then(WireValue::as_int).is_none_or(|n| (n as u64) <= RPC_BYTES_CAP)
                    }
                    Packet::Syscall { code: RpcCode::DevAllocDataWithScope, args } => match args.first() {
                        Some(WireValue::Tensor(t)) => t.nbytes().is_ok_and(|n| n <= RPC_BYTES_CAP),
                        _ => true,
                    },
                    Packet::CopyFromRemote { nbytes, .. } => *nbytes <= RPC_BYTES_CAP,
                    _ => true,
                };
                if !ok {
                    continue;
                }
                let r = match &p {
                    Packet::CallFunc { handle, args } => {
                        codec::encode_call(&mut fixed, rpc_alias(*handle, &handed), &reargs(args))
                    }
                    Packet::Syscall { code, args } => codec::encode_syscall(&mut fixed, *code, &reargs(args)),
                    Packet::CopyFromRemote { tensor, nbytes } => {
                        codec::encode_copy_from_remote(&mut fixed, &retensor(tensor), *nbytes)
                    }
                    Packet::CopyToRemote { tensor, data } => {
                        codec::encode_copy_to_remote_head(&mut fixed, &retensor(tensor), data.len() as u64).map(|_| {
                            fixed.extend_from_slice(data);
                            let len = (fixed.len() - 8) as u64;
                            fixed[..8].copy_from_slice(&len.to_le_bytes());
                        })
                    }
                    _ => Err(tvm_runtime::error::Error::value("as is")),
                };
                if r.is_ok() {
                    &fixed[8..]
                } else {
                    body
                }
            }
        };
        out.clear();
        let flow = ep.handle_packet(body, &mut out, None);
        let text = String::from_utf8_lossy(&out);
        assert!(!text.contains("panic inside the TVM runtime"), "the server panicked: {text}");
        // Remember the handles the server handed out (functions, modules, data spaces).
        if let Some(Ok(Packet::Return(vals))) = out.get(8..).map(codec::decode_packet) {
            for v in vals {
                match v {
                    WireValue::Handle(h) | WireValue::Func(h) | WireValue::Module(h) if h != 0 => handed.push(h),
                    WireValue::Tensor(t) => handed.push(t.data),
                    _ => {}
                }
            }
        }
        match flow {
            Ok(Flow::Continue) => {}
            _ => break,
        }
    }
}

/// `tvm_ffi_json_graph`: the tvm-ffi JSON object graph (`ffi.FromJSONGraphString`): text in, a
/// value or an error out; a value read must write back and read again.
pub fn tvm_ffi_json_graph(data: &[u8]) {
    use tvm_runtime::tvm_ffi::serialization::graph::{from_json_graph_str, to_json_graph};
    use tvm_runtime::tvm_ffi::serialization::json::stringify;
    let Ok(text) = std::str::from_utf8(data) else { return };
    let Ok(v) = from_json_graph_str(text) else { return };
    let meta = tvm_runtime::tvm_ffi::Any::none();
    if let Ok(j) = to_json_graph(&v, &meta) {
        let again = stringify(&j, 0);
        from_json_graph_str(&again).expect("a graph written from a value read does not read again");
    }
}

/// `tvm_ffi_tensor_import`: `TVMFFITensorFromDLPack[Versioned]` on a DLPack tensor made from the
/// bytes (rank, shape, strides, dtype, byte offset, data address, flags, the alignment and
/// contiguity asked for). The import never reads the data; a refused tensor keeps its owner (the
/// deleter is not called), an accepted one calls it exactly once when released.
pub fn tvm_ffi_tensor_import(data: &[u8]) {
    use std::sync::atomic::{AtomicUsize, Ordering};
    use tvm_runtime::abi::{DLDataType, DLManagedTensor, DLTensor};
    use tvm_runtime::tvm_ffi::tensor::dlpack::{DLManagedTensorVersioned, DLPackVersion};
    static DELETED: AtomicUsize = AtomicUsize::new(0);
    unsafe extern "C" fn del_v(_: *mut DLManagedTensorVersioned) {
        DELETED.fetch_add(1, Ordering::SeqCst);
    }
    unsafe extern "C" fn del(_: *mut DLManagedTensor) {
        DELETED.fetch_add(1, Ordering::SeqCst);
    }
    let mut r = data.iter().copied();
    let mut byte = || r.next().unwrap_or(0);
    let head = byte();
    let ndim = (head % 7) as usize;
    let versioned = head & 0x80 != 0;
    let with_strides = head & 0x40 != 0;
    let word = |b: &mut dyn FnMut() -> u8| -> i64 {
        let v = b() as i64;
        // small, negative and huge values all come up
        match v % 8 {
            0 => -(v >> 3),
            7 => i64::MAX - (v >> 3),
            _ => v >> 3,
        }
    };
    let mut shape = [0i64; 8];
    let mut strides = [0i64; 8];
    for s in &mut shape[..ndim] {
        *s = word(&mut byte);
    }
    for s in &mut strides[..ndim] {
        *s = word(&mut byte);
    }
    let dtype = DLDataType { code: byte() % 20, bits: byte(), lanes: (byte() as u16) | ((byte() as u16) << 8) };
    let byte_offset = (byte() as u64) << (byte() % 40);
    let addr = (0x10000usize + byte() as usize * 8 + (byte() % 8) as usize) as *mut std::ffi::c_void;
    let align = [0, 1, 2, 3, 8, 16, 64, 256][(byte() % 8) as usize];
    let contiguous = byte() & 1;
    let dl = DLTensor {
        data: addr,
        device: tvm_runtime::abi::DLDevice { device_type: [1, 2, 4, 7, 99][(byte() % 5) as usize], device_id: 0 },
        ndim: ndim as i32,
        dtype,
        shape: shape.as_mut_ptr(),
        strides: if with_strides { strides.as_mut_ptr() } else { std::ptr::null_mut() },
        byte_offset,
    };
    DELETED.store(0, Ordering::SeqCst);
    let mut out: *mut std::ffi::c_void = std::ptr::null_mut();
    let rc = if versioned {
        let mut m = DLManagedTensorVersioned {
            version: DLPackVersion { major: 1, minor: byte() as u32 },
            manager_ctx: std::ptr::null_mut(),
            deleter: Some(del_v),
            flags: byte() as u64 & 7,
            dl_tensor: dl,
        };
        // SAFETY: a valid managed tensor whose data is never read; `out` is writable.
        unsafe {
            tvm_runtime::tvm_ffi_api::tensor::TVMFFITensorFromDLPackVersioned(
                &mut m,
                align,
                contiguous as i32,
                &mut out,
            )
        }
    } else {
        let mut m = DLManagedTensor { dl_tensor: dl, manager_ctx: std::ptr::null_mut(), deleter: Some(del) };
        // SAFETY: as above.
        unsafe { tvm_runtime::tvm_ffi_api::tensor::TVMFFITensorFromDLPack(&mut m, align, contiguous as i32, &mut out) }
    };
    if rc != 0 {
        assert_eq!(DELETED.load(Ordering::SeqCst), 0, "a refused tensor was released");
        let _ = tvm_runtime::tvm_ffi::error::take_raised();
        return;
    }
    assert!(!out.is_null());
    assert_eq!(DELETED.load(Ordering::SeqCst), 0);
    // SAFETY: the import handed us one reference.
    unsafe { tvm_runtime::tvm_ffi_api::core::TVMFFIObjectDecRef(out) };
    assert_eq!(DELETED.load(Ordering::SeqCst), 1, "the producer's deleter runs once");
}
