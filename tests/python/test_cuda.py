"""TVM v0.8's mlp2_nvptx.so on CUDA device 0 through ctypes, the way TVM's Python FFI drives
it (helpers of test_ctypes_ffi.py). On CI the driver is the simulated one of tools/cudasim,
named by TVM_CUDA_LIBRARY, and the test may not skip; with a real driver it runs unchanged;
with neither it skips (fails with TVMRT_REQUIRE_CUDA=1, as in scripts/gpu-check.sh)."""
import json
import os

import numpy as np
import pytest

from test_ctypes_ffi import DLDevice, fixture, get_global

CUDA = 2


def cuda_exists():
    return get_global("runtime.GetDeviceAttr")(CUDA, 0, 0) == 1


def require_cuda():
    if cuda_exists():
        return
    if os.environ.get("TVMRT_REQUIRE_CUDA") == "1":
        pytest.fail("TVMRT_REQUIRE_CUDA=1 but cuda(0) does not exist")
    if os.environ.get("CI") == "true" and os.environ.get("TVM_CUDA_LIBRARY"):
        pytest.fail("TVM_CUDA_LIBRARY=%s is set under CI but cuda(0) does not exist"
                    % os.environ["TVM_CUDA_LIBRARY"])
    pytest.skip("no CUDA driver or GPU (cuda(0).exist == 0)")


def test_mlp2_nvptx_on_cuda0():
    path = fixture("mlp2_nvptx.so")
    require_cuda()
    spec = json.load(open(fixture("manifest.json")))["fixtures"]["mlp2_nvptx"]
    lib_mod = get_global("runtime.ModuleLoadFromFile")(path, "")
    gmod = lib_mod["default"](DLDevice(CUDA, 0))
    data = np.load(fixture(spec["inputs"]["data"]))
    want = np.load(fixture(spec["outputs"][0]))
    inp = gmod["get_input"]("data")
    assert inp.tensor.device.device_type == CUDA
    inp.copyfrom(data)
    np.testing.assert_array_equal(inp.numpy(), data)
    for _ in range(2):
        gmod["run"]()
        out = gmod["get_output"](0)
        assert (out.tensor.device.device_type, out.tensor.device.device_id) == (CUDA, 0)
        np.testing.assert_allclose(out.numpy(), want, rtol=spec["rtol"], atol=spec["atol"])
    # time_evaluator("run", cuda(0), number=2, repeat=2): synchronises the device itself.
    blob = get_global("runtime.RPCTimeEvaluator")(gmod, "run", CUDA, 0, 2, 2, 0, "")()
    secs = np.frombuffer(bytes(blob), dtype="float64")
    assert len(secs) == 2 and (secs > 0).all()


def test_device_attributes():
    require_cuda()
    attr = get_global("runtime.GetDeviceAttr")
    assert attr(CUDA, 0, 2) == 32  # warp size
    major, minor = attr(CUDA, 0, 4).split(".")
    assert int(major) >= 3 and minor.isdigit()
    assert attr(CUDA, 0, 1) >= 64  # max threads per block
