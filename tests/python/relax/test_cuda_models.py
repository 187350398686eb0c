"""TVM v0.27 Relax exports with CUDA kernels (made by make_cuda_models.py into $RELAX_CUDA_MODELS,
PTX from NVRTC) on this library, through TVM's own Python runtime-only: the library binary's `cuda`
module is loaded by the classic CUDA module (the PTX simulator tools/cudasim in CI, selected with
TVM_CUDA_LIBRARY), the VM allocates on the CUDA device and the host code launches the kernels.
Checked against numpy."""

import os
import pathlib

import numpy as np
import pytest
import tvm
from tvm.runtime.vm import VirtualMachine

DIR = os.environ.get("RELAX_CUDA_MODELS")
if not DIR:
    if os.environ.get("CI") == "true":
        raise RuntimeError("RELAX_CUDA_MODELS is not set (CI=true)")
    pytest.skip("RELAX_CUDA_MODELS is not set", allow_module_level=True)
DIR = pathlib.Path(DIR)


def cuda():
    dev = tvm.cuda()
    if not dev.exist:
        if os.environ.get("CI") == "true":
            raise RuntimeError("no CUDA device (CI=true)")
        pytest.skip("no CUDA device")
    return dev


def test_elementwise_kernels_run_on_cuda():
    dev = cuda()
    mod = tvm.runtime.load_module(str(DIR / "cuda_elementwise.so"))
    assert [m.kind for m in mod.imports[0].imports] == ["cuda"]
    vm = VirtualMachine(mod, dev)
    rng = np.random.default_rng(0)
    x, y = rng.random((4, 8), dtype="float32"), rng.random((4, 8), dtype="float32")
    for _ in range(3):
        out = vm["main"](tvm.runtime.tensor(x, dev), tvm.runtime.tensor(y, dev))
        assert out.device.dlpack_device_type() == dev.dlpack_device_type()
        np.testing.assert_allclose(out.numpy(), (x + y) * y, rtol=1e-6)


def test_symbolic_batch_and_nested_tuples_on_cuda():
    dev = cuda()
    vm = VirtualMachine(tvm.runtime.load_module(str(DIR / "cuda_dense.so")), dev)
    rng = np.random.default_rng(1)
    w = rng.random((16, 8), dtype="float32")
    for n in (1, 5):
        x = rng.random((n, 16), dtype="float32")
        y, (s, x2) = vm["main"](tvm.runtime.tensor(x, dev), tvm.runtime.tensor(w, dev))
        np.testing.assert_allclose(y.numpy(), x @ w, rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(s.numpy(), x.sum(axis=1), rtol=1e-5, atol=1e-5)
        np.testing.assert_array_equal(x2.numpy(), x)


def test_cpu_inputs_are_refused_or_copied_clearly():
    dev = cuda()
    vm = VirtualMachine(tvm.runtime.load_module(str(DIR / "cuda_elementwise.so")), dev)
    x = np.ones((4, 8), "float32")
    # Inputs on the CPU: the kernels would get host pointers; set_input copies them to the device.
    vm.set_input("main", tvm.runtime.tensor(x), tvm.runtime.tensor(x))
    vm.invoke_stateful("main")
    np.testing.assert_allclose(vm.get_outputs("main").numpy(), (x + x) * x)
