"""An LLM with CUDA kernels (make_cuda_llm.py into $RELAX_CUDA_LLM: the GPU TIR kernels of TVM's
paged KV cache and dlight-scheduled model kernels, PTX from NVRTC) on this library through TVM's
own Python, runtime-only, on the CUDA device (the PTX simulator tools/cudasim in CI, selected with
TVM_CUDA_LIBRARY): the weights from the tensor cache onto the device, the cache's pages and its
auxiliary arrays there, llm_scenario.py's serving scenario (prefills, batch decodes, a fork inside
a page, popn, a removal, a fork at the end). Tokens and free pages after every step equal what
TVM's own runtime gives for the same model and weights on the CPU, logits within 1e-4 (the GPU
kernels sum in another order)."""

import json
import os
import pathlib
import sys

import pytest
import tvm

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import llm_scenario  # noqa: E402

DIR = os.environ.get("RELAX_CUDA_LLM")
if not DIR:
    if os.environ.get("CI") == "true":
        raise RuntimeError("RELAX_CUDA_LLM is not set (CI=true)")
    pytest.skip("RELAX_CUDA_LLM is not set", allow_module_level=True)
DIR = pathlib.Path(DIR)


def test_serving_scenario_on_cuda():
    dev = tvm.cuda()
    if not dev.exist:
        if os.environ.get("CI") == "true":
            raise RuntimeError("no CUDA device (CI=true)")
        pytest.skip("no CUDA device")
    mod = tvm.runtime.load_module(str(DIR / "cuda" / "lib.so"))
    assert "cuda" in [m.kind for m in mod.imports[0].imports]
    got = llm_scenario.run(str(DIR / "cuda"), module=mod, device=dev)
    want = json.loads((DIR / "cpu" / "reference.json").read_text())
    llm_scenario.compare(got, want, atol=1e-4)
