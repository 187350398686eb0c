"""What compiling for CUDA without a GPU needs in the compiler venv of scripts/relax-cuda-venv.sh,
done on import (before TVM's): libcudart.so.13 and a libcuda.so.1 stub loaded so that `import tvm`
loads TVM's CUDA sidecar, and `tvm_callback_cuda_compile` replaced by NVRTC to PTX (see
make_cuda_models.py). ARCH is CUDA_ARCH (default sm_70)."""
import ctypes
import glob
import os
import sys

os.environ.setdefault("CUDA_PATH", os.path.join(sys.prefix, "cuda"))
# Before `import tvm`, which loads the CUDA sidecar if its libraries are there.
site = os.path.join(sys.prefix, "lib", "python3*", "site-packages")
(cudart,) = glob.glob(os.path.join(site, "nvidia", "cu13", "lib", "libcudart.so.13"))
ctypes.CDLL(cudart, mode=ctypes.RTLD_GLOBAL)
stub = os.path.join(sys.prefix, "cuda", "lib64", "stubs", "libcuda.so.1")
ctypes.CDLL(stub if os.path.exists(stub) else "libcuda.so.1", mode=ctypes.RTLD_GLOBAL)

import tvm  # noqa: E402
import tvm_ffi  # noqa: E402
from tvm.support import nvcc  # noqa: E402

if tvm_ffi.get_global_func("ffi.Module.create.cuda", allow_missing=True) is None:
    sys.exit("TVM's CUDA runtime (libtvm_runtime_cuda.so) is not loaded: exports would hold CUDA C")

ARCH = os.environ.get("CUDA_ARCH", "sm_70")


@tvm_ffi.register_global_func("tvm_callback_cuda_compile", override=True)
def compile_to_ptx(code, *_):  # TVM 0.27 passes the code alone
    ptx = nvcc.compile_cuda(code, target_format="ptx", arch=ARCH, compiler="nvrtc")
    assert bytes(ptx[:2]) == b"//", bytes(ptx[:80])
    return ptx
