#!/usr/bin/env bash
# Runs the LLM tests of tests/python/relax (TVM's KV-cache and RNN-state cases, the MLC-style
# models' scenario, llama_tiny) on TVM v0.27's own runtime-only library instead of this one
# (TVM_REFERENCE=1): the harness is checked against the runtime it compares with. Uses the
# venv and models that scripts/test-tvm-python.sh made (run that first).
#   scripts/test-llm-reference.sh [PYTEST_ARGS...]
set -euo pipefail
cd "$(dirname "$0")/.."
ref="${TVM27_REF_VENV:-target/tvm27-ref}"
models="$PWD/target/relax-models"
for d in kv-kernels llm; do
  [ -f "$models/$d/.made" ] || { echo "test-llm-reference: $models/$d is missing (scripts/test-tvm-python.sh)" >&2; exit 1; }
done
"$ref/bin/python" -c "import pytest, xdist" 2>/dev/null || "$ref/bin/pip" install -q pytest pytest-xdist
export TVM_REFERENCE=1 TVM_USE_RUNTIME_LIB=1 RELAX_KV_KERNELS="$models/kv-kernels" RELAX_LLM_MODELS="$models/llm"
unset TVM_LIBRARY_PATH
"$ref/bin/python" -m pytest -q -p no:cacheprovider -n 2 tests/python/relax/test_kv_cache_cases.py "$@"
exec "$ref/bin/python" -m pytest -q -p no:cacheprovider tests/python/relax/test_rnn_state_cases.py tests/python/relax/test_llm.py "$@"
