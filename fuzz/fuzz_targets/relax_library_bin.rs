//! Fuzz target `relax_library_bin`: see `tvm_runtime_fuzz::relax_library_bin`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| tvm_runtime_fuzz::relax_library_bin(data));
