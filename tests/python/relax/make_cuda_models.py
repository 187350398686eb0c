"""Makes TVM v0.27 Relax exports whose kernels run on CUDA (`python make_cuda_models.py OUT`, with
the compiler venv of scripts/relax-cuda-venv.sh: apache-tvm plus NVRTC, CCCL and the CUDA headers
from PyPI): cuda_elementwise.so and cuda_dense.so, the same functions as make_device_models.py's
OpenCL ones, whose host code launches the kernels of a `cuda` module of the library binary.

TVM 0.27's `cuda` codegen hands its CUDA C to the factory `ffi.Module.create.cuda` of TVM's CUDA
runtime sidecar (tvm/lib/libtvm_runtime_cuda.so), which compiles it through the Python callback
`tvm_callback_cuda_compile`; where that sidecar cannot be loaded (it needs libcudart.so.13 and
libcuda.so.1), the codegen keeps a placeholder module that saves the CUDA *source* (format "cuda"),
left for a CUDA-equipped runtime to JIT-compile at load. So this script first loads libcudart.so.13
(pip nvidia-cuda-runtime 13) and a compile-time libcuda.so.1 stub (none of its functions is called
while compiling), so that `import tvm` loads the sidecar. TVM's own callback compiles with NVRTC
to a cubin (SASS for one GPU); this script overrides it to keep NVRTC's PTX instead (for
`compute_XX`), which any driver as new as the NVRTC JIT-compiles and which the PTX simulator
(tools/cudasim) runs; TVM tells the two apart by the first byte ('/' is PTX), so the module is
saved with format "ptx". NVRTC 12.8 writes PTX ISA 8.7, what a CUDA 12.8 driver (the simulator's)
accepts; NVRTC 12.9's 8.8 is refused with CUDA_ERROR_UNSUPPORTED_PTX_VERSION. (The `nvptx` target
is no way round: TVM 0.27's LLVM marks its kernels `.visible .func`, not `.entry`, so
cuModuleGetFunction cannot find them.)

Env: CUDA_PATH (default: `cuda/` inside the venv, as relax-cuda-venv.sh lays it out: include/ with
cuda_runtime.h, targets/x86_64-linux/include/cccl with cuda/std), CUDA_ARCH (default sm_70). The
libcuda.so.1 stub is the venv's cuda/lib64/stubs/libcuda.so.1, else the system's libcuda.so.1."""
import os
import sys

import cuda_setup  # noqa: F401 - before TVM: the CUDA sidecar and the PTX callback
import tvm
from tvm.script import ir as I
from tvm.script import relax as R

out = sys.argv[1]
arch = cuda_setup.ARCH


@I.ir_module
class Elementwise:
    @R.function
    def main(x: R.Tensor((4, 8), "float32"), y: R.Tensor((4, 8), "float32")):
        with R.dataflow():
            z = R.add(x, y)
            w = R.multiply(z, y)
            R.output(w)
        return w


@I.ir_module
class Dense:
    @R.function
    def main(x: R.Tensor(("n", 16), "float32"), w: R.Tensor((16, 8), "float32")):
        with R.dataflow():
            y = R.matmul(x, w)
            s = R.sum(x, axis=1)
            R.output(y, s)
        return (y, (s, x))


target = tvm.target.Target({"kind": "cuda", "arch": arch}, host="llvm")
for name, mod in [("cuda_elementwise", Elementwise), ("cuda_dense", Dense)]:
    with target:
        mod = tvm.s_tir.transform.DefaultGPUSchedule()(tvm.relax.transform.LegalizeOps()(mod))
    ex = tvm.compile(mod, target=target)
    (cuda,) = ex.mod.imports[0].imports
    assert cuda.kind == "cuda" and cuda.inspect_source("ptx").startswith("//"), cuda.kind
    ex.export_library(f"{out}/{name}.so")
print("ok")
