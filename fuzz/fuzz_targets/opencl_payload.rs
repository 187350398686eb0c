//! Fuzz target `opencl_payload`: see `tvm_runtime_fuzz::opencl_payload`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| tvm_runtime_fuzz::opencl_payload(data));
