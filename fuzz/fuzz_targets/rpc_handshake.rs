//! Fuzz target `rpc_handshake`: see `tvm_runtime_fuzz::rpc_handshake`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| tvm_runtime_fuzz::rpc_handshake(data));
