//! Hardening: every input the fuzzers found that crashed a target (fuzz/regressions/<target>/),
//! replayed through the same entry points, and the resource bounds: sizes claimed by an input
//! fail before anything is allocated, with a message naming the field; nesting is bounded.

mod common;

use std::any::Any;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::Path;
use tvm_runtime::abi::{DLDevice, TVMByteArray, TVMValue};
use tvm_runtime::error::Result;
use tvm_runtime::executor::graph::GraphExecutor;
use tvm_runtime::function::PackedFunc;
use tvm_runtime::io::{Reader, Writer};
use tvm_runtime::module::blob::{self, BlobWriter, LOADER_PREFIX, MAX_IMPORT_DEPTH};
use tvm_runtime::module::{FunctionModule, Module, ModuleNode};
use tvm_runtime::ndarray::serialize::{load_ndarray, load_params, NDARRAY_MAGIC, PARAMS_MAGIC};
use tvm_runtime::registry;
use tvm_runtime::value::Value;

const CPU0: DLDevice = DLDevice { device_type: 1, device_id: 0 };

/// A code module with every function (each does nothing), as the fuzz harness uses.
struct AnyKernel;
impl ModuleNode for AnyKernel {
    fn type_key(&self) -> &str {
        "library"
    }
    fn get_function(&self, name: &str, _this: &Module) -> Result<Option<PackedFunc>> {
        Ok((!name.starts_with("__tvm")).then(|| PackedFunc::from_fn(|_| Ok(Value::Null))))
    }
    fn as_any(&self) -> &dyn Any {
        self
    }
}

fn lib() -> Module {
    Module::new(AnyKernel)
}

fn blob_entry(key: &str, data: &[u8]) -> Result<blob::LoadedBlob> {
    let mut w = Writer::default();
    w.u64(1);
    w.str_bytes(key.as_bytes());
    w.bytes(data);
    blob::process(&w.buf, &lib)
}

/// Feeds one input to the entry point of fuzz target `target`; `Ok(true)` if it was accepted.
fn feed(target: &str, data: &[u8]) -> std::result::Result<bool, String> {
    let text = || std::str::from_utf8(data).map_err(|e| e.to_string());
    let ok = match target {
        "blob" => blob::process(data, &lib).is_ok(),
        "params" => load_params(data).is_ok(),
        "ndarray_record" => load_ndarray(&mut Reader::new(data, "record")).is_ok(),
        "graph_json" => GraphExecutor::create(text()?, lib(), vec![CPU0], None, &[], false).is_ok(),
        "opencl_payload" => blob_entry("opencl", data).is_ok(),
        "cuda_payload" => blob_entry("cuda", data).is_ok(),
        "kernel_meta" => tvm_runtime::device::kernel::parse_meta_json(text()?).is_ok(),
        "vm_executable" => registry::get("runtime.Load_Executable")
            .expect("registered")
            .call(&[Value::bytes(data.to_vec()), Value::Module(lib())])
            .is_ok(),
        "aot_factory" => blob_entry("AotExecutorFactory", data).is_ok(),
        "metadata" => blob_entry("metadata", data).is_ok(),
        "json_runtime" => {
            use tvm_runtime::byoc::json::{graph::Graph, read_payload};
            let mut r = Reader::new(data, "json runtime payload");
            read_payload(&mut r)
                .and_then(|(_, json, consts)| Graph::parse(&json, &consts))
                .and_then(|g| tvm_runtime::byoc::dnnl::ops::analyze(&g).map(drop))
                .is_ok()
        }
        "rpc_packet" => tvm_runtime::rpc::codec::decode_packet(data).is_ok(),
        "rpc_handshake" => matches!(tvm_runtime::rpc::codec::parse_client_hello(data, 4096), Ok(Some(_))),
        "rpc_server" => {
            // Every packet handed to a fresh endpoint on a local session (no panic, no crash).
            use tvm_runtime::rpc::endpoint::ServerEndpoint;
            let mut ep = ServerEndpoint::new("replay");
            let mut out = Vec::new();
            let mut init = Vec::new();
            tvm_runtime::rpc::codec::encode_init_server(&mut init, &[]).map_err(|e| e.to_string())?;
            ep.handle_packet(&init[8..], &mut out, None).map_err(|e| e.to_string())?;
            let mut rest = data;
            while rest.len() >= 8 {
                let n = u64::from_le_bytes(rest[..8].try_into().unwrap()).min((rest.len() - 8) as u64) as usize;
                out.clear();
                let r = ep.handle_packet(&rest[8..8 + n], &mut out, None);
                if String::from_utf8_lossy(&out).contains("panic inside") {
                    return Err("the server panicked".into());
                }
                if r.is_err() {
                    break;
                }
                rest = &rest[8 + n..];
            }
            true
        }
        "relax_library_bin" => tvm_runtime::module::library_bin::LibraryBin::parse(data).is_ok(),
        "relax_executable" => tvm_runtime::relax::executable::Executable::load(data).is_ok(),
        other => return Err(format!("no fuzz target {other}")),
    };
    Ok(ok)
}

