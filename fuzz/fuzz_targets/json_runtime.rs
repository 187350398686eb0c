//! Fuzz target `json_runtime`: see `tvm_runtime_fuzz::json_runtime`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| tvm_runtime_fuzz::json_runtime(data));
