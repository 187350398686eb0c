"""Runs every model of a Relax zoo made by make_zoo.py (the folder in RELAX_ZOO) with TVM v0.27's
own Python, runtime-only (TVM_USE_RUNTIME_LIB=1), on this library: each entry must give the
outputs TVM's runtime computed when the zoo was made, from one thread (with the default and the
naive allocator) and from four threads at once (one module, a VM per thread).

With TVM_REFERENCE=1 the same tests run against TVM's own runtime-only library to check the tests
themselves; entries marked `needs_full_runtime` (sort kernels in libtvm_runtime_extra, compiler-only
`relax.run.*` functions) are skipped there.
"""

import json
import os
import pathlib
import threading

import numpy as np
import pytest
import tvm
from tvm.runtime.vm import VirtualMachine

try:
    import ml_dtypes
except ImportError:  # bfloat16/float8 entries are skipped without it
    ml_dtypes = None

ZOO = os.environ.get("RELAX_ZOO")
REFERENCE = os.environ.get("TVM_REFERENCE") == "1"

if not ZOO:
    pytest.skip("RELAX_ZOO is not set (a folder made by make_zoo.py)", allow_module_level=True)
ZOO = pathlib.Path(ZOO)
if not (ZOO / "manifest.json").is_file():
    pytest.skip(f"{ZOO}/manifest.json is missing", allow_module_level=True)

MANIFEST = json.loads((ZOO / "manifest.json").read_text())["models"]
EXACT_KINDS = ("b", "i", "u")  # numpy dtype kinds compared exactly


def entry_params():
    out = []
    for name, m in MANIFEST.items():
        marks = []
        if m.get("needs_compiler_python"):
            # relax.run.print/assert_op/unique/nonzero are Python functions of TVM's compiler
            # package (tvm.relax.op), registered by `import tvm.relax`: no runtime has them.
            marks.append(pytest.mark.skip(reason="calls relax.run.* functions of TVM's compiler package"))
        elif REFERENCE and m.get("needs_full_runtime"):
            marks.append(pytest.mark.skip(reason="TVM's runtime-only library cannot run it"))
        out.append(pytest.param(name, marks=marks, id=name))
    return out


ENTRIES = entry_params()


def ml_dtype(name):
    if ml_dtypes is None:
        pytest.skip(f"{name} needs ml_dtypes")
    return np.dtype(getattr(ml_dtypes, name))


def load_array(path, dtype):
    a = np.load(path)
    if str(a.dtype) != dtype:  # ml_dtypes values are stored as their raw bits
        a = a.view(ml_dtype(dtype))
    return a


def count_leaves(specs):
    return sum(count_leaves(s["items"]) if s.get("kind") == "tuple" else 1 for s in specs)


def make_args(name):
    m = MANIFEST[name]
    k = 0

    def build(specs):
        nonlocal k
        args = []
        for s in specs:
            kind = s.get("kind", "tensor")
            if kind == "tuple":
                args.append(tuple(build(s["items"])))
                continue
            a = load_array(ZOO / f"{name}.in.{k}.npy", s["dtype"])
            k += 1
            assert list(a.shape) == s["shape"], (name, a.shape, s)
            if kind == "prim":
                args.append(a.item())
            elif kind == "shape":
                args.append(tvm.runtime.ShapeTuple([int(d) for d in a]))
            else:
                args.append(tvm.runtime.tensor(a))
        return args

    return build(m["inputs"])


def expected(name):
    m = MANIFEST[name]
    out = []
    for k, s in enumerate(m["outputs"]):
        if s.get("kind") == "object":
            out.append(None)
        else:
            out.append(load_array(ZOO / f"{name}.out.{k}.npy", s["dtype"]))
    return out


def is_seq(v):
    return type(v).__name__ not in ("Shape", "ShapeTuple") and (
        isinstance(v, (list, tuple)) or type(v).__name__ == "Array")


