#!/usr/bin/env bash
# The RPC part of the test suite (called by scripts/test.sh after scripts/test-cli.sh, which
# builds `tvmrt`, whose `rpc-server` subcommand is the standalone server that
# tests/python/test_rpc.py starts; test-cli.sh also checks that `cmake --install` installs it),
# and the interoperability runs with TVM v0.8 when TVM_PY and TVM_LIB_DIR name TVM's Python
# package and runtime (scripts/rpc-interop.sh). The Rust RPC tests (tests/rpc.rs) run with the
# other cargo tests, the Python one with the other Python tests.
set -euo pipefail
cd "$(dirname "$0")/.."

echo "== rpc: the server (tvmrt rpc-server) takes apps/cpp_rpc's options"
./target/tools/release/tvmrt rpc-server --help | grep -- "--tracker" >/dev/null

if [ -n "${TVM_PY:-}" ] && [ -n "${TVM_LIB_DIR:-}" ]; then
  echo "== rpc: interoperability with TVM v0.8"
  ./scripts/rpc-interop.sh
fi
