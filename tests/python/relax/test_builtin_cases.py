"""The Relax runtime's language-model builtins (builtin_cases.py) on this library, with TVM v0.27's
own Python (runtime-only), against the answers TVM's own runtime gave (RELAX_BUILTIN_REFS: the
folder builtin_cases.py wrote). Sampled token ids must be equal; transformed logits and cache
contents equal up to float rounding. Wrong calls must raise, not crash.
"""

import os
import pathlib

import numpy as np
import pytest
import tvm

import builtin_cases

REFS = os.environ.get("RELAX_BUILTIN_REFS")
if not REFS:
    pytest.skip("RELAX_BUILTIN_REFS is not set (a folder made by builtin_cases.py)", allow_module_level=True)
DIR = pathlib.Path(REFS)
REFS = np.load(DIR / "builtin_refs.npz")


@pytest.mark.parametrize("name", list(builtin_cases.CASES))
def test_case_gives_tvms_answers(name):
    got = builtin_cases.run(name, str(DIR))
    want = [REFS[f"{name}.{k}"] for k in range(len([k for k in REFS.files if k.startswith(name + ".")]))]
    assert len(got) == len(want)
    for k, (g, w) in enumerate(zip(got, want)):
        assert g.dtype == w.dtype and g.shape == w.shape, (k, g.dtype, g.shape, w.dtype, w.shape)
        if g.dtype.kind in "biu":
            np.testing.assert_array_equal(g, w, err_msg=f"{name}.{k}")
        else:
            np.testing.assert_allclose(g, w, rtol=1e-6, atol=1e-7, err_msg=f"{name}.{k}")


def test_wrong_calls_raise():
    f, T = tvm.get_global_func, tvm.runtime.tensor
    logits = T(np.zeros((1, 8), "float32"))
    bad = [
        lambda: f("vm.builtin.sample_top_p_from_logits")(T(np.zeros((2, 8), "float32")), 1.0, 0.9, 0.5),
        lambda: f("vm.builtin.sample_top_p_from_logits")(T(np.zeros((1, 8), "float64")), 1.0, 0.9, 0.5),
        lambda: f("vm.builtin.sample_top_p_from_prob")(T(np.zeros((1, 0), "float32")), 0.9, 0.5),
        lambda: f("vm.builtin.sample_top_p_from_prob")(T(np.full((1, 4), np.nan, "float32")), 0.9, 0.5),
        lambda: f("vm.builtin.apply_repetition_penalty")(logits, T(np.array([8], "int32")), 1.1),
        lambda: f("vm.builtin.apply_repetition_penalty")(logits, T(np.array([-1], "int32")), 1.1),
        lambda: f("vm.builtin.apply_presence_and_frequency_penalty")(
            logits, T(np.array([1, 2], "int32")), T(np.array([1], "int32")), 0.1, 0.1
        ),
        lambda: f("vm.builtin.multinomial_from_uniform")(logits, T(np.zeros((0, 1), "float32"))),
        lambda: f("vm.builtin.apply_softmax_with_temperature")("not a tensor", 1.0),
        lambda: f("vm.builtin.tensor_cache.load")("/nonexistent/tensor-cache", 1, 0),
        lambda: f("vm.builtin.param_array_from_cache")("no_such_param", 2),
        lambda: f("vm.builtin.param_array_from_cache_by_name")(["no_such_param"]),
        lambda: f("vm.builtin.tensor_cache.update")("x", "not a tensor"),
        lambda: f("vm.builtin.get_py_func")("no_such_function"),
        lambda: f("vm.builtin.call_py_func")(["no_such_function", []]),
        lambda: f("vm.builtin.call_py_func")(["too", "many", "items"]),
        lambda: f("vm.builtin.register_py_func")("f", "not a function"),
    ]
    for k, call in enumerate(bad):
        with pytest.raises(Exception):
            call()
            pytest.fail(f"wrong call {k} did not raise")
    np.testing.assert_array_equal(logits.numpy(), np.zeros((1, 8), "float32"))


