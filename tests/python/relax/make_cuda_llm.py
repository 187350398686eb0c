"""Makes an MLC-style LLM whose kernels run on CUDA, for test_cuda_llm.py (with the compiler venv of
scripts/relax-cuda-venv.sh, as make_cuda_models.py; its notes on NVRTC, PTX and the CUDA sidecar
apply):

    python make_cuda_llm.py OUT_DIR

OUT/cuda/{lib.so, params/, config.json}: llm_model.py's model (2 layers, hidden 64, GQA 4/2,
head dim 16, vocab 256) for `cuda -arch=sm_70`, the paged KV cache with TVM's GPU TIR kernels,
kernels saved as PTX; OUT/cpu/: the same model and weights for `llvm`, and OUT/cpu/reference.json
what TVM's own runtime gives for llm_scenario.py's serving scenario on the CPU, which the CUDA
run must match (1e-4: the GPU kernels sum in another order).
"""

import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import cuda_setup  # noqa: E402,F401 - before TVM: the CUDA sidecar and the PTX callback

from llm_model import Cfg, build  # noqa: E402
from llm_scenario import run  # noqa: E402


def main(out):
    for target, d in [("cuda", "cuda"), ("llvm", "cpu")]:
        path = os.path.join(out, d)
        build(Cfg("cuda_llm", target=target if target == "llvm" else f"cuda:{cuda_setup.ARCH}"), path)
        c = json.load(open(os.path.join(path, "config.json")))
        c["scenario"] = {"capacity": 256}
        json.dump(c, open(os.path.join(path, "config.json"), "w"), indent=1)
    with open(os.path.join(out, "cpu", "reference.json"), "w") as f:
        json.dump(run(os.path.join(out, "cpu")), f)


if __name__ == "__main__":
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    main(sys.argv[1])
