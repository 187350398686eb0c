#!/usr/bin/env bash
# RPC interoperability with TVM v0.8 (by hand; needs TVM's Python package and TVM's own runtime):
#   1. TVM's Python server (python -m tvm.exec.rpc_server) running on our library;
#   a. TVM's Python client on TVM's runtime  -> our server (tvm_rpc);
#   b. TVM's Python client on our library    -> our server;
#   c. TVM's Python client on our library    -> TVM's Python server on TVM's runtime;
#   t. the same through TVM's tracker (python -m tvm.exec.rpc_tracker), for a, b and c.
# Each run uploads add_one.so and mlp.so, runs them remotely (graph executor included), compares
# with the manifest and times them (tests/python/rpc_interop.py).
#
#   TVM_PY=/path/to/tvm-v0.8/python TVM_LIB_DIR=/path/to/tvm-v0.8/lib [PYTHON=python3] \
#     scripts/rpc-interop.sh
set -uo pipefail
cd "$(dirname "$0")/.."
: "${TVM_PY:?set TVM_PY to TVM v0.8's python/ directory}"
: "${TVM_LIB_DIR:?set TVM_LIB_DIR to the directory of TVM v0.8's libtvm_runtime.so}"
PYTHON=${PYTHON:-python3}
OURS=${OURS_LIB_DIR:-$PWD/target/release}
SERVER_BIN=${TVM_RPC_SERVER_BIN:-$PWD/target/release/tvm_rpc}
CLIENT=$PWD/tests/python/rpc_interop.py
export TVM_FIXTURES=${TVM_FIXTURES:-$PWD/../shared/fixtures}
tmp=$(mktemp -d)
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null; done; wait 2>/dev/null; rm -rf "$tmp"; }
trap cleanup EXIT

free_port() { "$PYTHON" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
tvm_env() { env TVM_USE_RUNTIME_LIB=1 TVM_LIBRARY_PATH="$1" PYTHONPATH="$TVM_PY" "${@:2}"; }
wait_port() { for _ in $(seq 100); do (exec 3<>/dev/tcp/127.0.0.1/"$1") 2>/dev/null && return 0; sleep 0.2; done; return 1; }

fails=0
run() { # name, client lib dir, mode, port, key
  local out
  if out=$(tvm_env "$2" "$PYTHON" "$CLIENT" "$3" 127.0.0.1 "$4" "$5" 2>&1); then
    echo "PASS $1: $(tail -1 <<<"$out")"
  else
    echo "FAIL $1:"; tail -15 <<<"$out"; fails=$((fails + 1))
  fi
}
our_server() { # port key [tracker]
  "$SERVER_BIN" server --port="$1" --port-end=$(($1 + 1)) --key="$2" ${3:+--tracker=$3} --silent >"$tmp/ours-$1.log" 2>&1 &
  pids+=($!)
}
tvm_server() { # lib dir, port, key [tracker]
  tvm_env "$1" "$PYTHON" -m tvm.exec.rpc_server --host 127.0.0.1 --port "$2" --port-end $(($2 + 1)) --key "$3" \
    ${4:+--tracker $4} >"$tmp/tvm-$2.log" 2>&1 &
  pids+=($!)
}

p=$(free_port); our_server "$p" ""; wait_port "$p"
run "a (TVM client -> our server)" "$TVM_LIB_DIR" connect "$p" ""
run "b (our client -> our server)" "$OURS" connect "$p" ""
p=$(free_port); tvm_server "$TVM_LIB_DIR" "$p" ""; wait_port "$p"
run "c (our client -> TVM's server on TVM's runtime)" "$OURS" connect "$p" ""
p=$(free_port); tvm_server "$OURS" "$p" ""; wait_port "$p"
run "1 (TVM client on TVM's runtime -> TVM's Python server on our library)" "$TVM_LIB_DIR" connect "$p" ""

t=$(free_port)
tvm_env "$TVM_LIB_DIR" "$PYTHON" -m tvm.exec.rpc_tracker --host 127.0.0.1 --port "$t" --port-end $((t + 1)) >"$tmp/tracker.log" 2>&1 &
pids+=($!)
wait_port "$t"
p=$(free_port); our_server "$p" ours "127.0.0.1:$t"
q=$(free_port); tvm_server "$TVM_LIB_DIR" "$q" tvm "127.0.0.1:$t"
sleep 3
run "t-a (TVM client -> tracker -> our server)" "$TVM_LIB_DIR" tracker "$t" ours
run "t-b (our client -> tracker -> our server)" "$OURS" tracker "$t" ours
run "t-c (our client -> tracker -> TVM's server)" "$OURS" tracker "$t" tvm
echo "$fails failed"
exit $((fails > 0))
