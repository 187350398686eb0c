"""TVM v0.27 Relax exports with OpenCL kernels (made by make_device_models.py into $RELAX_DEVICE_MODELS)
on this library, through TVM's own Python runtime-only: the library binary's `opencl` module is
loaded by the classic OpenCL module (PoCL in CI), the VM allocates on the OpenCL device and the
host code launches the kernels. Checked against numpy (TVM's runtime-only package has no OpenCL)."""

import os
import pathlib

import numpy as np
import pytest
import tvm
from tvm.runtime.vm import VirtualMachine

DIR = os.environ.get("RELAX_DEVICE_MODELS")
if not DIR:
    if os.environ.get("CI") == "true":
        raise RuntimeError("RELAX_DEVICE_MODELS is not set (CI=true)")
    pytest.skip("RELAX_DEVICE_MODELS is not set", allow_module_level=True)
DIR = pathlib.Path(DIR)


def opencl():
    dev = tvm.opencl()
    if not dev.exist:
        if os.environ.get("CI") == "true":
            raise RuntimeError("no OpenCL device (CI=true)")
        pytest.skip("no OpenCL device")
    return dev


def test_elementwise_kernels_run_on_opencl():
    dev = opencl()
    mod = tvm.runtime.load_module(str(DIR / "ocl_elementwise.so"))
    assert [m.kind for m in mod.imports[0].imports] == ["opencl"]
    vm = VirtualMachine(mod, dev)
    rng = np.random.default_rng(0)
    x, y = rng.random((4, 8), dtype="float32"), rng.random((4, 8), dtype="float32")
    for _ in range(3):
        out = vm["main"](tvm.runtime.tensor(x, dev), tvm.runtime.tensor(y, dev))
        assert out.device.dlpack_device_type() == dev.dlpack_device_type()
        np.testing.assert_allclose(out.numpy(), (x + y) * y, rtol=1e-6)


def test_symbolic_batch_and_nested_tuples_on_opencl():
    dev = opencl()
    vm = VirtualMachine(tvm.runtime.load_module(str(DIR / "ocl_dense.so")), dev)
    rng = np.random.default_rng(1)
    w = rng.random((16, 8), dtype="float32")
    for n in (1, 5):
        x = rng.random((n, 16), dtype="float32")
        y, (s, x2) = vm["main"](tvm.runtime.tensor(x, dev), tvm.runtime.tensor(w, dev))
        np.testing.assert_allclose(y.numpy(), x @ w, rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(s.numpy(), x.sum(axis=1), rtol=1e-5, atol=1e-5)
        np.testing.assert_array_equal(x2.numpy(), x)


def test_cpu_inputs_are_refused_or_copied_clearly():
    dev = opencl()
    vm = VirtualMachine(tvm.runtime.load_module(str(DIR / "ocl_elementwise.so")), dev)
    x = np.ones((4, 8), "float32")
    # Inputs on the CPU: the kernels would get host pointers; set_input copies them to the device.
    vm.set_input("main", tvm.runtime.tensor(x), tvm.runtime.tensor(x))
    vm.invoke_stateful("main")
    np.testing.assert_allclose(vm.get_outputs("main").numpy(), (x + x) * x)