def test_memory_manager_clear_keeps_results():
    root = pathlib.Path(__file__).resolve().parents[3]
    fixtures = pathlib.Path(os.environ.get("FIXTURES_V027", root.parent / "shared" / "fixtures-v0.27"))
    if not (fixtures / "mlp.so").is_file():
        if os.environ.get("CI") == "true":
            raise RuntimeError(f"{fixtures}/mlp.so is missing (CI=true)")
        pytest.skip(f"{fixtures}/mlp.so is missing")
    from tvm.runtime.vm import VirtualMachine

    vm = VirtualMachine(tvm.runtime.load_module(str(fixtures / "mlp.so")), tvm.cpu())
    args = [tvm.runtime.tensor(np.load(fixtures / f"mlp.in.{k}.npy")) for k in range(5)]
    first = vm["forward"](*args).numpy()
    kept = vm["forward"](*args)
    tvm.get_global_func("vm.builtin.memory_manager.clear")()
    np.testing.assert_array_equal(kept.numpy(), first)
    np.testing.assert_array_equal(vm["forward"](*args).numpy(), first)


def test_damaged_tensor_cache_is_refused(tmp_path):
    import json

    from tvm.contrib import tvmjs

    f = tvm.get_global_func
    tvmjs.dump_tensor_cache({"p_0": np.ones((8, 8), "float32")}, str(tmp_path), encode_format="raw", show_progress=False)
    meta = json.loads((tmp_path / "tensor-cache.json").read_text())
    shard = tmp_path / meta["records"][0]["dataPath"]
    good = shard.read_bytes()
    shard.write_bytes(good[:-4])
    with pytest.raises(Exception, match="corrupted"):
        f("vm.builtin.tensor_cache.load")(str(tmp_path), 1, 0)
    shard.write_bytes(good)
    meta["records"][0]["records"][0]["byteOffset"] = 8
    (tmp_path / "tensor-cache.json").write_text(json.dumps(meta))
    with pytest.raises(Exception, match="past"):
        f("vm.builtin.tensor_cache.load")(str(tmp_path), 1, 0)
    assert f("vm.builtin.tensor_cache.get")("p_0") is None
    f("vm.builtin.tensor_cache.update")("x", tvm.runtime.tensor(np.zeros(2, "float32")))
    with pytest.raises(Exception, match="already exists"):
        f("vm.builtin.tensor_cache.update")("x", tvm.runtime.tensor(np.zeros(2, "float32")))
    f("vm.builtin.tensor_cache.clear")()


def test_call_py_func_without_a_registered_function_raises():
    from tvm.runtime.vm import VirtualMachine

    vm = VirtualMachine(tvm.runtime.load_module(str(DIR / builtin_cases.PY_FUNC_SO)), tvm.cpu())
    x, s = tvm.runtime.tensor(np.ones(7, "float32")), tvm.runtime.tensor(np.ones((2, 3), "int32"))
    with pytest.raises(Exception, match="twice_plus_one"):
        vm["main"](x, s)
    tvm.get_global_func("vm.builtin.register_py_func")("twice_plus_one", lambda x: "not a tensor")
    tvm.get_global_func("vm.builtin.register_py_func")("sum_of", lambda x, s: s)
    try:
        with pytest.raises(Exception):
            vm["main"](x, s)  # the VM checks nothing here; the add kernel gets a string
    finally:
        tvm.get_global_func("vm.builtin.clear_py_func_registry")()


def test_export_shadowed_by_a_global_system_lib_raises_not_crashes():
    """A system-library export loaded with RTLD_GLOBAL first: a compiled-mode export loaded after
    it reads the system library's `__tvm_ffi__library_ctx` (ELF interposition). TVM's runtime
    crashes; this library must raise."""
    import subprocess
    import sys

    zoo = os.environ.get("RELAX_ZOO")
    if not zoo or not (pathlib.Path(zoo) / "compiled_dyn.so").is_file():
        pytest.skip("RELAX_ZOO with compiled_dyn.so is not at hand")
    script = f"""
import ctypes, numpy as np, tvm
from tvm.runtime.vm import VirtualMachine
ctypes.CDLL({str(DIR / builtin_cases.SYSTEM_LIB_SO)!r}, ctypes.RTLD_GLOBAL)
vm = VirtualMachine(tvm.runtime.load_module({zoo + '/compiled_dyn.so'!r}), tvm.cpu())
try:
    vm["main"](tvm.runtime.tensor(np.array(True)), tvm.runtime.tensor(np.ones((5, 3), "float32")))
    print("ran")
except Exception as e:
    print("raised:", e)
"""
    r = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr[-2000:]
    assert "raised:" in r.stdout and "RTLD_GLOBAL" in r.stdout, r.stdout
