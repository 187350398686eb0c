#!/usr/bin/env bash
# Tests of tvmrt (tools/tvmrt) and the safe Rust API (api/, crate tvm-rt): formatting, clippy,
# their unit, integration and doc tests (every subcommand on TVM's fixtures), the API's
# examples, the commands of the README's tvmrt section, the demo's tvmrt output against numpy,
# and tvmrt installed by CMake. Called by scripts/test.sh after the demo; runs alone too.
set -euo pipefail
cd "$(dirname "$0")/.."
# The workspace members build in their own target directory (see "Building the tools" in the
# README): in target/ they would overwrite the library's own build.

python3 -c "import numpy" >/dev/null 2>&1 || {
  echo "== installing numpy"
  python3 -m pip install -q "numpy<3" >/dev/null 2>&1 || python3 -m pip install -q --break-system-packages "numpy<3" >/dev/null
}

echo "== tvmrt and the Rust API (scripts/test-cli.sh): cargo fmt --check, clippy"
cargo fmt --check -p tvm-rt -p tvmrt -p tvm-llm
cargo clippy -p tvm-rt -p tvmrt -p tvm-llm --target-dir target/tools --all-targets --quiet -- -D warnings
echo "== tvmrt, tvm-rt: cargo test (unit, fixtures, doc examples)"
cargo test -p tvm-rt -p tvmrt --target-dir target/tools

[ -x target/tools/release/tvmrt ] && [ -f build/demo/demo_model.so ] || ./scripts/demo.sh >/dev/null

echo "== the demo's tvmrt run against numpy"
python3 - <<'PY'
import numpy as np
# The demo model (examples/demo_model.rs): y = relu(x . W + b).
W = np.array([0.5, -1.0, 0.25, 1.0, 0.5, -0.5, -0.25, 1.5, 1.0, 0.75, -0.5, 2.0], np.float32).reshape(4, 3)
b = np.array([0.1, -0.2, 0.3], np.float32)
x = np.load("build/demo/out/input.data.npy")
y = np.load("build/demo/out/output.0.npy")
assert x.shape == (1, 4) and y.shape == (1, 3), (x.shape, y.shape)
np.testing.assert_allclose(y, np.maximum(x @ W + b, 0), rtol=1e-6, atol=1e-6)
print("tvmrt run output matches numpy:", y)
PY

echo "== the README's tvmrt commands"
cmds=$(awk '/<!-- tvmrt-readme-commands/{f=1; next} f && /^```sh/{g=1; next} g && /^```/{exit} g{print}' README.md)
[ -n "$cmds" ] || { echo "README tvmrt command block not found"; exit 1; }
bash -euxo pipefail -c "$cmds"
python3 -c "import json; d=json.load(open('build/demo/inspect.json')); assert d['graph']['inputs'][0]['name'] == 'data', d"
./target/tools/release/examples/run_model build/demo/demo_model.so 1,2,3,4 | grep "output 0 \[1, 3\]: 4.85 2.3 10.55"

echo "== the LLM example of the Rust API (tvm_rt::llm) on llama_tiny"
if [ -f ../shared/fixtures-llm/llama_tiny/expected.json ]; then
  cargo run -p tvm-rt --example llm_generate --target-dir target/tools --quiet -- ../shared/fixtures-llm/llama_tiny |
    grep "the tokens match expected.json"
elif [ "${CI:-}" = true ]; then
  echo "../shared/fixtures-llm/llama_tiny is missing (CI=true)" >&2
  exit 1
fi

echo "== tvmrt installed by CMake"
prefix="$PWD/build/install-cli"
rm -rf "$prefix"
cmake -S . -B build/pkg -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build/pkg >/dev/null
cmake --install build/pkg --prefix "$prefix" >/dev/null
"$prefix/bin/tvmrt" --version
"$prefix/bin/tvmrt" inspect build/demo/demo_model.so | grep "demo_dense_relu" >/dev/null
"$prefix/bin/tvmrt" rpc-server --help | grep -- "--tracker" >/dev/null
echo "tvmrt: all checks passed"
