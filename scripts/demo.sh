#!/usr/bin/env bash
# Builds libtvm_runtime.so and the tvmrt tool, builds a small demo model library with the
# project's own fixture builder (TVM's export conventions, no TVM needed), looks inside it and
# runs it with tvmrt, and runs it from C through the C API.
set -euo pipefail
cd "$(dirname "$0")/.."
command -v cc >/dev/null 2>&1 || { apt-get update -qq && apt-get install -y -qq gcc >/dev/null; }
cargo build --release --quiet
# The tools build in their own target directory: see "Building the tools" in the README.
cargo build --release --quiet -p tvmrt --target-dir target/tools
mkdir -p build/demo
model=$(cargo run --release --quiet --example demo_model -- build/demo)
cc -O2 -Wall -Iinclude examples/run_model.c -o build/demo/run_model -Ltarget/release -ltvm_runtime
cc -O2 -Wall -Iinclude examples/hello.c -o build/demo/hello -Ltarget/release -ltvm_runtime
LD_LIBRARY_PATH="$PWD/target/release" ./build/demo/hello
echo "== running $model"
LD_LIBRARY_PATH="$PWD/target/release" ./build/demo/run_model "$PWD/$model"
echo "== tvmrt inspect $model"
./target/tools/release/tvmrt inspect "$model"
echo "== tvmrt run $model"
./target/tools/release/tvmrt run "$model" --output-dir build/demo/out
