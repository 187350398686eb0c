#!/usr/bin/env bash
# Side-by-side benchmarks of the tvm-ffi ABI (issue 24): the same Python code
# (benches/tvm_ffi_bench.py, through apache-tvm-ffi's Cython core) in a venv whose libtvm_ffi.so
# is this library and in one with the wheel's own, processes alternating, ROUNDS rounds; prints
# the median ns per operation of each and the ratio ours/theirs. Also the C-level call cost
# (TVMFFIFunctionCall into a C callback: build/bench/tvm_ffi_call, compiled here).
#   [ROUNDS=5] scripts/bench-tvm-ffi.sh [calls array tensor objects map]
set -euo pipefail
cd "$(dirname "$0")/.."
ROUNDS="${ROUNDS:-5}"
cargo build --release --quiet
ffi_lib="$(./scripts/libtvm-ffi.sh)"
ours="$(./scripts/tvm-ffi-venv.sh "$PWD/build/tvm-ffi-venv" "$ffi_lib")"
theirs="$(TVM_FFI_REFERENCE=1 ./scripts/tvm-ffi-venv.sh "$PWD/build/tvm-ffi-venv-ref")"
wheel_lib="$(dirname "$theirs")/../tvm-ffi-wheel-lib/libtvm_ffi.so"
mkdir -p build/bench
cc -O2 -Iinclude benches/tvm_ffi_call.c -o build/bench/tvm_ffi_call -ldl
out=build/bench/tvm-ffi.txt
: >"$out"
for _ in $(seq "$ROUNDS"); do
  "$ours" benches/tvm_ffi_bench.py "$@" | sed 's/^/ours /' >>"$out"
  "$theirs" benches/tvm_ffi_bench.py "$@" | sed 's/^/tvm /' >>"$out"
  echo "ours c_function_call $(build/bench/tvm_ffi_call "$ffi_lib")" >>"$out"
  echo "tvm c_function_call $(build/bench/tvm_ffi_call "$wheel_lib")" >>"$out"
done
median() { sort -g | awk '{a[NR]=$1} END {print (NR%2) ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2}'; }
printf '%-28s %12s %12s %8s\n' measurement ours_ns tvm_ns ratio
for name in $(awk '{print $2}' "$out" | sort -u); do
  o=$(awk -v n="$name" '$1 == "ours" && $2 == n {print $3}' "$out" | median)
  t=$(awk -v n="$name" '$1 == "tvm" && $2 == n {print $3}' "$out" | median)
  printf '%-28s %12s %12s %8s\n' "$name" "$o" "$t" "$(awk -v o="$o" -v t="$t" 'BEGIN {printf "%.2f", o / t}')"
done
