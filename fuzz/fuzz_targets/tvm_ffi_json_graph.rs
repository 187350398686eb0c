//! Fuzz target `tvm_ffi_json_graph`: see `tvm_runtime_fuzz::tvm_ffi_json_graph`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| tvm_runtime_fuzz::tvm_ffi_json_graph(data));
