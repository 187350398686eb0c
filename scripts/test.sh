#!/usr/bin/env bash
# Runs every test of the project on a fresh machine: installs what it needs (cmake, PoCL), checks
# formatting, lints and header drift, runs the Rust tests, then the C tests (CTest) against the
# release library, plain and under AddressSanitizer + UBSan.
set -euo pipefail
cd "$(dirname "$0")/.."

need_apt=()
command -v cmake >/dev/null 2>&1 || need_apt+=(cmake)
command -v cc >/dev/null 2>&1 || need_apt+=(gcc)
command -v c++ >/dev/null 2>&1 || need_apt+=(g++)
command -v pkg-config >/dev/null 2>&1 || need_apt+=(pkg-config)
# OpenCL tests run for real on PoCL (the CPU OpenCL implementation) through the ICD loader.
if ! ls /etc/OpenCL/vendors/*.icd >/dev/null 2>&1 || ! ldconfig -p | grep -q 'libOpenCL.so.1 '; then
  need_apt+=(pocl-opencl-icd ocl-icd-libopencl1)
fi
# oneDNN for the BYOC DNNL runtime (opened at run time; headers for the binding checks).
{ [ -f /usr/include/oneapi/dnnl/dnnl.h ] && ldconfig -p | grep -q 'libdnnl.so.2 '; } || need_apt+=(libdnnl2 libdnnl-dev)
# tvm-ffi's C++ suite (scripts/test-tvm-ffi-cpp.sh) builds against Debian's googletest sources.
[ -d /usr/src/googletest ] || need_apt+=(googletest)
if [ ${#need_apt[@]} -gt 0 ]; then
  echo "== installing ${need_apt[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq && apt-get install -y -qq "${need_apt[@]}" >/dev/null
fi
python3 -c "import numpy, pytest" >/dev/null 2>&1 || {
  echo "== installing numpy, pytest"
  python3 -m pip install -q "numpy<3" pytest >/dev/null 2>&1 || python3 -m pip install -q --break-system-packages "numpy<3" pytest >/dev/null
}
rustup component list --installed 2>/dev/null | grep -q rustfmt || rustup component add rustfmt clippy >/dev/null 2>&1 || true

# Seconds per step, printed at the end (also when a step fails): what CI time goes to.
timings=()
last=$SECONDS
mark() {
  timings+=("$(printf '%6ds  %s' $((SECONDS - last)) "$1")")
  last=$SECONDS
}
trap 'echo "== seconds per step (${SECONDS}s in all)"; printf "%s\n" "${timings[@]}"' EXIT
mark "installs"

# tvm-ffi 0.1.15's C++ suite is built once into ~/.cache (minutes on a fresh machine): started
# now, in the background, and waited for where it runs below.
mkdir -p build
./scripts/test-tvm-ffi-cpp.sh --build >build/tvm-ffi-cpp-build.log 2>&1 &
cpp_suite_build=$!

# The library's crates (README "Layout"): the face (this package) and the crates it is built of.
runtime_crates=(-p tvm-runtime -p tvm-runtime-core -p tvm-runtime-classic -p tvm-runtime-opencl -p tvm-runtime-cuda
  -p tvm-runtime-tvm-ffi -p tvm-runtime-relax -p tvm-runtime-library)
echo "== cargo fmt --check"
cargo fmt --check "${runtime_crates[@]}"
echo "== cargo clippy"
cargo clippy "${runtime_crates[@]}" --all-targets --quiet -- -D warnings
echo "== one no_mangle spelling; no comment cites a document the repository does not hold"
# #[no_mangle]: the MSRV (1.80) predates #[unsafe(no_mangle)]. The spec files TVM's facts were
# first written in live outside the repository; code says what TVM does instead.
if grep -rn --include=*.rs 'unsafe(no_mangle)' src crates api tools fuzz examples tests; then exit 1; fi
if grep -rnE '\b(formats|devices|graph-executor|backend|c-api|globals)\.md\b' src crates api tools fuzz examples tests ctests cxx include; then
  exit 1
fi
mark "fmt, clippy, source checks"
source scripts/test-cuda.sh  # the simulated CUDA driver: its own tests, then TVM_CUDA_LIBRARY for the CUDA tests below
mark "cudasim"
echo "== cargo build --release"
cargo build --release --quiet
echo "== cargo test (unit, integration, exports, header drift)"
TVM_RT_LIB="$PWD/target/release/libtvm_runtime.so" cargo test --quiet "${runtime_crates[@]}"
mark "release build, cargo test"

echo "== the README's first command: the demo model"
out=$(./scripts/demo.sh)
echo "$out"
grep -q "output \[1, 3\]: 4.85 2.3 10.55" <<<"$out"
mark "demo"

./scripts/test-cli.sh  # tvmrt and the safe Rust API: tests, examples, the README's tvmrt commands
mark "tvmrt, Rust API"
# Issue 26: the bundle carried to a GPU machine, and its check run here on the simulated driver.
./scripts/gpu-bundle.sh
./scripts/gpu-check.sh --simulator
mark "GPU bundle and check (simulator)"
./scripts/test-rpc.sh
mark "RPC"
./scripts/test-triton.sh  # the Triton Inference Server backend in the real server (issue 27)
mark "Triton"

echo "== python ctypes FFI test"
python3 -m pytest -q tests/python --ignore=tests/python/relax --ignore=tests/python/llm_server
mark "Python ctypes tests"
echo "== the tvm-ffi ABI: apache-tvm-ffi 0.1.15's own test suite on this library"
./scripts/test-tvm-ffi.sh
mark "tvm-ffi Python suite"
echo "== libtvm_ffi.so and libtvm_runtime.so: one name each, both in one process, the C++ API (issue 33)"
./scripts/test-ffi-lib.sh
mark "libtvm_ffi.so, C++ API"
echo "== the tvm-ffi 0.1.15-post2 Rust crate's own tests (crates.io) on this library as libtvm_ffi.so"
./scripts/test-tvm-ffi-rust.sh
mark "tvm-ffi Rust crate"
echo "== tvm-ffi 0.1.15's C++ suite (gtest) on this library as libtvm_ffi.so"
wait "$cpp_suite_build" || { cat build/tvm-ffi-cpp-build.log >&2; exit 1; }
mark "tvm-ffi C++ suite: waiting for its build"
./scripts/test-tvm-ffi-cpp.sh
mark "tvm-ffi C++ suite"
echo "== the Relax VM (issue 25): TVM v0.27's own Python, runtime-only, on this library"
./scripts/test-tvm-python.sh
mark "Relax VM under TVM's Python"
echo "== the Relax VM through the tvm-ffi C ABI: examples/relax_vm.c on every v0.27 export"
./scripts/test-relax-c.sh
SANITIZE=1 ./scripts/test-relax-c.sh  # ASan + LSan + UBSan: no leak per VM, module or call
mark "Relax VM from C (plain, sanitizers)"
echo "== an LLM through the tvm-ffi C ABI: examples/llm_generate.c on llama_tiny (issue 31)"
./scripts/test-llm-c.sh
mark "LLM from C"
echo "== the LLM engine, tvmrt generate and tvmrt serve under the openai client (issue 32)"
./scripts/test-llm-engine.sh
mark "LLM engine"
./scripts/test-byoc.sh
mark "BYOC"

for flavour in plain asan; do
  dir="build/ctests-$flavour"
  san=OFF; [ "$flavour" = asan ] && san=ON
  echo "== ctest ($flavour)"
  cmake -S ctests -B "$dir" -DCMAKE_BUILD_TYPE=Debug -DTVM_RT_SANITIZE=$san \
    -DTVM_RUNTIME_LIB_DIR="$PWD/target/release" >/dev/null
  cmake --build "$dir" -j2 >/dev/null
  ctest --test-dir "$dir" --output-on-failure
done
mark "ctest plain, asan"

./scripts/test-hardening.sh # fuzz targets, memcheck loops, helgrind stress (issue 18)
mark "hardening"

echo "== install with CMake, then the C tests through find_package (shared and static) and pkg-config"
prefix="$PWD/build/install"
rm -rf "$prefix"
cmake -S . -B build/pkg -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build/pkg >/dev/null
cmake --install build/pkg --prefix "$prefix" >/dev/null
test "$(readelf -d "$prefix/lib/libtvm_runtime.so" | grep -o 'soname: \[.*\]')" = "soname: [libtvm_runtime.so]"
# libtvm_ffi.so is a library of its own name (not a link), with the C++ API; the installed
# libtvm_runtime.so resolves to it (so the C tests below run on it).
test ! -L "$prefix/lib/libtvm_ffi.so"
test "$(readelf -d "$prefix/lib/libtvm_ffi.so" | grep -o 'soname: \[.*\]')" = "soname: [libtvm_ffi.so]"
nm -D --defined-only "$prefix/lib/libtvm_ffi.so" | grep ' _ZN3tvm3ffi6Module12LoadFromFileERKNS0_6StringE$' >/dev/null
# The Triton backend where tritonserver --backend-directory=$prefix/backends finds it.
nm -D --defined-only "$prefix/backends/tvm/libtriton_tvm.so" | grep ' TRITONBACKEND_ModelInstanceExecute$' >/dev/null
mkdir -p build/examples
PKG_CONFIG_PATH="$prefix/lib/pkgconfig" cc -Wall -Werror examples/hello.c -o build/examples/hello-pc \
  $(PKG_CONFIG_PATH="$prefix/lib/pkgconfig" pkg-config --cflags --libs tvm_runtime)
LD_LIBRARY_PATH="$prefix/lib" ./build/examples/hello-pc
echo "== the C++ example through find_package"
cmake -S examples/cpp -B build/cpp -DCMAKE_PREFIX_PATH="$prefix" >/dev/null
cmake --build build/cpp >/dev/null
LD_LIBRARY_PATH="$prefix/lib" ./build/cpp/run_model_cpp "$PWD/build/demo/demo_model.so" | grep "output \[1, 3\]: 4.85 2.3 10.55"
./scripts/test-cpp.sh
for kind in shared static; do
  st=OFF; [ "$kind" = static ] && st=ON
  cmake -S ctests -B "build/ctests-installed-$kind" -DTVM_RT_USE_INSTALLED=ON -DTVM_RT_LINK_STATIC=$st \
    -DCMAKE_PREFIX_PATH="$prefix" >/dev/null
  cmake --build "build/ctests-installed-$kind" -j2 >/dev/null
  LD_LIBRARY_PATH="$prefix/lib" ctest --test-dir "build/ctests-installed-$kind" --output-on-failure
done
mark "install, C/C++ through CMake and pkg-config"

./scripts/test-lean.sh  # issue 17: the minimal build (features off) with the C tests that apply, library sizes
mark "minimal build, sizes"