#[test]
fn fuzz_regressions_replay() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("fuzz/regressions");
    let mut n = 0;
    for t in std::fs::read_dir(&dir).expect("fuzz/regressions") {
        let t = t.unwrap().path();
        let target = t.file_name().unwrap().to_str().unwrap().to_owned();
        for f in std::fs::read_dir(&t).unwrap() {
            let f = f.unwrap().path();
            let data = std::fs::read(&f).unwrap();
            let r = catch_unwind(AssertUnwindSafe(|| feed(&target, &data)));
            match r {
                Ok(Ok(_)) => n += 1,
                Ok(Err(e)) => panic!("{}: {e}", f.display()),
                Err(_) => panic!("{}: the {target} entry point panicked", f.display()),
            }
        }
    }
    assert!(n >= 1, "no regression inputs in {}", dir.display());
    println!("{n} regression inputs replayed");
}

/// Registers loader `key` whose data is one u64 (no imports of its own).
fn leaf_loader(key: &str) {
    let k = key.to_owned();
    let f = PackedFunc::from_fn(move |a| {
        let v = blob::with_stream(a.handle(0)?, |s| s.reader().u64())?;
        let mut m = FunctionModule::new(k.clone());
        m.add("value", PackedFunc::from_fn(move |_| Ok(Value::Int(v as i64))));
        Ok(Value::Module(Module::new(m)))
    });
    registry::register(&format!("{LOADER_PREFIX}{key}"), f, true).unwrap();
}

fn process_err(w: &BlobWriter) -> String {
    let bytes = w.finish();
    match blob::process(blob::frame(&bytes).unwrap(), &lib) {
        Ok(_) => panic!("accepted"),
        Err(e) => e.to_string(),
    }
}

/// A blob of `_lib` and `n` leaf modules with the given import tree.
fn leaves(n: usize, row_ptr: &[u64], child: &[u64]) -> BlobWriter {
    leaf_loader("hardening_leaf");
    let mut w = BlobWriter::default();
    w.lib();
    for i in 0..n {
        w.module("hardening_leaf", &(i as u64).to_le_bytes());
    }
    w.import_tree(row_ptr, child);
    w
}

#[test]
fn import_tree_rows_are_checked_before_use() {
    // Found by the fuzzer (fuzz/regressions/blob/row-pointers-past-children): the first row
    // ends past the child list; the pointers only decrease at the second row.
    let e = process_err(&leaves(1, &[0, 5, 1], &[1]));
    assert!(e.contains("import tree: row pointers decrease at module 1 (5 > 1)"), "{e}");
}

