//! Fuzz target `kernel_meta`: see `tvm_runtime_fuzz::kernel_meta`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| tvm_runtime_fuzz::kernel_meta(data));
