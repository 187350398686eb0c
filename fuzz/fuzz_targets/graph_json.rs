//! Fuzz target `graph_json`: see `tvm_runtime_fuzz::graph_json`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| tvm_runtime_fuzz::graph_json(data));
