//! Fuzz target `metadata`: see `tvm_runtime_fuzz::metadata`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| tvm_runtime_fuzz::metadata(data));
