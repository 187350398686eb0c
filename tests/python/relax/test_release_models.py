"""Exports of other TVM releases (0.25.0, 0.26.0, 0.27.0.post1), made by make_release_models.py
with each release's own compiler and checked against that release's own outputs, run on this
library through TVM v0.27's Python runtime-only (TVM_USE_RUNTIME_LIB=1, as test_relax_vm.py).

RELAX_RELEASE_MODELS is a colon-separated list of folders made by make_release_models.py; the
tests skip when it is unset. Every model of every folder must give the release's outputs from
one thread, and from four threads at once (one module, a VM per thread).

With TVM_REFERENCE=1 (TVM's own runtime-only library) `topk` is left out: its sort kernels call
`tvm.contrib.sort.*`, which TVM keeps outside libtvm_runtime.so.
"""

import json
import os
import pathlib
import threading

import numpy as np
import pytest
import tvm
from tvm.runtime.vm import VirtualMachine

DIRS = [pathlib.Path(d) for d in os.environ.get("RELAX_RELEASE_MODELS", "").split(":") if d]
if not DIRS:
    pytest.skip("RELAX_RELEASE_MODELS is not set", allow_module_level=True)
REFERENCE = os.environ.get("TVM_REFERENCE") == "1"


def manifest(d):
    path = d / "manifest.json"
    if not path.is_file():
        raise FileNotFoundError(f"{path} is missing (make_release_models.py makes it)")
    return json.loads(path.read_text())


MANIFESTS = {str(d): manifest(d) for d in DIRS}
CASES = [
    pytest.param(d, name, id=f"{m.get('tvm', pathlib.Path(d).name)}-{name}")
    for d, m in MANIFESTS.items()
    for name in m["models"]
    if not (REFERENCE and name == "topk")
]


def entry(d, name):
    return MANIFESTS[d]["models"][name]


def inputs(d, name):
    return [np.load(pathlib.Path(d) / f"{name}.in.{k}.npy") for k in range(len(entry(d, name)["inputs"]))]


def expected(d, name):
    return [np.load(pathlib.Path(d) / f"{name}.out.{k}.npy") for k in range(len(entry(d, name)["outputs"]))]


def flatten(value, out):
    if isinstance(value, (list, tuple)) or type(value).__name__ == "Array":
        for v in value:
            flatten(v, out)
    else:
        out.append(value.numpy())
    return out


def check(d, name, result):
    got, want = flatten(result, []), expected(d, name)
    assert len(got) == len(want), (d, name, len(got), len(want))
    e = entry(d, name)
    for g, w in zip(got, want):
        assert g.shape == w.shape and g.dtype == w.dtype, (d, name, g.shape, g.dtype, w.shape, w.dtype)
        np.testing.assert_allclose(g, w, rtol=e["rtol"], atol=e["atol"])


def load(d, name):
    return tvm.runtime.load_module(str(pathlib.Path(d) / entry(d, name)["file"]))


@pytest.mark.parametrize("d,name", CASES)
def test_release_model_gives_its_outputs(d, name):
    mod = load(d, name)
    assert mod.kind == "relax.VMExecutable"
    vm = VirtualMachine(mod, tvm.cpu())
    args = [tvm.runtime.tensor(a) for a in inputs(d, name)]
    for _ in range(3):
        check(d, name, vm[entry(d, name)["function"]](*args))


@pytest.mark.parametrize("d,name", CASES)
def test_release_model_four_threads(d, name):
    mod = load(d, name)
    errors = []

    def work():
        try:
            vm = VirtualMachine(mod, tvm.cpu())
            f = vm[entry(d, name)["function"]]
            args = [tvm.runtime.tensor(a) for a in inputs(d, name)]
            for _ in range(25):
                check(d, name, f(*args))
        except Exception as e:  # reported below
            errors.append(e)

    threads = [threading.Thread(target=work) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