def check_tree(name, got, tree, leaves):
    """Matches the result against out_tree; collects (index, value) leaves."""
    if isinstance(tree, list):
        assert is_seq(got), (name, "expected a tuple", type(got).__name__, tree)
        assert len(got) == len(tree), (name, "tuple length", len(got), tree)
        for g, t in zip(got, tree):
            check_tree(name, g, t, leaves)
    else:
        leaves.append((tree, got))


def compare(name, result):
    m = MANIFEST[name]
    want = expected(name)
    leaves = []
    check_tree(name, result, m["out_tree"], leaves)
    assert sorted(i for i, _ in leaves) == list(range(len(want))), name
    for i, got in leaves:
        s, w = m["outputs"][i], want[i]
        kind = s.get("kind", "tensor")
        where = f"{name} output {i} ({kind})"
        if kind == "object":
            assert not isinstance(got, tvm.runtime.Tensor), where
            continue
        if kind == "shape":
            assert type(got).__name__ in ("Shape", "ShapeTuple"), (where, type(got).__name__)
            assert [int(d) for d in got] == w.tolist(), (where, list(got), w.tolist())
            continue
        if kind == "prim":
            assert isinstance(got, (bool, int, float)), (where, type(got).__name__)
            if s["dtype"] == "bool":
                assert isinstance(got, bool) and got == bool(w), (where, got, w)
            elif s["dtype"].startswith("int"):
                assert isinstance(got, int) and not isinstance(got, bool) and got == int(w), (where, got, w)
            else:
                np.testing.assert_allclose(got, w, rtol=m["rtol"], atol=m["atol"], err_msg=where)
            continue
        assert isinstance(got, tvm.runtime.Tensor), (where, type(got).__name__)
        g = got.numpy()
        assert g.shape == w.shape and str(g.dtype) == str(w.dtype), (where, g.shape, g.dtype, w.shape, w.dtype)
        if g.dtype.kind in EXACT_KINDS:
            np.testing.assert_array_equal(g, w, err_msg=where)
        else:
            np.testing.assert_allclose(g.astype("float64"), w.astype("float64"), rtol=m["rtol"],
                                       atol=m["atol"], err_msg=where)


_MODULES = {}
_MODULES_LOCK = threading.Lock()


def load(name):
    f = MANIFEST[name]["file"]
    with _MODULES_LOCK:
        if f not in _MODULES:
            _MODULES[f] = tvm.runtime.load_module(str(ZOO / f))
        return _MODULES[f]


def call(vm, name, args):
    m = MANIFEST[name]
    init = m.get("init")
    if init:  # nn.Module effects: a fresh state for every call
        state = vm[init["function"]]()
        state = list(state) if is_seq(state) else [state]
        at = init["insert_at"]
        args = args[:at] + state + args[at:]
    return vm[m["function"]](*args)


@pytest.mark.parametrize("memory_cfg", [None, "naive"])
@pytest.mark.parametrize("name", ENTRIES)
def test_model_gives_tvms_outputs(name, memory_cfg):
    mod = load(name)
    assert mod.kind == "relax.VMExecutable"
    vm = VirtualMachine(mod, tvm.cpu()) if memory_cfg is None else VirtualMachine(mod, tvm.cpu(), memory_cfg=memory_cfg)
    args = make_args(name)
    assert len(args) == len(MANIFEST[name]["inputs"])
    for _ in range(3):
        compare(name, call(vm, name, args))


@pytest.mark.parametrize("name", ENTRIES)
def test_four_threads_share_one_module(name):
    mod = load(name)
    errors = []
    barrier = threading.Barrier(4)

    def work():
        try:
            vm = VirtualMachine(mod, tvm.cpu())
            args = make_args(name)
            barrier.wait(timeout=60)
            for _ in range(10):
                compare(name, call(vm, name, args))
        except BaseException as e:  # reported below
            errors.append(e)
            barrier.abort()

    threads = [threading.Thread(target=work) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
