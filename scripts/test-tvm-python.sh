#!/usr/bin/env bash
# Runs TVM v0.27's own Python package (runtime-only mode) over this library: the pytest files
# of tests/python/relax.
#   scripts/test-tvm-python.sh [VENV_DIR] [PYTEST_ARGS...]
# VENV_DIR (default target/tvm27-venv) is made once and reused: apache-tvm 0.27.0.post1 with
# apache-tvm-ffi 0.1.15.post2 (the tvm-ffi ABI this library implements), numpy and pytest. Its
# tvm_ffi/lib/libtvm_ffi.so becomes a link to this library (scripts/tvm-ffi-venv.sh), and
# VENV_DIR/tvm-runtime-lib/libtvm_runtime.so, the folder TVM_LIBRARY_PATH names, a link to the
# same file, so that the process loads it once. The library is $TVM_RUNTIME_LIB, default
# target/release/libtvm_runtime.so (build it first: cargo build --release).
set -euo pipefail
cd "$(dirname "$0")/.."
venv="${1:-target/tvm27-venv}"
shift || true
lib="${TVM_RUNTIME_LIB:-target/release/libtvm_runtime.so}"
if [ ! -f "$lib" ]; then
  echo "test-tvm-python: $lib is missing (cargo build --release)" >&2
  exit 1
fi
lib="$(realpath "$lib")"
if [ ! -x "$venv/bin/python" ]; then
  python3 -m venv "$venv"
fi
venv="$(realpath "$venv")" # tvm-ffi-venv.sh makes links with the path it is given
if ! "$venv/bin/python" - <<'EOF' 2>/dev/null
import importlib.metadata as m
assert m.version("apache-tvm") == "0.27.0.post1"
assert m.version("apache-tvm-ffi") == "0.1.15.post2"
import numpy, pytest
EOF
then
  "$venv/bin/pip" install -q "apache-tvm==0.27.0.post1" "apache-tvm-ffi==0.1.15.post2" numpy pytest
fi
# Models made at test time by TVM's own compiler: a second venv with the untouched wheel
# (its own libtvm_ffi.so), made once. Exports with OpenCL kernels (tests/python/relax/
# make_device_models.py) and the model zoo (make_zoo.py, with TVM's own outputs).
ref="${TVM27_REF_VENV:-target/tvm27-ref}"
if [ ! -x "$ref/bin/python" ] || ! "$ref/bin/python" -c "import importlib.metadata as m; assert m.version('apache-tvm') == '0.27.0.post1'" 2>/dev/null; then
  python3 -m venv "$ref"
  "$ref/bin/pip" install -q "apache-tvm==0.27.0.post1" "apache-tvm-ffi==0.1.15.post2" numpy
fi
models="target/relax-models"
for gen in make_device_models:device make_zoo:zoo; do
  script="tests/python/relax/${gen%%:*}.py" out="$models/${gen##*:}"
  [ -f "$script" ] || continue
  if [ ! -f "$out/.made" ] || [ "$script" -nt "$out/.made" ]; then
    rm -rf "$out" && mkdir -p "$out"
    "$ref/bin/python" "$script" "$out" >"$out.log" 2>&1 || { cat "$out.log" >&2; exit 1; }
    touch "$out/.made"
  fi
done
export RELAX_DEVICE_MODELS="$PWD/$models/device" RELAX_ZOO="$PWD/$models/zoo"
py="$(scripts/tvm-ffi-venv.sh "$venv" "$lib")"
libdir="$venv/tvm-runtime-lib"
mkdir -p "$libdir"
ln -sfn "$lib" "$libdir/libtvm_runtime.so"
export TVM_USE_RUNTIME_LIB=1 TVM_LIBRARY_PATH="$libdir"
exec "$py" -m pytest -q -p no:cacheprovider tests/python/relax "$@"
