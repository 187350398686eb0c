//! Fuzz target `rpc_packet`: see `tvm_runtime_fuzz::rpc_packet`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| tvm_runtime_fuzz::rpc_packet(data));
