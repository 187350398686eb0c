//! Fuzz target `aot_factory`: see `tvm_runtime_fuzz::aot_factory`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| tvm_runtime_fuzz::aot_factory(data));
