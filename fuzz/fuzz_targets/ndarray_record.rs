//! Fuzz target `ndarray_record`: see `tvm_runtime_fuzz::ndarray_record`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| tvm_runtime_fuzz::ndarray_record(data));
