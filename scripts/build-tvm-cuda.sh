#!/usr/bin/env bash
# The anchor for the GPU check (issue 26): builds Apache TVM's own C++ runtime (libtvm_runtime.so)
# with USE_CUDA=ON on a machine without a GPU or a CUDA toolkit.
#
#   scripts/build-tvm-cuda.sh <TVM source tree>      (or TVM_SRC=<tree> scripts/build-tvm-cuda.sh)
#
# The source tree is a checkout of a TVM release (v0.8.0 and v0.18.0 were built this way) with the
# dlpack and dmlc-core submodules in 3rdparty/; nothing of TVM is part of this repository.
# CUDA comes from PyPI wheels: headers (cuda.h, cuda_runtime.h) and libcudart.so.12 from
# nvidia-cuda-runtime-cu12, the crt/ headers cuda_runtime.h includes from nvidia-cuda-nvcc-cu12
# (which has ptxas and libdevice but no nvcc; TVM's runtime has no .cu file to compile). At link time
# libcuda.so is the project's simulated driver (tools/cudasim, soname libcuda.so.1): the built
# library then needs libcuda.so.1, which on a GPU machine is NVIDIA's driver. NVRTC is not used
# by TVM's runtime at run time; its link slot gets libcudart again so that CMake is satisfied.
# TVM v0.18's CMake enables the CUDA language (nvcc) without having a .cu file in the runtime:
# scripts/cmake/no-cuda-language.cmake makes that a no-op.
#
# Output (ignored by git): build/tvm-cuda/<version>/lib/ with libtvm_runtime.so and the
# libcudart.so.12 it needs next to it (RUNPATH $ORIGIN), ready to be carried to a GPU machine.
# Env: CUDA_RUNTIME_WHEEL_VERSION (default 12.9.79), CUDA_NVCC_WHEEL_VERSION (12.9.86),
# JOBS (default: nproc). The wheels are unpacked once into build/tvm-cuda/cuda/ (scripts/cuda-wheels.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
src="${1:-${TVM_SRC:-}}"
[ -n "$src" ] || { echo "usage: $0 <TVM source tree> (or TVM_SRC=...)" >&2; exit 2; }
src=$(cd "$src" && pwd)
[ -f "$src/CMakeLists.txt" ] && [ -f "$src/src/runtime/cuda/cuda_module.cc" ] ||
  { echo "$src is not a TVM source tree with a CUDA runtime" >&2; exit 2; }
[ -f "$src/3rdparty/dlpack/include/dlpack/dlpack.h" ] && [ -d "$src/3rdparty/dmlc-core/include" ] ||
  { echo "$src lacks the dlpack / dmlc-core submodules in 3rdparty/" >&2; exit 2; }
version=$(sed -n 's/^#define TVM_VERSION "\(.*\)"/\1/p' "$src/include/tvm/runtime/c_runtime_api.h")
[ -n "$version" ] || { echo "cannot read TVM_VERSION from $src" >&2; exit 2; }
command -v cmake >/dev/null || { echo "cmake is needed (apt-get install cmake)" >&2; exit 2; }

cuda_dir=$(scripts/cuda-wheels.sh)
runtime_version="${CUDA_RUNTIME_WHEEL_VERSION:-12.9.79}"
wheel="$cuda_dir/nvidia/cuda_runtime"
cudart=$(ls "$wheel"/lib/libcudart.so.* | head -1)

echo "== the simulated driver as link-time libcuda (tools/cudasim)"
cargo build -p cudasim --release --quiet
# A toolkit-shaped folder for TVM's find_cuda(<path>): include/, lib/libcudart.so, lib/libcuda.so.
kit="$root/build/tvm-cuda/toolkit"
rm -rf "$kit" && mkdir -p "$kit/lib"
mkdir -p "$kit/include"
cp -as "$wheel/include/." "$cuda_dir/nvidia/cuda_nvcc/include/." "$kit/include/"
ln -s "$cudart" "$kit/lib/libcudart.so"
cp "$root/target/release/libcudasim.so" "$kit/lib/libcuda.so"

out="$root/build/tvm-cuda/v$version"
echo "== TVM $version runtime with USE_CUDA=ON from $src into $out"
cmake -S "$src" -B "$out/cmake" -DCMAKE_BUILD_TYPE=Release \
  -DUSE_CUDA="$kit" -DCUDA_NVRTC_LIBRARY="$kit/lib/libcudart.so" -DUSE_LLVM=OFF \
  -DUSE_LIBBACKTRACE=OFF -DUSE_GTEST=OFF -DUSE_OPENMP=OFF -DUSE_CUDNN=OFF -DUSE_CUBLAS=OFF \
  -DCMAKE_PROJECT_INCLUDE_BEFORE="$root/scripts/cmake/no-cuda-language.cmake" \
  -DCMAKE_SKIP_RPATH=ON -DCMAKE_SHARED_LINKER_FLAGS='-Wl,--as-needed -Wl,-rpath,$ORIGIN' >"$out.cmake.log" 2>&1 || { tail -30 "$out.cmake.log"; exit 1; }
cmake --build "$out/cmake" --target tvm_runtime -j"${JOBS:-$(nproc)}" >"$out.build.log" 2>&1 ||
  { tail -40 "$out.build.log"; exit 1; }
mkdir -p "$out/lib"
cp "$out/cmake/libtvm_runtime.so" "$out/lib/"
cp "$cudart" "$out/lib/"
# The library must name the driver by its soname and find libcudart next to itself.
dyn=$(readelf -d "$out/lib/libtvm_runtime.so")
grep 'NEEDED.*\[libcuda.so.1\]' <<<"$dyn" >/dev/null ||
  { echo "libtvm_runtime.so does not need libcuda.so.1" >&2; exit 1; }
grep "NEEDED.*\[$(basename "$cudart")\]" <<<"$dyn" >/dev/null ||
  { echo "libtvm_runtime.so does not need $(basename "$cudart")" >&2; exit 1; }
grep 'RUNPATH.*\[\$ORIGIN\]' <<<"$dyn" >/dev/null || { echo "libtvm_runtime.so lacks RUNPATH \$ORIGIN" >&2; exit 1; }
nm -D --defined-only "$out/lib/libtvm_runtime.so" | grep ' TVMFuncCall$' >/dev/null
echo "built $out/lib/libtvm_runtime.so (TVM $version, CUDA runtime $runtime_version)"
grep -E 'NEEDED|RUNPATH' <<<"$dyn"
