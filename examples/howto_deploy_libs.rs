//! Builds, without TVM, the three libraries that TVM's deployment example
//! (`apps/howto_deploy/cpp_deploy.cc`) loads, in TVM v0.8's conventions, so that the example
//! can be compiled unchanged against this project's C++ headers and run:
//! - `lib/test_addone_dll.so`: function `addone(x, y)`, y = x + 1 on a float32 vector;
//! - `lib/test_addone_sys.o`: the same as `addonesys` in a system-lib object (registered with
//!   `TVMBackendRegisterSystemLibSymbol` at static initialization; link it into the program);
//! - `lib/test_relay_add.so`: a GraphExecutorFactory (`default`) whose graph maps input `x`
//!   (float32 [2, 2]) to x + 1.
//!
//! Usage: `cargo run --example howto_deploy_libs -- OUT_DIR` (writes OUT_DIR/lib/...).

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::Command;
use tvm_runtime::io::Writer;

/// y = x + 1 over n float32 values, with the argument checks generated code makes.
const ADD_ONE: &str = r#"
#include <stdint.h>
#include <tvm/runtime/c_backend_api.h>

static int add_one_checked(TVMValue* args, int* codes, int num_args, void (*set_error)(const char*)) {
  if (num_args != 2) {
    if (set_error) set_error("ValueError: add one: num_args should be 2");
    return -1;
  }
  for (int i = 0; i < 2; ++i) {
    if (codes[i] != kTVMDLTensorHandle && codes[i] != kTVMNDArrayHandle) {
      if (set_error) set_error("TypeError: add one: arguments must be tensors");
      return -1;
    }
  }
  const DLTensor* x = (const DLTensor*)args[0].v_handle;
  DLTensor* y = (DLTensor*)args[1].v_handle;
  int64_t n = 1;
  for (int i = 0; i < x->ndim; ++i) n *= x->shape[i];
  int64_t m = 1;
  for (int i = 0; i < y->ndim; ++i) m *= y->shape[i];
  if (n != m || x->dtype.code != kDLFloat || x->dtype.bits != 32 || y->dtype.code != kDLFloat ||
      y->dtype.bits != 32) {
    if (set_error) set_error("ValueError: add one: float32 tensors of one size expected");
    return -1;
  }
  const float* a = (const float*)((const char*)x->data + x->byte_offset);
  float* b = (float*)((char*)y->data + y->byte_offset);
  for (int64_t i = 0; i < n; ++i) b[i] = a[i] + 1.0f;
  return 0;
}
"#;

const DLL: &str = r#"
void* __tvm_module_ctx = 0;
/* Filled by the runtime at load time. */
void (*__TVMAPISetLastError)(const char*) = 0;

TVM_DLL int FUNC(TVMValue* args, int* codes, int num_args, TVMValue* out_ret_value,
                 int* out_ret_tcode, void* resource_handle) {
  (void)out_ret_value; (void)out_ret_tcode; (void)resource_handle;
  return add_one_checked(args, codes, num_args, __TVMAPISetLastError);
}
"#;

const SYSLIB: &str = r#"
void* __tvm_module_ctx = 0;

int addonesys(TVMValue* args, int* codes, int num_args, TVMValue* out_ret_value,
              int* out_ret_tcode, void* resource_handle) {
  (void)out_ret_value; (void)out_ret_tcode; (void)resource_handle;
  return add_one_checked(args, codes, num_args, TVMAPISetLastError);
}

/* What a --system-lib object does before main: register its functions and its context. */
__attribute__((constructor)) static void register_system_lib(void) {
  TVMBackendRegisterSystemLibSymbol("addonesys", (void*)addonesys);
  TVMBackendRegisterSystemLibSymbol("__tvm_module_ctx", &__tvm_module_ctx);
}
"#;

const GRAPH: &str = r#"{"nodes": [
  {"op": "null", "name": "x", "inputs": []},
  {"op": "tvm_op", "name": "add", "inputs": [[0, 0, 0]],
   "attrs": {"func_name": "fused_add_one", "num_inputs": "1", "num_outputs": "1", "flatten_data": "0"}}],
 "arg_nodes": [0], "node_row_ptr": [0, 1, 2], "heads": [[1, 0, 0]],
 "attrs": {"dltype": ["list_str", ["float32", "float32"]],
           "storage_id": ["list_int", [0, 1]],
           "shape": ["list_shape", [[2, 2], [2, 2]]]}}"#;

fn compile(src: &Path, out: &Path, shared: bool) {
    let include = concat!(env!("CARGO_MANIFEST_DIR"), "/include");
    let mut cmd = Command::new(std::env::var("CC").unwrap_or_else(|_| "cc".into()));
    cmd.args(["-fPIC", "-O2", "-Wall", "-Werror", "-I", include]);
    cmd.arg(if shared { "-shared" } else { "-c" });
    let status = cmd.arg("-o").arg(out).arg(src).status().expect("run cc");
    assert!(status.success(), "cc failed on {}", src.display());
}

fn blob_c(blob: &[u8]) -> String {
    let mut c = format!("\nTVM_DLL const unsigned char __tvm_dev_mblob[{}] = {{", blob.len());
    for (i, b) in blob.iter().enumerate() {
        if i % 16 == 0 {
            c.push_str("\n ");
        }
        let _ = write!(c, " {b},");
    }
    c.push_str("\n};\n");
    c
}

fn main() {
    let out = PathBuf::from(std::env::args().nth(1).unwrap_or_else(|| "build/howto_deploy".into()));
    let lib = out.join("lib");
    std::fs::create_dir_all(&lib).expect("create output dir");

    let src = lib.join("test_addone_dll.c");
    std::fs::write(&src, format!("{ADD_ONE}{}", DLL.replace("FUNC", "addone"))).expect("write");
    compile(&src, &lib.join("test_addone_dll.so"), true);

    let src = lib.join("test_addone_sys.c");
    std::fs::write(&src, format!("{ADD_ONE}{SYSLIB}")).expect("write");
    compile(&src, &lib.join("test_addone_sys.o"), false);

    // GraphExecutorFactory payload: graph JSON, no params, module name.
    let mut factory = Writer::default();
    factory.str_bytes(GRAPH.as_bytes());
    factory.u64(0);
    factory.vec_str::<&str>(&[]);
    factory.str_bytes(b"default");
    // Blob payload: factory, _lib, the import tree factory -> _lib.
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
    let src = lib.join("test_relay_add.c");
    let code = format!("{ADD_ONE}{}{}", DLL.replace("FUNC", "fused_add_one"), blob_c(&blob));
    std::fs::write(&src, code).expect("write");
    compile(&src, &lib.join("test_relay_add.so"), true);
    println!("{}", lib.display());
}
