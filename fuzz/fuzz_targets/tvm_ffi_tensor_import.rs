//! Fuzz target `tvm_ffi_tensor_import`: see `tvm_runtime_fuzz::tvm_ffi_tensor_import`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| tvm_runtime_fuzz::tvm_ffi_tensor_import(data));