#[test]
fn import_nesting_is_bounded() {
    // A chain: module i imports module i + 1.
    let chain = |n: usize| {
        let rows: Vec<u64> = (0..=n as u64).map(|i| i.min(n as u64 - 1)).collect();
        let kids: Vec<u64> = (1..n as u64).collect();
        leaves(n - 1, &rows, &kids)
    };
    let ok = chain(MAX_IMPORT_DEPTH + 1).finish();
    let tree = blob::process(blob::frame(&ok).unwrap(), &lib).expect("a chain at the depth limit");
    // A lookup that fails walks the whole chain; the deepest module is the last leaf.
    let first = tree.root.imports()[0].clone();
    assert!(first.get_function("nowhere", true).unwrap().is_none());
    let mut m = first;
    while let Some(next) = m.imports().first().cloned() {
        m = next;
    }
    let f = m.get_function("value", false).unwrap().unwrap();
    assert!(matches!(f.call(&[]).unwrap(), Value::Int(v) if v == MAX_IMPORT_DEPTH as i64 - 1));
    drop(tree);
    let e = process_err(&chain(MAX_IMPORT_DEPTH + 2));
    assert!(
        e.contains(&format!("is nested {} imports deep, more than {MAX_IMPORT_DEPTH}", MAX_IMPORT_DEPTH + 1)),
        "{e}"
    );
}

#[test]
fn shared_imports_cannot_unfold_exponentially() {
    // 20 levels of two modules, each importing both modules of the next level: 2^20 paths to
    // the last level, which a failed lookup would walk one by one.
    let levels = 20u64;
    let n = 1 + 2 * levels; // _lib + the leaves
    let mut rows = vec![0u64];
    let mut kids = vec![1, 2];
    rows.push(2);
    for m in 1..n {
        let level = (m - 1) / 2;
        if level + 1 < levels {
            kids.extend([2 * level + 3, 2 * level + 4]);
        }
        rows.push(kids.len() as u64);
    }
    let e = process_err(&leaves(n as usize - 1, &rows, &kids));
    assert!(e.contains("unfold to") && e.contains("more than 65536"), "{e}");
    // Sharing itself is allowed: the same shape with 8 levels loads.
    let (levels, n) = (8u64, 17u64);
    let mut rows = vec![0u64, 2];
    let mut kids = vec![1, 2];
    for m in 1..n {
        let level = (m - 1) / 2;
        if level + 1 < levels {
            kids.extend([2 * level + 3, 2 * level + 4]);
        }
        rows.push(kids.len() as u64);
    }
    let ok = leaves(n as usize - 1, &rows, &kids).finish();
    blob::process(blob::frame(&ok).unwrap(), &lib).expect("a shared import DAG");
}

const GRAPH: &str = r#"{
  "nodes": [
    {"op": "null", "name": "x", "inputs": []},
    {"op": "tvm_op", "name": "f", "attrs": {"func_name": "f", "num_inputs": "1", "num_outputs": "1",
     "flatten_data": "0"}, "inputs": [[0, 0, 0]]}
  ],
  "arg_nodes": [0], "node_row_ptr": [0, 1, 2], "heads": [[1, 0, 0]],
  "attrs": {"dltype": ["list_str", ["float32", "float32"]], "storage_id": ["list_int", [0, SID]],
            "shape": ["list_shape", [[2, 3], SHAPE]]}
}"#;

fn graph(sid: &str, shape: &str) -> std::result::Result<GraphExecutor, String> {
    let json = GRAPH.replace("SID", sid).replace("SHAPE", shape);
    GraphExecutor::create(&json, lib(), vec![CPU0], None, &[], false).map_err(|e| e.to_string())
}

