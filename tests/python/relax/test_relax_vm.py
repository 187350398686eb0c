"""TVM v0.27's own Python package, runtime-only, running the v0.27 Relax exports of
../shared/fixtures-v0.27 on this library (scripts/test-tvm-python.sh sets up the venv and the
library paths). Every model must give TVM's outputs, from one thread and from four at once (one
module, a VM per thread); the VM's module functions behave as TVM's.

Also runs against TVM's own runtime (TVM_REFERENCE=1 and the wheel's libraries), to check the
tests themselves: there TVM cannot run `topk` (its sort kernels live outside libtvm_runtime.so).
"""

import json
import os
import pathlib
import threading

import numpy as np
import pytest
import tvm
from tvm.runtime.vm import VirtualMachine

ROOT = pathlib.Path(__file__).resolve().parents[3]
FIXTURES = pathlib.Path(os.environ.get("FIXTURES_V027", ROOT.parent / "shared" / "fixtures-v0.27"))
REFERENCE = os.environ.get("TVM_REFERENCE") == "1"

if not (FIXTURES / "manifest.json").is_file():
    if os.environ.get("CI") == "true":
        raise RuntimeError(f"{FIXTURES} is missing (CI=true)")
    pytest.skip(f"{FIXTURES} is absent", allow_module_level=True)

MANIFEST = json.loads((FIXTURES / "manifest.json").read_text())["models"]
MODELS = [n for n in MANIFEST if not (REFERENCE and n == "topk")]


def inputs(name):
    return [np.load(FIXTURES / f"{name}.in.{k}.npy") for k in range(len(MANIFEST[name]["inputs"]))]


def expected(name):
    return [np.load(FIXTURES / f"{name}.out.{k}.npy") for k in range(len(MANIFEST[name]["outputs"]))]


def flatten(value, out):
    if isinstance(value, (list, tuple)) or type(value).__name__ == "Array":
        for v in value:
            flatten(v, out)
    else:
        out.append(value.numpy())
    return out


def check(name, result):
    got = flatten(result, [])
    want = expected(name)
    assert len(got) == len(want), name
    m = MANIFEST[name]
    for g, w in zip(got, want):
        assert g.shape == w.shape and g.dtype == w.dtype, (name, g.shape, g.dtype, w.shape, w.dtype)
        np.testing.assert_allclose(g, w, rtol=m["rtol"], atol=m["atol"])


def load(name):
    return tvm.runtime.load_module(str(FIXTURES / MANIFEST[name]["file"]))


@pytest.mark.parametrize("name", MODELS)
def test_model_gives_tvms_outputs(name):
    mod = load(name)
    assert mod.kind == "relax.VMExecutable"
    vm = VirtualMachine(mod, tvm.cpu())
    args = [tvm.runtime.tensor(a) for a in inputs(name)]
    for _ in range(3):
        check(name, vm[MANIFEST[name]["function"]](*args))


@pytest.mark.parametrize("name", MODELS)
def test_four_threads_share_one_module(name):
    mod = load(name)
    errors = []

    def work():
        try:
            vm = VirtualMachine(mod, tvm.cpu())
            f = vm[MANIFEST[name]["function"]]
            args = [tvm.runtime.tensor(a) for a in inputs(name)]
            for _ in range(25):
                check(name, f(*args))
        except Exception as e:  # reported below
            errors.append(e)

    threads = [threading.Thread(target=work) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors


@pytest.mark.parametrize("memory_cfg", ["naive", "pooled"])
def test_allocators(memory_cfg):
    vm = VirtualMachine(load("mlp_dyn"), tvm.cpu(), memory_cfg=memory_cfg)
    check("mlp_dyn", vm["forward"](*[tvm.runtime.tensor(a) for a in inputs("mlp_dyn")]))


def test_symbolic_batch_takes_other_sizes():
    vm = VirtualMachine(load("mlp_dyn"), tvm.cpu())
    x, *weights = inputs("mlp_dyn")
    ws = [tvm.runtime.tensor(w) for w in weights]
    full = vm["forward"](tvm.runtime.tensor(x), *ws).numpy()
    for batch in (1, 3):
        part = vm["forward"](tvm.runtime.tensor(x[:batch]), *ws).numpy()
        np.testing.assert_allclose(part, full[:batch], rtol=1e-5, atol=1e-5)


def test_stateful_calls_saved_functions_and_arity():
    vm = VirtualMachine(load("if_tuple"), tvm.cpu())
    args = [tvm.runtime.tensor(a) for a in inputs("if_tuple")]
    with pytest.raises(Exception, match="set_input"):
        vm.invoke_stateful("main")
    vm.set_input("main", *args)
    vm.invoke_stateful("main")
    check("if_tuple", vm.get_outputs("main"))
    vm.save_function("main", "main_saved", *args)
    check("if_tuple", vm["main_saved"]())
    assert vm._get_function_arity("main") == 3
    assert [vm._get_function_param_name("main", i) for i in range(3)] == ["c", "x", "y"]
    # Keyword arguments go through the parameter names.
    names = ["c", "x", "y"]
    vm.set_input("main", **dict(zip(names, args)))
    vm.invoke_stateful("main")
    check("if_tuple", vm.get_outputs("main"))


def test_instrument_sees_every_call_and_can_skip():
    vm = VirtualMachine(load("mlp"), tvm.cpu())
    args = [tvm.runtime.tensor(a) for a in inputs("mlp")]
    seen = []

    def instrument(func, name, before_run, ret, *call_args):
        seen.append((name, bool(before_run)))
        return 0

    vm.set_instrument(instrument)
    check("mlp", vm["forward"](*args))
    names = [n for n, before in seen if before]
    assert "matmul" in names and "softmax" in names and "vm.builtin.alloc_storage" in names
    assert len(seen) == 2 * len(names)


def test_time_evaluator_times_a_vm_function():
    vm = VirtualMachine(load("loop"), tvm.cpu())
    args = [tvm.runtime.tensor(a) for a in inputs("loop")]
    res = vm.time_evaluator(MANIFEST["loop"]["function"], tvm.cpu(), number=5, repeat=2)(*args)
    assert len(res.results) == 2 and all(r > 0 for r in res.results)


def test_wrong_calls_raise_clear_errors():
    vm = VirtualMachine(load("mlp"), tvm.cpu())
    args = [tvm.runtime.tensor(a) for a in inputs("mlp")]
    with pytest.raises(Exception, match="expects 5 arguments"):
        vm["forward"](*args[:2])
    bad = tvm.runtime.tensor(np.zeros((3, 16), "float32"))
    with pytest.raises(Exception, match="match_cast"):
        vm["forward"](bad, *args[1:])
    bad = tvm.runtime.tensor(np.zeros((2, 16), "float64"))
    with pytest.raises(Exception, match="dtype"):
        vm["forward"](bad, *args[1:])
    with pytest.raises(Exception):
        vm["no_such_function"]
    # Still works.
    check("mlp", vm["forward"](*args))


def test_truncated_export_is_refused(tmp_path):
    if REFERENCE:
        pytest.skip("TVM's own runtime dies with SIGBUS inside dlopen on a truncated library")
    data = (FIXTURES / "mlp.so").read_bytes()
    p = tmp_path / "cut.so"
    p.write_bytes(data[: len(data) // 2])
    with pytest.raises(Exception):
        tvm.runtime.load_module(str(p))
