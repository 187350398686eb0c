//! Builds a small model library in TVM v0.8's `export_library` conventions, without TVM:
//! `y = relu(x · W + b)` with x: [1, 4], W: [4, 3], b: [3]. It writes C source holding the
//! kernel (a `TVMBackendPackedCFunc`) and a `__tvm_dev_mblob` whose root is a
//! GraphExecutorFactory (graph JSON + params) importing the library (`_lib`), then compiles it
//! with `cc -shared`. Usage: `cargo run --example demo_model -- OUT_DIR` -> OUT_DIR/demo_model.so

use std::fmt::Write as _;
use std::path::PathBuf;
use std::process::Command;
use tvm_runtime::abi::DLDevice;
use tvm_runtime::io::Writer;
use tvm_runtime::ndarray::serialize::save_ndarray;
use tvm_runtime::ndarray::NDArray;
use tvm_runtime::value::dtype::FLOAT32;

const KERNEL: &str = r#"
#include <stdint.h>
#include <tvm/runtime/c_backend_api.h>

void* __tvm_module_ctx = 0;
/* Filled by the runtime at load time. */
void (*__TVMAPISetLastError)(const char*) = 0;

/* y[1,3] = relu(x[1,4] . W[4,3] + b[3]) */
TVM_DLL int demo_dense_relu(TVMValue* args, int* codes, int num_args, TVMValue* out_ret_value,
                            int* out_ret_tcode, void* resource_handle) {
  (void)out_ret_value; (void)out_ret_tcode; (void)resource_handle;
  if (num_args != 4 || codes[0] != kTVMDLTensorHandle) {
    if (__TVMAPISetLastError) __TVMAPISetLastError("ValueError: demo_dense_relu expects 4 tensors");
    return -1;
  }
  const float* x = (const float*)((DLTensor*)args[0].v_handle)->data;
  const float* w = (const float*)((DLTensor*)args[1].v_handle)->data;
  const float* b = (const float*)((DLTensor*)args[2].v_handle)->data;
  float* y = (float*)((DLTensor*)args[3].v_handle)->data;
  for (int j = 0; j < 3; j++) {
    float acc = b[j];
    for (int k = 0; k < 4; k++) acc += x[k] * w[k * 3 + j];
    y[j] = acc > 0 ? acc : 0;
  }
  return 0;
}
"#;

const GRAPH: &str = r#"{"nodes": [
  {"op": "null", "name": "data", "inputs": []},
  {"op": "null", "name": "weight", "inputs": []},
  {"op": "null", "name": "bias", "inputs": []},
  {"op": "tvm_op", "name": "dense_relu", "inputs": [[0, 0, 0], [1, 0, 0], [2, 0, 0]],
   "attrs": {"func_name": "demo_dense_relu", "num_inputs": "3", "num_outputs": "1", "flatten_data": "0"}}],
 "arg_nodes": [0, 1, 2], "node_row_ptr": [0, 1, 2, 3, 4], "heads": [[3, 0, 0]],
 "attrs": {"dltype": ["list_str", ["float32", "float32", "float32", "float32"]],
           "storage_id": ["list_int", [0, 1, 2, 3]],
           "shape": ["list_shape", [[1, 4], [4, 3], [3], [1, 3]]]}}"#;

fn array(shape: &[i64], values: &[f32]) -> NDArray {
    let a = NDArray::empty(shape, FLOAT32, DLDevice { device_type: 1, device_id: 0 }).expect("alloc");
    let bytes: Vec<u8> = values.iter().flat_map(|v| v.to_le_bytes()).collect();
    a.copy_from_bytes(&bytes).expect("copy");
    a
}

fn main() {
    let out = PathBuf::from(std::env::args().nth(1).unwrap_or_else(|| "build/demo".into()));
    std::fs::create_dir_all(&out).expect("create output dir");
    let weight = array(&[4, 3], &[0.5, -1.0, 0.25, 1.0, 0.5, -0.5, -0.25, 1.5, 1.0, 0.75, -0.5, 2.0]);
    let bias = array(&[3], &[0.1, -0.2, 0.3]);

    // GraphExecutorFactory payload.
    let mut factory = Writer::default();
    factory.str_bytes(GRAPH.as_bytes());
    factory.u64(2);
    factory.vec_str(&["weight", "bias"]);
    save_ndarray(&mut factory, &weight).expect("save weight");
    save_ndarray(&mut factory, &bias).expect("save bias");
    factory.str_bytes(b"default");

    // Blob payload: factory, _lib, then the import tree factory -> _lib.
    let mut payload = Writer::default();
    payload.u64(3);
    payload.str_bytes(b"GraphExecutorFactory");
    payload.bytes(&factory.buf);
    payload.str_bytes(b"_lib");
    payload.str_bytes(b"_import_tree");
    payload.vec_u64(&[0, 1, 1]);
    payload.vec_u64(&[1]);
    let mut blob = (payload.buf.len() as u64).to_le_bytes().to_vec();
    blob.extend_from_slice(&payload.buf);

    let mut c = String::from(KERNEL);
    let _ = write!(c, "\nTVM_DLL const unsigned char __tvm_dev_mblob[{}] = {{", blob.len());
    for (i, b) in blob.iter().enumerate() {
        if i % 16 == 0 {
            c.push_str("\n ");
        }
        let _ = write!(c, " {b},");
    }
    c.push_str("\n};\n");
    let src = out.join("demo_model.c");
    std::fs::write(&src, c).expect("write C source");
    let include = concat!(env!("CARGO_MANIFEST_DIR"), "/include");
    let so = out.join("demo_model.so");
    let status = Command::new(std::env::var("CC").unwrap_or_else(|_| "cc".into()))
        .args(["-shared", "-fPIC", "-O2", "-I", include, "-o"])
        .arg(&so)
        .arg(&src)
        .status()
        .expect("run cc");
    assert!(status.success(), "cc failed");
    println!("{}", so.display());
}
