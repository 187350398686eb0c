#!/usr/bin/env bash
# The Triton Inference Server backend (tools/triton, issue 27) in the real server: builds
# libtriton_tvm.so, installs Triton 2.51 (PyPI's nvidia-pytriton, which carries tritonserver and
# its libraries; CPU only) with tritonclient[http,grpc] into a virtual environment under
# build/triton-venv (kept between runs; TRITON_VENV names another), then runs tests/triton/test_server.py: a model repository
# of the shared fixtures (graph v0.8 and v0.18, AOT, Relay VM, BYOC/DNNL), requests over HTTP and
# gRPC compared with the manifests, batching, concurrent clients, malformed requests, models that
# must fail to load, unload/reload, weight sharing between instances. Loopback ports only; the
# server is stopped at the end. Called by scripts/test.sh; runs alone too.
set -euo pipefail
cd "$(dirname "$0")/.."

echo "== Triton backend: cargo fmt --check, clippy, cargo test, cargo build -p triton-tvm"
cargo fmt --check -p triton-tvm
cargo clippy -p triton-tvm --target-dir target/tools --all-targets --quiet -- -D warnings
cargo test -q -p triton-tvm --target-dir target/tools
profile=${TRITON_TVM_PROFILE:-dev}
cargo build -q -p triton-tvm --target-dir target/tools --profile "$profile"
dir=debug; [ "$profile" = dev ] || dir=$profile
backend="$PWD/target/tools/$dir/libtriton_tvm.so"
# Only Triton's own functions may be left for the server to provide.
undefined=$(nm -D --undefined-only "$backend" | awk '$1 == "U" {print $2}' | grep -v '^TRITON' | grep -v '@' || true)
[ -z "$undefined" ] || { echo "libtriton_tvm.so: unexpected undefined symbols: $undefined"; exit 1; }

venv=${TRITON_VENV:-build/triton-venv}
if ! "$venv/bin/python" -c "import pytriton, tritonclient.http, tritonclient.grpc, numpy, pytest" >/dev/null 2>&1; then
  echo "== installing nvidia-pytriton (Triton 2.51), tritonclient[http,grpc] into $venv"
  python3 -m venv "$venv" >/dev/null 2>&1 || {
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq && apt-get install -y -qq python3-venv >/dev/null
    rm -rf "$venv" && python3 -m venv "$venv"
  }
  "$venv/bin/python" -m pip install -q --upgrade pip >/dev/null
  "$venv/bin/python" -m pip install -q "nvidia-pytriton==0.7.0" "tritonclient[http,grpc]" "numpy<3" pytest
fi

echo "== Triton backend in tritonserver (tests/triton)"
TRITON_TVM_BACKEND="$backend" timeout 900 "$venv/bin/python" -m pytest -q -p no:cacheprovider tests/triton "$@"
