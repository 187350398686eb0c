#!/usr/bin/env bash
# Builds libtvm_runtime.so and runs the example program against it.
set -euo pipefail
cd "$(dirname "$0")/.."
command -v cc >/dev/null 2>&1 || { apt-get update -qq && apt-get install -y -qq gcc >/dev/null; }
cargo build --release --quiet
mkdir -p build/examples
cc -O2 -Wall -Iinclude examples/hello.c -o build/examples/hello -Ltarget/release -ltvm_runtime
LD_LIBRARY_PATH="$PWD/target/release" ./build/examples/hello
