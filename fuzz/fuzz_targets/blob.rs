//! Fuzz target `blob`: see `tvm_runtime_fuzz::blob`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| tvm_runtime_fuzz::blob(data));
