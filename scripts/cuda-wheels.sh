#!/usr/bin/env bash
# CUDA pieces from PyPI, unpacked once into build/tvm-cuda/cuda/ (ignored by git):
#   nvidia/cuda_runtime/{include,lib}: cuda.h, cuda_runtime.h, libcudart.so.12 (nvidia-cuda-runtime-cu12)
#   nvidia/cuda_nvcc/{include/crt,bin/ptxas,nvvm/libdevice}: the crt/ headers, NVIDIA's PTX
#   assembler and libdevice (nvidia-cuda-nvcc-cu12; it has no nvcc)
# Used by scripts/build-tvm-cuda.sh (the anchor) and scripts/gpu-bundle.sh (ptxas, with which
# scripts/gpu-check.sh --simulator checks every PTX module of the tests the way a driver's JIT
# would). Prints the folder. Env: CUDA_RUNTIME_WHEEL_VERSION (12.9.79), CUDA_NVCC_WHEEL_VERSION (12.9.86).
set -euo pipefail
cd "$(dirname "$0")/.."
cuda_dir="$PWD/build/tvm-cuda/cuda"
runtime_version="${CUDA_RUNTIME_WHEEL_VERSION:-12.9.79}"
nvcc_version="${CUDA_NVCC_WHEEL_VERSION:-12.9.86}"
if [ ! -f "$cuda_dir/nvidia/cuda_runtime/include/cuda.h" ] || [ ! -f "$cuda_dir/nvidia/cuda_nvcc/bin/ptxas" ]; then
  echo "== CUDA from PyPI: nvidia-cuda-runtime-cu12==$runtime_version, nvidia-cuda-nvcc-cu12==$nvcc_version" >&2
  mkdir -p "$cuda_dir/wheels"
  python3 -m pip download -q --no-deps -d "$cuda_dir/wheels" \
    "nvidia-cuda-runtime-cu12==$runtime_version" "nvidia-cuda-nvcc-cu12==$nvcc_version" >&2
  for w in "$cuda_dir/wheels/nvidia_cuda_runtime_cu12-$runtime_version"-*.whl \
    "$cuda_dir/wheels/nvidia_cuda_nvcc_cu12-$nvcc_version"-*.whl; do
    python3 -m zipfile -e "$w" "$cuda_dir"
  done
fi
# zipfile does not keep the executable bit.
chmod +x "$cuda_dir/nvidia/cuda_nvcc/bin/ptxas"
echo "$cuda_dir"
