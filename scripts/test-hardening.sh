#!/usr/bin/env bash
# Hardening steps of the test suite (README "Robustness"), after the release library is built:
#   1. every fuzz target for a bounded time (scripts/fuzz.sh; fails on a crash, a hang, an RSS over
#      2 GiB or one allocation over 2 GiB);
#   2. valgrind memcheck on 50 load/run/unload iterations of mlp.so (CPU) and mlp2_opencl.so
#      (OpenCL on PoCL): no definitely lost byte, no invalid access;
#   3. the concurrency stress under helgrind, short configuration: no race reported outside the
#      synchronisation that valgrind cannot see (scripts/valgrind/helgrind.supp says which).
# The 2,000-iteration RSS loops and the stress test also run in CTest (plain and ASan builds).
#
# HARDENING_LONG=1 runs the long configuration by hand: FUZZ_SECONDS per target (default 600),
# 500 memcheck iterations, the stress for 60 s (plain) and a longer helgrind run.
set -euo pipefail
cd "$(dirname "$0")/.."

long=${HARDENING_LONG:-0}
if ! command -v valgrind >/dev/null 2>&1; then
  echo "== installing valgrind"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq && apt-get install -y -qq valgrind >/dev/null
fi

if [ "$long" = 1 ]; then
  fuzz_secs=${FUZZ_SECONDS:-600}; mem_iters=500; stress=(60 8 3); hg=(0 8 50)
else
  fuzz_secs=${FUZZ_SECONDS:-12}; mem_iters=50; stress=(2 8 3); hg=(0 8 5)
fi

echo "== fuzz: every target for ${fuzz_secs}s"
./scripts/fuzz.sh run "$fuzz_secs"

# The shipped release library is stripped; valgrind checks the same code with its symbol table
# (the suppressions name our functions), built in the `valgrind` profile.
echo "== release library with symbols for valgrind (cargo --profile valgrind)"
cargo build --profile valgrind --lib --quiet
lib="$PWD/target/valgrind"
out="$PWD/build/hardening"
mkdir -p "$out"
for p in hardening_loop hardening_stress; do
  cc -O1 -g -Wall -Wextra -Wpedantic -Werror -Iinclude "ctests/$p.c" -o "$out/$p" -L"$lib" -ltvm_runtime -lm -lpthread
done
export LD_LIBRARY_PATH="$lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export TVM_FIXTURES="${TVM_FIXTURES:-$PWD/../shared/fixtures}"
export TVM_OPENCL_PROGRAM_CACHE="$out/opencl-cache"

vg_ok() { # log file: the error summary says 0 errors
  grep -q "ERROR SUMMARY: 0 errors" "$1"
}

for dev in cpu opencl; do
  echo "== memcheck: $mem_iters load/run/unload iterations ($dev)"
  log="$out/memcheck-$dev.log"
  rc=0
  valgrind --leak-check=full --errors-for-leak-kinds=definite --show-leak-kinds=definite \
    --suppressions=scripts/valgrind/memcheck.supp --error-exitcode=9 --num-callers=40 \
    "$out/hardening_loop" "$dev" "$mem_iters" norss >"$log" 2>&1 || rc=$?
  if [ $rc = 77 ]; then echo "skipped (no OpenCL device)"; continue; fi
  grep -E "definitely lost|ERROR SUMMARY|iterations" "$log" | sed 's/^==[0-9]*== //'
  if [ $rc != 0 ] || ! vg_ok "$log"; then
    tail -n 80 "$log"
    echo "!! memcheck failed ($dev): $log"
    exit 1
  fi
done

echo "== stress: ${stress[1]} threads, ${stress[0]}s (plain)"
TVM_NUM_THREADS=2 "$out/hardening_stress" "${stress[@]}" | tail -n 2

echo "== helgrind: stress with ${hg[1]} threads, ${hg[2]} rounds each"
log="$out/helgrind.log"
rc=0
TVM_NUM_THREADS=2 valgrind --tool=helgrind --suppressions=scripts/valgrind/helgrind.supp --error-exitcode=9 \
  --num-callers=40 "$out/hardening_stress" "${hg[@]}" >"$log" 2>&1 || rc=$?
grep -E "ERROR SUMMARY|checks" "$log" | sed 's/^==[0-9]*== //'
if [ $rc != 0 ] || ! vg_ok "$log"; then
  tail -n 120 "$log"
  echo "!! helgrind reported a race: $log"
  exit 1
fi
echo "hardening: fuzz, memcheck, stress and helgrind passed"
