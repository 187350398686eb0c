#!/usr/bin/env bash
# Runs TVM v0.27's own Python package (runtime-only mode) over this library: the pytest files
# of tests/python/relax.
#   scripts/test-tvm-python.sh [VENV_DIR] [PYTEST_ARGS...]
# VENV_DIR (default target/tvm27-venv) is made once and reused: apache-tvm 0.27.0.post1 with
# apache-tvm-ffi 0.1.15.post2 (the tvm-ffi ABI this library implements), numpy and pytest. Its
# tvm_ffi/lib/libtvm_ffi.so becomes a link to this library's libtvm_ffi.so (scripts/libtvm-ffi.sh,
# scripts/tvm-ffi-venv.sh), and VENV_DIR/tvm-runtime-lib/libtvm_runtime.so, the folder
# TVM_LIBRARY_PATH names, a link to libtvm_runtime.so, whose symbols resolve to the
# libtvm_ffi.so loaded first: the process holds one runtime. The library is $TVM_RUNTIME_LIB,
# default target/release/libtvm_runtime.so (build it first: cargo build --release).
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
"$venv/bin/python" -c "import xdist" 2>/dev/null || "$venv/bin/pip" install -q pytest-xdist
# Models made at test time by TVM's own compilers: venvs with the untouched wheels (their own
# libtvm_ffi.so), made once: v0.27 makes the exports with OpenCL kernels
# (tests/python/relax/make_device_models.py) and the model zoo (make_zoo.py); v0.25, v0.26 and
# v0.27 make the six fixture models each (make_release_models.py), with their own outputs.
# apache-tvm 0.25.0 imports only with apache-tvm-ffi 0.1.12 (it was built against that ABI).
ref_venv() { # VERSION FFI_VERSION DIR
  if [ ! -x "$3/bin/python" ] || ! "$3/bin/python" -c "import importlib.metadata as m; assert m.version('apache-tvm') == '$1'" 2>/dev/null; then
    python3 -m venv "$3"
    "$3/bin/pip" install -q "apache-tvm==$1" "apache-tvm-ffi==$2" numpy
  fi
}
make_models() { # PYTHON SCRIPT OUT [FILES THE MODELS ALSO DEPEND ON...]
  local py="$1" script="$2" out="$3" stale=0 dep
  shift 3
  [ -f "$out/.made" ] || stale=1
  for dep in "$script" "$@"; do [ "$dep" -nt "$out/.made" ] && stale=1; done
  if [ $stale = 1 ]; then
    rm -rf "$out" && mkdir -p "$out"
    "$py" "$script" "$out" >"$out.log" 2>&1 || { cat "$out.log" >&2; exit 1; }
    touch "$out/.made"
  fi
}
models="$PWD/target/relax-models"
ref="${TVM27_REF_VENV:-target/tvm27-ref}"
ref_venv 0.27.0.post1 0.1.15.post2 "$ref"
make_models "$ref/bin/python" tests/python/relax/make_device_models.py "$models/device"
make_models "$ref/bin/python" tests/python/relax/make_zoo.py "$models/zoo" \
  tests/python/relax/zoo_common.py tests/python/relax/zoo_models_nn.py tests/python/relax/zoo_models_tir.py
# TVM's own answers to the language-model builtins on fixed inputs (test_builtin_cases.py).
make_models "$ref/bin/python" tests/python/relax/builtin_cases.py "$models/builtins"
# LLMs (issue 31): the kernels of TVM's KV-cache and RNN-state tests (make_kv_kernels.py), and
# MLC-style models with TVM's own answers to the serving scenario (make_llm_models.py).
make_models "$ref/bin/python" tests/python/relax/make_kv_kernels.py "$models/kv-kernels"
make_models "$ref/bin/python" tests/python/relax/make_llm_models.py "$models/llm" \
  tests/python/relax/llm_model.py tests/python/relax/llm_scenario.py
release_dirs=()
for r in 0.25.0:0.1.12 0.26.0:0.1.15.post2 0.27.0.post1:0.1.15.post2; do
  v="${r%%:*}" rv="target/tvm${v%%.post*}-ref"
  [ "$v" = 0.27.0.post1 ] && rv="$ref"
  ref_venv "$v" "${r##*:}" "$rv"
  make_models "$rv/bin/python" tests/python/relax/make_release_models.py "$models/release-$v"
  release_dirs+=("$models/release-$v")
done
# CUDA kernels: a compiler venv with NVRTC (scripts/relax-cuda-venv.sh), run on the simulated
# driver (tools/cudasim, built by scripts/test-cuda.sh, which test.sh sources first).
cuda_py="$(scripts/relax-cuda-venv.sh "${TVM27_CUDA_VENV:-target/tvm27-cuda}")"
make_models "$cuda_py" tests/python/relax/make_cuda_models.py "$models/cuda" tests/python/relax/cuda_setup.py
make_models "$cuda_py" tests/python/relax/make_cuda_llm.py "$models/cuda-llm" \
  tests/python/relax/cuda_setup.py tests/python/relax/llm_model.py tests/python/relax/llm_scenario.py
if [ -z "${TVM_CUDA_LIBRARY:-}" ] && [ -f target/release/libcudasim.so ]; then
  export TVM_CUDA_LIBRARY="$PWD/target/release/libcudasim.so"
fi
export RELAX_DEVICE_MODELS="$models/device" RELAX_ZOO="$models/zoo" RELAX_CUDA_MODELS="$models/cuda"
export RELAX_CUDA_LLM="$models/cuda-llm"
export RELAX_BUILTIN_REFS="$models/builtins"
export RELAX_KV_KERNELS="$models/kv-kernels" RELAX_LLM_MODELS="$models/llm"
RELAX_RELEASE_MODELS="$(IFS=:; echo "${release_dirs[*]}")"
export RELAX_RELEASE_MODELS
# tvm_ffi loads libtvm_ffi.so (made from the same build as $lib), tvm then $lib: one runtime.
py="$(scripts/tvm-ffi-venv.sh "$venv" "$(scripts/libtvm-ffi.sh "$(dirname "$lib")")")"
libdir="$venv/tvm-runtime-lib"
mkdir -p "$libdir"
ln -sfn "$lib" "$libdir/libtvm_runtime.so"
export TVM_USE_RUNTIME_LIB=1 TVM_LIBRARY_PATH="$libdir"
# TVM's KV-cache cases are kernel-bound and single-threaded: two workers.
"$py" -m pytest -q -p no:cacheprovider -n 2 tests/python/relax/test_kv_cache_cases.py "$@"
exec "$py" -m pytest -q -p no:cacheprovider tests/python/relax --ignore=tests/python/relax/test_kv_cache_cases.py "$@"
