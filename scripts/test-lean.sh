#!/usr/bin/env bash
# Issue 17 (lean serving): the minimal library (Cargo features off: CPU device, DSO and
# system-lib modules, graph executor) is linted, built, and the C tests that apply run against
# it; the stripped sizes of both builds are printed and checked against generous bounds. Called by
# scripts/test.sh after the main suite (which builds and tests the default library).
set -euo pipefail
cd "$(dirname "$0")/.."

echo "== minimal build (--no-default-features): clippy"
cargo clippy --all-targets --no-default-features --quiet -- -D warnings
echo "== each Cargo feature alone over the minimal build (and relax without vm): cargo check"
# The features of README "Library size and Cargo features"; a feature must build without the
# others it does not name in Cargo.toml (relax needs tvm-ffi, not vm: the allocators are the
# core's, crates/core/src/memory.rs). Own target folder: the debug library of the main suite stays as it is.
for f in opencl cuda contrib profiling vm aot rpc byoc tvm-ffi relax relax,opencl relax,cuda vm,profiling; do
  RUSTFLAGS="-D warnings" CARGO_TARGET_DIR=target/features \
    cargo check --lib --quiet --no-default-features --features "$f" || { echo "feature set '$f' does not build"; exit 1; }
done
echo "== minimal build: release library"
CARGO_TARGET_DIR=target/minimal cargo build --release --lib --quiet --no-default-features
echo "== minimal build: the C tests of what it contains"
dir=build/ctests-minimal
cmake -S ctests -B "$dir" -DCMAKE_BUILD_TYPE=Debug -DTVM_RT_MINIMAL=ON -DTVM_RUNTIME_LIB_DIR="$PWD/target/minimal/release" >/dev/null
cmake --build "$dir" -j2 >/dev/null
ctest --test-dir "$dir" --output-on-failure \
  -R '^(header_(dlpack|c_runtime_api|c_backend_api)_.*|layout|packed|objects|registry|ndarray|device|backend|graph|modules|syslib|matmul|matmul_2threads)$'

echo "== library sizes (stripped)"
default=$(stat -c %s target/release/libtvm_runtime.so)
minimal=$(stat -c %s target/minimal/release/libtvm_runtime.so)
awk -v d="$default" -v m="$minimal" 'BEGIN { printf "default %d bytes, minimal %d bytes (%.2fx)\n", d, m, m / d }'
# Generous: the minimal build must leave out a real share of the code, and stay small in absolute
# terms (1.0 MB when this was written); the default build grows with every subsystem, so it is
# only reported (scripts/bench.sh size breaks both down).
test "$minimal" -lt $((default * 80 / 100)) || { echo "the minimal build is not much smaller than the default"; exit 1; }
test "$minimal" -lt 1400000 || { echo "the minimal build grew past 1.4 MB"; exit 1; }
