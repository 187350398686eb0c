#!/usr/bin/env bash
# Builds everything scripts/gpu-check.sh runs into one ignored folder, build/gpu-bundle/, that
# can be carried to a GPU machine without Rust, CMake or the fixtures (issue 26):
#   lib/       our release libtvm_runtime.so, the simulated driver libcudasim.so (--simulator only)
#   bin/       tvmrt, the C test ctest-cuda (ctests/cuda.c), the bench (benches/gpu.rs)
#   tests/     Rust test binaries: cuda (tests/cuda.rs), vm_programs (the Relay VM's CUDA test),
#              cudasim-{kernels,instructions,mlp2} (the simulator's kernel tests, which run on
#              any driver named by CUDASIM_TEST_DRIVER)
#   tvm/       TVM's own runtime with CUDA (scripts/build-tvm-cuda.sh) where it was built:
#              tvm/v0.8.0/lib, tvm/v0.18.0/lib (libtvm_runtime.so + libcudart.so.12)
#   shared/    the fixtures the checks read (mlp2_nvptx.so and its data, manifests), and
#              mlp2_nvptx_libdevice.so (scripts/nvptx-define-libdevice.py: __nv_fmaf defined)
#   BUNDLE     what was built from which commit
# Usage: scripts/gpu-bundle.sh   (anchors are taken from build/tvm-cuda/ if present; build them
# first with scripts/build-tvm-cuda.sh <TVM source tree>). Needs cmake and a C compiler.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
B="$root/build/gpu-bundle"
SHARED="${TVMRT_SHARED_DIR:-$root/../shared}"
rm -rf "$B" && mkdir -p "$B"/{lib,bin,tests,tvm,shared/fixtures}

# NVIDIA's ptxas (from PyPI) for the simulator run's PTX check; not carried (a GPU has its JIT).
scripts/cuda-wheels.sh >/dev/null

echo "== release library, tvmrt, the simulated driver"
cargo build --release --quiet
cargo build -p cudasim --release --quiet
cargo build -p tvmrt --release --quiet --target-dir target/tools
cp target/release/libtvm_runtime.so target/release/libcudasim.so "$B/lib/"
cp target/tools/release/tvmrt "$B/bin/"

# The executable of each test/bench target, from cargo's JSON messages.
exe_of() { # target-name (reads cargo's JSON on stdin)
  python3 -c '
import json, sys
for line in sys.stdin:
    m = json.loads(line)
    if m.get("reason") == "compiler-artifact" and m.get("executable") and m["target"]["name"] == sys.argv[1]:
        print(m["executable"])' "$1" | tail -1
}
echo "== Rust test binaries (release profile) and the bench"
json=$(cargo test --release --no-run --message-format=json --test cuda --test vm_programs 2>/dev/null)
cp "$(exe_of cuda <<<"$json")" "$B/tests/cuda"
cp "$(exe_of vm_programs <<<"$json")" "$B/tests/vm_programs"
json=$(cargo test -p cudasim --release --no-run --message-format=json --test kernels --test instructions --test mlp2 2>/dev/null)
for t in kernels instructions mlp2; do cp "$(exe_of $t <<<"$json")" "$B/tests/cudasim-$t"; done
json=$(cargo bench --no-run --message-format=json --bench gpu 2>/dev/null)
cp "$(exe_of gpu <<<"$json")" "$B/bin/bench-gpu"
strip --strip-debug "$B"/tests/* "$B"/bin/* 2>/dev/null || true

echo "== the C test ctests/cuda.c"
rm -rf build/gpu-bundle-ctests  # no build RPATH: the check points LD_LIBRARY_PATH at the bundle
cmake -S ctests -B build/gpu-bundle-ctests -DCMAKE_BUILD_TYPE=Release -DCMAKE_SKIP_BUILD_RPATH=ON \
  -DTVM_RUNTIME_LIB_DIR="$root/target/release" >/dev/null
cmake --build build/gpu-bundle-ctests --target cuda >/dev/null
cp build/gpu-bundle-ctests/cuda "$B/bin/ctest-cuda"

echo "== fixtures"
# (mlp2.so, add_one.so: CPU models the driver-less checks run beside a failing CUDA.)
for f in manifest.json mlp2_nvptx.so mlp2_nvptx.input.data.npy mlp2.output.0.npy mlp2.so mlp2.input.data.npy \
  add_one.so add_one.A.npy add_one.B.npy; do
  cp "$SHARED/fixtures/$f" "$B/shared/fixtures/"
done
# The same export with __nv_fmaf defined in its PTX, which TVM's own runtime can load on a GPU.
python3 scripts/nvptx-define-libdevice.py "$B/shared/fixtures/mlp2_nvptx.so" "$B/shared/fixtures/mlp2_nvptx_libdevice.so"
# v0.18 has no CUDA export in the shared fixtures yet; one there would be carried too.
if ls "$SHARED"/fixtures-v0.18/*nvptx* >/dev/null 2>&1; then
  mkdir -p "$B/shared/fixtures-v0.18"
  cp "$SHARED"/fixtures-v0.18/manifest.json "$SHARED"/fixtures-v0.18/*nvptx* "$B/shared/fixtures-v0.18/"
fi

echo "== TVM's own CUDA runtime (the anchors)"
for v in build/tvm-cuda/v*/; do
  [ -f "$v/lib/libtvm_runtime.so" ] || continue
  mkdir -p "$B/tvm/$(basename "$v")"
  cp -r "$v/lib" "$B/tvm/$(basename "$v")/"
done
anchors=$(cd "$B/tvm" && ls)
[ -n "$anchors" ] || echo "note: no anchor in build/tvm-cuda/ (scripts/build-tvm-cuda.sh <TVM source>); the check reports it as skipped"

{
  echo "commit $(git rev-parse HEAD)$(git diff --quiet HEAD -- . ':!build' || echo ' (with uncommitted changes)')"
  echo "built $(date -u +%FT%TZ) on $(uname -m)"
  echo "anchors $(echo ${anchors:-none})"
} >"$B/BUNDLE"
du -sh "$B" | awk '{print "bundle: " $2 " (" $1 ")"}'
