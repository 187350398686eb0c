#!/usr/bin/env bash
# RPC figures beside TVM v0.8's own over loopback (see benches/rpc_bench.py for what is measured):
#   TVM: TVM's Python server (python -m tvm.exec.rpc_server) and TVM's Python client, both on
#        TVM's runtime;
#   ours: our tvm_rpc server and TVM's Python client on our library.
# Prints the figures and ours/TVM ratios (goals: latency <= 0.8x, throughput >= 1x). Noisy on a
# busy machine: ROUNDS=N (default 3) runs each configuration N times, alternating, and keeps each
# figure's best.
#
#   TVM_PY=/path/to/tvm-v0.8/python TVM_LIB_DIR=/path/to/tvm-v0.8/lib [PYTHON=python3] \
#     scripts/bench-rpc.sh
set -euo pipefail
cd "$(dirname "$0")/.."
: "${TVM_PY:?set TVM_PY to TVM v0.8's python/ directory}"
: "${TVM_LIB_DIR:?set TVM_LIB_DIR to the directory of TVM v0.8's libtvm_runtime.so}"
PYTHON=${PYTHON:-python3}
ROUNDS=${ROUNDS:-3}
OURS=${OURS_LIB_DIR:-$PWD/target/release}
SERVER_BIN=${TVM_RPC_SERVER_BIN:-$PWD/target/release/tvm_rpc}
export TVM_FIXTURES=${TVM_FIXTURES:-$PWD/../shared/fixtures}
[ -x "$SERVER_BIN" ] || cargo build --release -p tvm-rpc-server --quiet
[ -f "$OURS/libtvm_runtime.so" ] || cargo build --release --quiet
tmp=$(mktemp -d)
pid=
trap '[ -n "$pid" ] && kill $pid 2>/dev/null; rm -rf "$tmp"' EXIT

free_port() { "$PYTHON" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
tvm_env() { env TVM_USE_RUNTIME_LIB=1 TVM_LIBRARY_PATH="$1" PYTHONPATH="$TVM_PY" "${@:2}"; }
wait_port() { for _ in $(seq 150); do (exec 3<>/dev/tcp/127.0.0.1/"$1") 2>/dev/null && return 0; sleep 0.2; done; return 1; }

one() { # config -> appends a JSON line to $tmp/$config
  local p; p=$(free_port)
  if [ "$1" = tvm ]; then
    tvm_env "$TVM_LIB_DIR" "$PYTHON" -m tvm.exec.rpc_server --host 127.0.0.1 --port "$p" --port-end $((p + 1)) \
      >"$tmp/server.log" 2>&1 &
    pid=$!; lib=$TVM_LIB_DIR
  else
    "$SERVER_BIN" server --port="$p" --port-end=$((p + 1)) --silent >"$tmp/server.log" 2>&1 &
    pid=$!; lib=$OURS
  fi
  wait_port "$p"
  tvm_env "$lib" "$PYTHON" benches/rpc_bench.py 127.0.0.1 "$p" 2>/dev/null >>"$tmp/$1"
  kill $pid; wait $pid 2>/dev/null || true; pid=
}

for _ in $(seq "$ROUNDS"); do one tvm; one ours; done
"$PYTHON" - "$tmp/tvm" "$tmp/ours" <<'PY'
import json, sys
runs = [[json.loads(l) for l in open(p)] for p in sys.argv[1:]]
lower = {"call_us": True, "to_MBps": False, "from_MBps": False, "mlp_te_us": True, "mlp_rt_us": True}
best = [{k: (min if lo else max)(r[k] for r in rs) for k, lo in lower.items()} for rs in runs]
print("%-10s %12s %12s %8s" % ("metric", "TVM v0.8", "ours", "ours/TVM"))
for k in lower:
    t, o = best[0][k], best[1][k]
    print("%-10s %12.2f %12.2f %8.2f" % (k, t, o, o / t))
print("(best of %d rounds each; latency goal <= 0.8, throughput goal >= 1.0)" % len(runs[0]))
PY
