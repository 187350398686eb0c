#!/usr/bin/env bash
# The simulated CUDA driver of tools/cudasim (test support, not shipped): checks its formatting
# and lints, runs its own tests, builds it (release) and exports TVM_CUDA_LIBRARY so that the
# CUDA tests of the Rust, Python and C suites run against it. scripts/test.sh sources this file
# before its test runs; run alone, it then runs the runtime's CUDA tests against the simulator.
# Needs nothing beyond Rust (and, run alone, what scripts/test.sh installs: cmake, numpy, pytest).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

echo "== cudasim (the simulated CUDA driver): fmt, clippy, its tests, release build"
cargo fmt -p cudasim --check
cargo clippy -p cudasim --all-targets --quiet -- -D warnings
cargo test -p cudasim --quiet
cargo build -p cudasim --release --quiet
export TVM_CUDA_LIBRARY="$PWD/target/release/libcudasim.so"
echo "TVM_CUDA_LIBRARY=$TVM_CUDA_LIBRARY"

if [[ "${BASH_SOURCE[0]}" == "$0" ]]; then
  echo "== the runtime's CUDA tests on the simulated driver (Rust, Python, C)"
  cargo build --release --quiet
  cargo test --quiet --test cuda
  python3 -m pytest -q tests/python/test_cuda.py
  cmake -S ctests -B build/ctests-cuda -DCMAKE_BUILD_TYPE=Debug -DTVM_RUNTIME_LIB_DIR="$PWD/target/release" >/dev/null
  cmake --build build/ctests-cuda --target cuda >/dev/null
  ctest --test-dir build/ctests-cuda -R '^cuda$' --output-on-failure
fi
