#!/usr/bin/env bash
# The LLM bench (issue 31) beside TVM v0.27's own runtime, same run, processes alternating,
# ROUNDS rounds, medians: benches/llm_bench.py (a 6-layer Llama-style model, hidden 256,
# vocabulary 4096, made here with TVM's compiler) through TVM's Python on this library and on
# TVM's runtime-only library: decode tokens/s of 1 and 4 sequences, a 64-token prefill, the
# cache's memory; and the cache's own bookkeeping per decode step from C
# (benches/kv_bookkeeping.c: begin_forward + end_forward of 4 sequences, no kernels).
#   [ROUNDS=5] scripts/bench-llm.sh
# Uses the venvs of scripts/test-tvm-python.sh (target/tvm27-venv: this library;
# target/tvm27-ref: the plain wheel), making them if missing.
set -euo pipefail
cd "$(dirname "$0")/.."
ROUNDS="${ROUNDS:-5}"
cargo build --release --quiet
ours_venv="$PWD/target/tvm27-venv" ref="${TVM27_REF_VENV:-$PWD/target/tvm27-ref}"
for v in "$ours_venv" "$ref"; do
  if [ ! -x "$v/bin/python" ]; then
    python3 -m venv "$v"
    "$v/bin/pip" install -q "apache-tvm==0.27.0.post1" "apache-tvm-ffi==0.1.15.post2" numpy
  fi
done
py="$(scripts/tvm-ffi-venv.sh "$ours_venv" target/release/libtvm_runtime.so)"
libdir="$ours_venv/tvm-runtime-lib"
mkdir -p "$libdir" build/bench
ln -sfn "$PWD/target/release/libtvm_runtime.so" "$libdir/libtvm_runtime.so"
model=build/bench/llm-model
if [ ! -f "$model/.made" ] || [ benches/llm_bench.py -nt "$model/.made" ] || [ tests/python/relax/llm_model.py -nt "$model/.made" ]; then
  rm -rf "$model"
  "$ref/bin/python" benches/llm_bench.py make "$model" >build/bench/llm-model.log 2>&1 || { cat build/bench/llm-model.log; exit 1; }
  touch "$model/.made"
fi
cc -O2 -Iinclude benches/kv_bookkeeping.c -o build/bench/kv_bookkeeping -ldl
site="$("$ref/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')"
out=build/bench/llm.txt
: >"$out"
for _ in $(seq "$ROUNDS"); do
  TVM_USE_RUNTIME_LIB=1 TVM_LIBRARY_PATH="$libdir" "$py" benches/llm_bench.py run "$model" | sed 's/^/ours /' >>"$out"
  (unset TVM_LIBRARY_PATH; TVM_USE_RUNTIME_LIB=1 "$ref/bin/python" benches/llm_bench.py run "$model") | sed 's/^/tvm /' >>"$out"
  echo "ours bookkeeping_c_ns $(build/bench/kv_bookkeeping "$PWD/target/release/libtvm_runtime.so")" >>"$out"
  echo "tvm bookkeeping_c_ns $(build/bench/kv_bookkeeping "$site/tvm_ffi/lib/libtvm_ffi.so" "$site/tvm/lib/libtvm_runtime.so")" >>"$out"
done
median() { sort -g | awk '{a[NR]=$1} END {print (NR%2) ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2}'; }
printf '%-20s %12s %12s %8s  %s\n' measurement ours tvm ratio "(ratio: ours/tvm; for tok/s higher is better, else lower)"
for name in $(awk '{print $2}' "$out" | sort -u); do
  o=$(awk -v n="$name" '$1 == "ours" && $2 == n {print $3}' "$out" | median)
  t=$(awk -v n="$name" '$1 == "tvm" && $2 == n {print $3}' "$out" | median)
  printf '%-20s %12.2f %12.2f %8s\n' "$name" "$o" "$t" "$(awk -v o="$o" -v t="$t" 'BEGIN {printf "%.2f", o / t}')"
done
