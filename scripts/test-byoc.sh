#!/usr/bin/env bash
# BYOC checks beyond the main suite. The main suite (scripts/test.sh) installs the distribution's
# oneDNN 2.x (libdnnl2, libdnnl-dev) and runs the BYOC tests against it (tests/byoc.rs,
# tests/python/test_byoc.py, ctests/byoc.c). This script runs the Rust and Python BYOC tests again
# against oneDNN 3.x: the library of PyPI's onednn-cpu-gomp wheel (oneDNN 3.2, GNU OpenMP, no other
# dependency), unpacked once under build/onednn3 and kept. Run after the release build.
set -euo pipefail
cd "$(dirname "$0")/.."
dir=build/onednn3
find_lib() { if [ -d "$dir" ]; then find "$dir" -name 'libdnnl.so.3.*' -type f | head -1; fi; }
lib=$(find_lib)
if [ -z "$lib" ]; then
  mkdir -p "$dir"
  if python3 -m pip download -q --no-deps --only-binary=:all: -d "$dir" "onednn-cpu-gomp==2023.2.0"; then
    python3 - "$dir" <<'PY'
import glob, sys, zipfile
d = sys.argv[1]
z = zipfile.ZipFile(glob.glob(d + "/onednn_cpu_gomp-*.whl")[0])
for n in z.namelist():
    if "/lib/libdnnl.so.3." in n:
        z.extract(n, d)
PY
    rm -f "$dir"/*.whl
  fi
  lib=$(find_lib)
fi
if [ -z "$lib" ]; then
  if [ "${CI:-}" = true ]; then echo "FAIL: could not fetch oneDNN 3.x (onednn-cpu-gomp)"; exit 1; fi
  echo "SKIP: oneDNN 3.x not available (pip download onednn-cpu-gomp failed)"
  exit 0
fi
lib="$PWD/$lib"
echo "== BYOC tests against oneDNN 3.x ($lib)"
out=$(TVM_DNNL_LIBRARY="$lib" cargo test --quiet --test byoc -- --nocapture cnn_dnnl_matches_tvm 2>&1)
grep -q "using oneDNN 3\." <<<"$out" || { echo "$out"; echo "FAIL: the BYOC tests did not use oneDNN 3.x"; exit 1; }
TVM_DNNL_LIBRARY="$lib" cargo test --quiet --test byoc
# The background build (TVM_DNNL_ASYNC_INIT=1) keeps working: the Rust tests again with it.
TVM_DNNL_ASYNC_INIT=1 TVM_DNNL_LIBRARY="$lib" cargo test --quiet --test byoc
TVM_DNNL_LIBRARY="$lib" python3 -m pytest -q tests/python/test_byoc.py
