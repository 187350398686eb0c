//! Fuzz target `params`: see `tvm_runtime_fuzz::params`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| tvm_runtime_fuzz::params(data));
