//! Fuzz target `relax_executable`: see `tvm_runtime_fuzz::relax_executable`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| tvm_runtime_fuzz::relax_executable(data));
