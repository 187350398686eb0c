#!/usr/bin/env bash
# The RPC part of the test suite (called by scripts/test.sh): lints and builds the `tvm_rpc`
# server binary (tools/rpc-server, release: tests/python/test_rpc.py starts it), checks that
# `cmake --install` installs it, and runs the interoperability runs with TVM v0.8 when TVM_PY and
# TVM_LIB_DIR name TVM's Python package and runtime (scripts/rpc-interop.sh). The Rust RPC tests
# (tests/rpc.rs) run with the other cargo tests, the Python one with the other Python tests.
set -euo pipefail
cd "$(dirname "$0")/.."

echo "== rpc: tvm_rpc server binary (fmt, clippy, release build)"
cargo fmt -p tvm-rpc-server --check
cargo clippy -p tvm-rpc-server --all-targets --quiet -- -D warnings
cargo build --release -p tvm-rpc-server --quiet
./target/release/tvm_rpc server --help | grep -q -- "--tracker"

echo "== rpc: cmake --install puts tvm_rpc in bin/"
prefix="$PWD/build/rpc-install"
rm -rf "$prefix"
cmake -S . -B build/rpc-pkg -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build/rpc-pkg >/dev/null
cmake --install build/rpc-pkg --prefix "$prefix" >/dev/null
"$prefix/bin/tvm_rpc" --version

if [ -n "${TVM_PY:-}" ] && [ -n "${TVM_LIB_DIR:-}" ]; then
  echo "== rpc: interoperability with TVM v0.8"
  ./scripts/rpc-interop.sh
fi