#[test]
fn graph_sizes_are_checked_before_allocation() {
    graph("1", "[2, 3]").expect("the base graph");
    // A storage id far beyond the entries would size the slot table (TVM resizes to it).
    let e = graph("1000000000000", "[2, 3]").err().unwrap();
    assert!(e.contains("attrs.storage_id[1] is 1000000000000, not below the number of entries (2)"), "{e}");
    // Terabytes: refused before any allocation, naming the field, the entry and its node.
    let e = graph("1", "[1000000, 1000000]").err().unwrap();
    assert!(e.contains("graph JSON attrs.shape") && e.contains("more than this machine's memory"), "{e}");
    assert!(e.contains("attrs.shape[1] = [1000000, 1000000] of node f"), "{e}");
    // Beyond the address space.
    let e = graph("1", "[4294967296, 4294967296, 4294967296]").err().unwrap();
    assert!(e.contains("graph JSON attrs.shape[1]") && e.contains("too large"), "{e}");
}

fn record(shape: &[i64], dtype: [u8; 4], size: u64, data: &[u8]) -> Vec<u8> {
    let mut w = Writer::default();
    w.u64(NDARRAY_MAGIC);
    w.u64(0);
    w.i32(1);
    w.i32(0);
    w.i32(shape.len() as i32);
    w.bytes(&dtype);
    shape.iter().for_each(|&d| w.i64(d));
    w.u64(size);
    w.bytes(data);
    w.buf
}

fn params_of(name: &str, rec: &[u8]) -> Vec<u8> {
    let mut w = Writer::default();
    w.u64(PARAMS_MAGIC);
    w.u64(0);
    w.vec_str(&[name]);
    w.u64(1);
    w.bytes(rec);
    w.buf
}

#[test]
fn params_claiming_terabytes_fail_fast() {
    let tb = 1i64 << 20;
    let rec = record(&[tb, tb], [2, 32, 1, 0], (tb * tb * 4) as u64, &[0; 64]);
    let e = load_params(&params_of("w", &rec)).err().unwrap().to_string();
    assert!(
        e.contains("param w") && e.contains("data size 4398046511104 of shape [1048576, 1048576] runs past the end"),
        "{e}"
    );
    // Through the C API, as TVM's Python calls it.
    let blob = params_of("w", &rec);
    let f = common::global("runtime.LoadParams").unwrap();
    let arr = TVMByteArray { data: blob.as_ptr().cast(), size: blob.len() };
    let mut v = [TVMValue { v_handle: (&arr as *const TVMByteArray).cast_mut().cast() }];
    let mut codes = [12];
    let (mut rv, mut rc) = (TVMValue { v_int64: 0 }, 0);
    // SAFETY: a live function, one bytes argument, valid out-pointers.
    let status = unsafe {
        tvm_runtime::classic_api::runtime_api::TVMFuncCall(f.0, v.as_mut_ptr(), codes.as_mut_ptr(), 1, &mut rv, &mut rc)
    };
    assert_eq!(status, -1);
    assert!(common::last_error().contains("runs past the end"), "{}", common::last_error());
    // A name count beyond the file.
    let mut huge = params_of("w", &rec);
    huge[16..24].copy_from_slice(&u64::MAX.to_le_bytes());
    assert!(load_params(&huge).is_err());
}

#[test]
fn vector_records_are_capped() {
    // float32x65535 over 2^16 elements: 256 KiB stored, a 17 GB array.
    let n = 1i64 << 16;
    let rec = record(&[n], [2, 32, 0xff, 0xff], (n * 4) as u64, &vec![0; (n * 4) as usize]);
    let e = load_ndarray(&mut Reader::new(&rec, "record")).err().unwrap().to_string();
    assert!(e.contains("65535 lanes makes a 17179607040-byte array from 262144 stored bytes"), "{e}");
    // Small vector records load, the lanes beyond the stored bytes zeroed.
    let rec = record(&[2], [2, 32, 4, 0], 8, &[1; 8]);
    let a = load_ndarray(&mut Reader::new(&rec, "record")).unwrap();
    let bytes = a.to_bytes().unwrap();
    assert_eq!(bytes.len(), 32);
    assert_eq!(&bytes[..8], &[1; 8]);
    assert!(bytes[8..].iter().all(|&b| b == 0));
}
