//! Fuzz target `rpc_server`: see `tvm_runtime_fuzz::rpc_server`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| tvm_runtime_fuzz::rpc_server(data));
