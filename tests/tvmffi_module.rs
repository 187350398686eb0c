//! tvm-ffi modules over a real shared library: `__tvm_ffi_<name>` functions, their metadata and
//! doc getters, `__tvm_ffi__library_ctx`, context symbols and `__tvm_ffi__library_bin`.

use std::path::{Path, PathBuf};
use std::process::Command;
use tvm_runtime::tvm_ffi::any::Any;
use tvm_runtime::tvm_ffi::{function, module, registry};

// The library is plain C: the ABI structs it needs are spelled out here.
const LIB: &str = r#"
#include <stdint.h>
#include <stddef.h>
typedef struct { int32_t type_index; uint32_t small_len; union { int64_t v_int64; void* v_ptr; char v_bytes[8]; }; } Any;
void* __tvm_ffi__library_ctx = NULL;
void* my_ctx_symbol = NULL;
int __tvm_ffi_add_one(void* h, const Any* args, int32_t n, Any* out) {
  if (n != 1 || args[0].type_index != 1) return -1;
  out->type_index = 1; out->small_len = 0; out->v_int64 = args[0].v_int64 + 1; return 0;
}
int __tvm_ffi_ctx(void* h, const Any* args, int32_t n, Any* out) {
  out->type_index = 1; out->small_len = 0; out->v_int64 = (int64_t)(intptr_t)__tvm_ffi__library_ctx; return 0;
}
int __tvm_ffi_ctx_symbol(void* h, const Any* args, int32_t n, Any* out) {
  out->type_index = 1; out->small_len = 0; out->v_int64 = (int64_t)(intptr_t)my_ctx_symbol; return 0;
}
int __tvm_ffi__doc_add_one(void* h, const Any* args, int32_t n, Any* out) {
  out->type_index = 11; out->small_len = 4; out->v_int64 = 0;
  out->v_bytes[0] = 'a'; out->v_bytes[1] = 'd'; out->v_bytes[2] = 'd'; out->v_bytes[3] = '1'; return 0;
}
"#;

// A library binary whose import tree is the library module alone.
// The size header counts the bytes after it (44), as TVM's writer does.
const BIN: &str = r#"
const unsigned char __tvm_ffi__library_bin[] = {
  44,0,0,0,0,0,0,0,
  2,0,0,0,0,0,0,0, 0,0,0,0,0,0,0,0, 0,0,0,0,0,0,0,0,
  0,0,0,0,0,0,0,0,
  4,0,0,0,0,0,0,0, '_','l','i','b'
};
"#;

fn compile(name: &str, source: &str) -> PathBuf {
    let d = Path::new(env!("CARGO_TARGET_TMPDIR")).join("tvmffi_module");
    std::fs::create_dir_all(&d).unwrap();
    let c = d.join(format!("{name}-{}.c", std::process::id()));
    std::fs::write(&c, source).unwrap();
    let so = d.join(format!("lib{name}-{}.so", std::process::id()));
    let cc = std::env::var("CC").unwrap_or_else(|_| "cc".into());
    let out = Command::new(&cc).args(["-shared", "-fPIC", "-O2", "-o"]).arg(&so).arg(&c).output().unwrap();
    assert!(out.status.success(), "{cc}: {}", String::from_utf8_lossy(&out.stderr));
    so
}

fn call0(m: &tvm_runtime::tvm_ffi::ObjectRef, name: &str) -> i64 {
    let f = module::get_function(m, name, false).unwrap().unwrap();
    function::call_any(&f, &[]).unwrap().as_i64().unwrap()
}

#[test]
fn shared_library_functions_context_and_doc() {
    let so = compile("plain", LIB);
    let marker = 0x5eed_usize as *mut std::ffi::c_void;
    module::register_context_symbol("my_ctx_symbol", marker);
    let m = module::load_from_file(so.to_str().unwrap()).unwrap();
    let f = module::get_function(&m, "add_one", false).unwrap().unwrap();
    assert_eq!(function::call_any(&f, &[Any::int(41)]).unwrap().as_i64(), Some(42));
    assert!(function::call_any(&f, &[Any::float(1.0)]).is_err());
    assert!(module::get_function(&m, "missing", true).unwrap().is_none());
    // The library's context names its module; the context symbol was written before any call.
    assert_eq!(call0(&m, "ctx") as usize, m.as_ptr() as usize);
    assert_eq!(call0(&m, "ctx_symbol") as usize, marker as usize);
    let doc = registry::get("ffi.ModuleGetFunctionDoc").unwrap();
    let d = function::call_any(&doc, &[Any::object(m.clone()), Any::string("add_one"), Any::bool(false)]).unwrap();
    assert_eq!(d.as_str(), Some("add1"));
    let d = function::call_any(&doc, &[Any::object(m.clone()), Any::string("ctx"), Any::bool(true)]).unwrap();
    assert!(d.is_none());
    // A function keeps the module (and the library) alive.
    drop(m);
    assert_eq!(function::call_any(&f, &[Any::int(1)]).unwrap().as_i64(), Some(2));
}

#[test]
fn library_bin_with_only_the_library_module() {
    let so = compile("bin", &format!("{LIB}{BIN}"));
    let m = module::load_dso(so.to_str().unwrap()).unwrap();
    assert!(module::imports(&m).unwrap().is_empty());
    assert_eq!(call0(&m, "ctx") as usize, m.as_ptr() as usize);
}

#[test]
fn load_errors_name_the_file() {
    let e = module::load_from_file("/nonexistent/x.so").unwrap_err();
    assert!(e.message().contains("/nonexistent/x.so"), "{}", e.message());
    let e = module::load_from_file("/nonexistent/x.weird").unwrap_err();
    assert!(e.message().contains("ffi.Module.load_from_file.weird"), "{}", e.message());
}
