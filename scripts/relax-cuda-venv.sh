#!/usr/bin/env bash
# Makes (once; later runs only check) the compiler venv for tests/python/relax/make_cuda_models.py:
# TVM 0.27's full wheel plus what its `cuda` target needs to compile on a machine without a GPU,
# all from PyPI:
#   apache-tvm 0.27.0.post1, apache-tvm-ffi 0.1.15.post2, numpy
#   cuda-bindings 12.8 (cuda.bindings.nvrtc, which tvm/support/nvcc.py calls) with
#   nvidia-cuda-nvrtc-cu12 12.8 (libnvrtc.so.12: PTX ISA 8.7, what a CUDA 12.8 driver such as
#   tools/cudasim accepts), nvidia-cuda-cccl-cu12 12.8 (cuda/std/cstdint, which nvcc.py's NVRTC
#   preamble includes) and nvidia-cuda-runtime-cu12 12.8 (cuda_runtime.h, which nvcc.py checks for)
#   nvidia-cuda-runtime 13.0 (libcudart.so.13, which TVM's CUDA runtime tvm/lib/libtvm_runtime_cuda.so
#   needs to load; without it TVM 0.27 exports CUDA C source instead of compiled kernels)
# and lays out VENV/cuda, the CUDA_PATH nvcc.py wants: include -> the cu12 runtime headers,
# targets/<arch>-linux/include/cccl -> CCCL, version.txt, and lib64/stubs/libcuda.so.1, a stub
# built here with cc (the sidecar links libcuda.so.1; nothing calls it while compiling).
#   scripts/relax-cuda-venv.sh [VENV_DIR]    (default target/tvm27-cuda)
# Prints the venv's python.
set -euo pipefail
cd "$(dirname "$0")/.."
venv="${1:-target/tvm27-cuda}"
pins=(
  "apache-tvm==0.27.0.post1" "apache-tvm-ffi==0.1.15.post2" numpy
  "cuda-bindings==12.8.0" "nvidia-cuda-nvrtc-cu12==12.8.93" "nvidia-cuda-cccl-cu12==12.8.90"
  "nvidia-cuda-runtime-cu12==12.8.90" "nvidia-cuda-runtime==13.0.96"
)
if [ ! -x "$venv/bin/python" ]; then
  python3 -m venv "$venv" >&2
fi
venv="$(realpath "$venv")"
py="$venv/bin/python"
if ! "$py" - "${pins[@]}" <<'EOF' 2>/dev/null; then
import importlib.metadata as m, sys
for pin in sys.argv[1:]:
    name, _, version = pin.partition("==")
    assert not version or m.version(name) == version, pin
    m.version(name)
EOF
  echo "== relax-cuda-venv: pip install ${pins[*]}" >&2
  "$py" -m pip install -q "${pins[@]}" >&2
fi
site="$("$py" -c "import sysconfig; print(sysconfig.get_paths()['purelib'])")"
triple="$(uname -m)-linux"
cuda="$venv/cuda"
mkdir -p "$cuda/targets/$triple/include" "$cuda/lib64/stubs"
ln -sfn "$site/nvidia/cuda_runtime/include" "$cuda/include"
ln -sfn "$site/nvidia/cuda_cccl/include" "$cuda/targets/$triple/include/cccl"
# nvcc.py's get_cuda_version reads the last word.
echo "CUDA Version $("$py" -c "import importlib.metadata as m; print(m.version('nvidia-cuda-nvrtc-cu12'))")" \
  >"$cuda/version.txt"
stub="$cuda/lib64/stubs/libcuda.so.1"
if [ ! -f "$stub" ]; then
  cat >"$cuda/lib64/stubs/libcuda_stub.c" <<'EOF'
/* Compile-time stand-in for libcuda.so.1: the CUDA driver functions that TVM 0.27's
 * libtvm_runtime_cuda.so links. Each fails with CUDA_ERROR_UNKNOWN (999). */
typedef int CUresult;
static const char msg[] = "CUDA_ERROR_UNKNOWN (compile-time libcuda.so.1 stub)";
CUresult cuGetErrorName(CUresult e, const char **s) { (void)e; *s = msg; return 0; }
CUresult cuGetErrorString(CUresult e, const char **s) { (void)e; *s = msg; return 0; }
#define STUB(name) CUresult name(void) { return 999; }
STUB(cuDeviceGetName) STUB(cuFuncSetAttribute) STUB(cuLaunchKernelEx) STUB(cuModuleGetFunction)
STUB(cuModuleLoadData) STUB(cuModuleUnload) STUB(cuTensorMapEncodeTiled)
EOF
  cc -shared -fPIC -O2 -Wl,-soname,libcuda.so.1 -o "$stub.tmp" "$cuda/lib64/stubs/libcuda_stub.c"
  mv "$stub.tmp" "$stub"
fi
echo "$py"
