#!/usr/bin/env bash
# Load on the Triton backend (issue 27's "Speed and memory", our side only): builds the release
# libtriton_tvm.so, then tools/triton/bench.py runs resnet18 and mlp2 in tritonserver with 1 and 4
# instances under N concurrent gRPC clients: requests/s, p50/p99 latency, server RSS. Uses the
# venv of scripts/test-triton.sh (build/triton-venv, or TRITON_VENV). Arguments go to bench.py
# (--clients N --seconds S --instances 1,4 --models resnet18,mlp2). With --python-backend, each
# point also runs through Triton's Python backend (PyTriton, tools/triton/bench_python.py) on the
# release libtvm_runtime.so, interleaved, and the native/python ratios are printed.
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build -q --release -p triton-tvm --target-dir target/tools
args=()
for a in "$@"; do
  if [ "$a" = --python-backend ]; then
    cargo build -q --release --lib
    args+=(--python-backend "$PWD/target/release")
  else
    args+=("$a")
  fi
done
venv=${TRITON_VENV:-build/triton-venv}
[ -x "$venv/bin/python" ] || { echo "no $venv: run scripts/test-triton.sh once (it installs the server)"; exit 1; }
exec "$venv/bin/python" tools/triton/bench.py "$PWD/target/tools/release/libtriton_tvm.so" "${args[@]}"
