//! Fuzz target `cuda_payload`: see `tvm_runtime_fuzz::cuda_payload`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| tvm_runtime_fuzz::cuda_payload(data));
