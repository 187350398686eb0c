"""Calls of the Relax runtime's language-model builtins (TVM's `lm_support.cc`: the sampling helpers,
the in-place logit transforms, the legacy attention KV cache; `tensor_cache_support.cc`: weights
loaded by name; `builtin.cc`: host functions for `R.call_py_func`) and a system-library export, on
fixed inputs.

`python builtin_cases.py OUT_DIR` runs them on TVM's own runtime (the pure apache-tvm wheel) and
records its answers in OUT_DIR/builtin_refs.npz (and the exports some cases load, made by TVM's
compiler); test_builtin_cases.py runs the same cases on this library and compares. Each case is a
function of (global function lookup, numpy -> tensor, OUT_DIR) that returns a list of numpy arrays.
"""

import sys

import numpy as np


def _softmax(x):
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    return (e / e.sum(axis=-1, keepdims=True)).astype("float32")


def _rng():
    return np.random.default_rng(20261128)


UNIFORMS = np.linspace(0.005, 0.995, 23)


def top_p_from_logits(f, T, d):
    rng = _rng()
    fn = f("vm.builtin.sample_top_p_from_logits")
    out = []
    for shape in [(1, 64), (1, 1, 7), (40,)]:
        logits = (rng.standard_normal(shape) * 3).astype("float32")
        t = T(logits)
        for temp in (0.0, 0.5, 1.0, 2.0):
            for top_p in (0.2, 0.8, 1.0):
                out.append([fn(t, temp, top_p, float(u)) for u in UNIFORMS])
    return [np.array(out, dtype="int64")]


def top_p_from_prob(f, T, d):
    rng = _rng()
    fn = f("vm.builtin.sample_top_p_from_prob")
    peaked = np.zeros((1, 3000), "float32")
    peaked[0, 17], peaked[0, 2000], peaked[0, 5] = 0.9, 0.06, 0.04
    probs = [
        _softmax(rng.standard_normal((1, 64)) * 2),
        _softmax(rng.standard_normal((1, 1, 2048)) * 4),
        peaked,
        _softmax(rng.standard_normal((1, 10)) * 0.01),
    ]
    out = []
    for p in probs:
        t = T(p)
        for top_p in (0.1, 0.5, 0.9, 0.99, 1.0):
            out.append([fn(t, top_p, float(u)) for u in UNIFORMS])
    return [np.array(out, dtype="int64")]


def multinomial_from_uniform(f, T, d):
    rng = _rng()
    fn = f("vm.builtin.multinomial_from_uniform")
    prob = _softmax(rng.standard_normal((6, 16)))
    uniform = np.array([[0.0], [0.1], [0.5], [0.93], [0.999], [1.0]], "float32")
    return [fn(T(prob), T(uniform)).numpy()]


def repetition_penalty(f, T, d):
    rng = _rng()
    logits = rng.standard_normal((1, 32)).astype("float32")
    logits[0, 4] = 0.0
    t = T(logits)
    f("vm.builtin.apply_repetition_penalty")(t, T(np.array([3, 7, 7, 0, 31, 4], "int32")), 1.3)
    return [t.numpy()]


def presence_and_frequency_penalty(f, T, d):
    rng = _rng()
    t = T(rng.standard_normal((1, 32)).astype("float32"))
    ids, freqs = np.array([1, 9, 30, 9], "int32"), np.array([1, 3, 2, 1], "int32")
    f("vm.builtin.apply_presence_and_frequency_penalty")(t, T(ids), T(freqs), 0.5, 0.25)
    return [t.numpy()]


def softmax_with_temperature(f, T, d):
    rng = _rng()
    out = []
    for shape, temp in [((1, 50), 0.7), ((1, 50), 2.0), ((2, 16), 1.0), ((1, 8), 1e-3)]:
        t = T((rng.standard_normal(shape) * 4).astype("float32"))
        f("vm.builtin.apply_softmax_with_temperature")(t, temp)
        out.append(t.numpy())
    return out


def kv_cache(f, T, d):
    import tvm_ffi

    rng = _rng()
    g = lambda n: f("vm.builtin.attention_kv_cache_" + n)  # noqa: E731
    rows = lambda n: T(rng.standard_normal((n, 2, 3)).astype("float32"))  # noqa: E731
    view = lambda c: g("view")(c).numpy()  # noqa: E731
    out = []
    c = g("create")(rows(2), tvm_ffi.Shape((2, 2, 3)), 2)
    out.append(view(c))
    for n in (3, 1, 4):
        c = g("append")(c, rows(n))
        out.append(view(c))
    g("array_popn")([c], 3)
    out.append(g("view")(c, tvm_ffi.Shape((7, 2, 3))).numpy())
    c = g("update")(c, rows(7))
    out.append(view(c))
    w = g("create")(rows(1), tvm_ffi.Shape((8, 2, 3)), 0)
    for n in (3, 2, 4, 1):
        w = g("window_override")(w, rows(n), 6)
        out.append(view(w))
    s = g("create")(rows(1), tvm_ffi.Shape((4, 2, 3)), 0)
    for n in (2, 3, 2, 3):
        s = g("window_override_with_sinks")(s, rows(n), 6, 2)
        out.append(view(s))
    g("array_clear")([c, w])
    c = g("append")(c, rows(2))
    out.append(view(c))
    return out


def tensor_cache(f, T, d):
    """Weights written by tvm.contrib.tvmjs (raw and f32-to-bf16, two shards), loaded into the cache."""
    import tempfile

    from tvm.contrib import tvmjs

    rng = _rng()
    params = {
        "w_0": rng.standard_normal((4, 3)).astype("float32"),
        "w_1": rng.standard_normal((70000,)).astype("float32"),
        "w_2": rng.integers(-100, 100, (3, 2)).astype("int32"),
        "emb": rng.standard_normal((2, 5)).astype("float16"),
    }
    fmt = {"w_0": "f32-to-bf16", "w_1": "raw", "*": "raw"}
    get = f("vm.builtin.tensor_cache.get")
    f("vm.builtin.tensor_cache.clear")()
    with tempfile.TemporaryDirectory() as d:
        tvmjs.dump_tensor_cache(params, d, encode_format=fmt, shard_cap_mb=0.25, show_progress=False)
        f("vm.builtin.tensor_cache.load")(d, 1, 0)
    out = [get(n).numpy() for n in params]
    out += [a.numpy() for a in f("vm.builtin.param_array_from_cache")("w", -1)]
    out += [a.numpy() for a in f("vm.builtin.param_array_from_cache")("w", 2)]
    out += [a.numpy() for a in f("vm.builtin.param_module_from_cache_by_name")(["emb", "w_2"])["get_params"]()]
    out += [a.numpy() for a in f("vm.builtin.param_array_from_cache_by_name_unpacked")("w_0", "emb")]
    f("vm.builtin.tensor_cache.update")("w_1", T(np.arange(3, dtype="float32")), True)
    out.append(get("w_1").numpy())
    f("vm.builtin.tensor_cache.remove")("w_1")
    out.append(np.array([get("w_1") is None, len(f("vm.builtin.param_array_from_cache")("w", -1))]))
    f("vm.builtin.tensor_cache.clear")()
    out.append(np.array([get("w_0") is None]))
    return out


PY_FUNC_SO = "py_func.so"


def make_py_func_model(out_dir):
    """A v0.27 export whose `main` calls back into a host function (`R.call_py_func`)."""
    import tvm
    from tvm.script import ir as I
    from tvm.script import relax as R

    @I.ir_module
    class PyFunc:
        @R.function
        def main(x: R.Tensor((7,), "float32"), s: R.Tensor((2, 3), "int32")):
            y = R.call_py_func("twice_plus_one", x, out_ty=R.Tensor((7,), "float32"))
            t = R.call_py_func("sum_of", x, s, out_ty=R.Tensor((), "float32"))
            return R.add(y, x), t

    tvm.compile(PyFunc, target="llvm").export_library(f"{out_dir}/{PY_FUNC_SO}")


def py_func(f, T, d):
    """Host functions registered under names, called from the VM, cleared again."""
    import tvm

    seen = []

    def twice_plus_one(x):
        seen.append(x.shape)
        return T(x.numpy() * 2 + 1)

    def sum_of(x, s):
        return T(np.array(x.numpy().sum() + s.numpy().sum(), "float32"))

    f("vm.builtin.register_py_func")("twice_plus_one", twice_plus_one)
    f("vm.builtin.register_py_func")("sum_of", sum_of)
    try:
        vm = tvm.runtime.vm.VirtualMachine(tvm.runtime.load_module(f"{d}/{PY_FUNC_SO}"), tvm.cpu())
        x = np.linspace(-1, 1, 7).astype("float32")
        s = np.arange(6, dtype="int32").reshape(2, 3)
        y, t = vm["main"](T(x), T(s))
        got = f("vm.builtin.get_py_func")("sum_of")(T(x), T(s)).numpy()
    finally:
        f("vm.builtin.clear_py_func_registry")()
    return [y.numpy(), t.numpy(), got, np.array([tuple(v) for v in seen], "int64")]


SYSTEM_LIB_SO = "system_lib.so"


def make_system_lib_model(out_dir):
    """A v0.27 system-library export (`relax.build(..., system_lib=True)`): its kernels and
    `__tvm_ffi__library_bin` register themselves in the process's system library when loaded."""
    import tvm
    from tvm.script import ir as I
    from tvm.script import relax as R

    @I.ir_module
    class SysLib:
        @R.function
        def main(x: R.Tensor((2, 3), "float32"), y: R.Tensor((2, 3), "float32")):
            z = R.multiply(R.add(x, y), x)
            return z, R.sum(z, axis=[1])

    tvm.relax.build(SysLib, target="llvm", system_lib=True).export_library(f"{out_dir}/{SYSTEM_LIB_SO}")


def system_lib(f, T, d):
    """The export through `tvm.runtime.system_lib()` after a global dlopen, and loaded as a file."""
    import ctypes

    import tvm
    from tvm.runtime.vm import VirtualMachine

    x = np.linspace(-1, 2, 6).astype("float32").reshape(2, 3)
    y = np.arange(6, dtype="float32").reshape(2, 3)
    ctypes.CDLL(f"{d}/{SYSTEM_LIB_SO}", ctypes.RTLD_GLOBAL)
    out = []
    for mod in (tvm.runtime.system_lib(), tvm.runtime.load_module(f"{d}/{SYSTEM_LIB_SO}")):
        z, s = VirtualMachine(mod, tvm.cpu())["main"](T(x), T(y))
        out += [z.numpy(), s.numpy()]
    return out


CASES = {
    f.__name__: f
    for f in [
        top_p_from_logits,
        top_p_from_prob,
        multinomial_from_uniform,
        repetition_penalty,
        presence_and_frequency_penalty,
        softmax_with_temperature,
        kv_cache,
        tensor_cache,
        py_func,
        system_lib,
    ]
}


# Cases run in a process of their own: a system-library export loaded with RTLD_GLOBAL puts its
# kernels and `__tvm_ffi__library_ctx` in the global symbol scope, where they take the place of
# those of libraries loaded after it (ELF interposition; TVM's own runtime then crashes).
ISOLATED = {"system_lib"}


def run(name, d):
    """Case `name`; `d` is the folder with the exports main() made."""
    if name in ISOLATED:
        import subprocess
        import tempfile

        with tempfile.TemporaryDirectory() as t:
            subprocess.run([sys.executable, __file__, "--case", name, d, f"{t}/out.npz"], check=True)
            got = np.load(f"{t}/out.npz")
            return [got[f"a{k}"] for k in range(len(got.files))]
    import tvm

    return CASES[name](tvm.get_global_func, tvm.runtime.tensor, d)


def main(out_dir):
    import pathlib

    pathlib.Path(out_dir).mkdir(parents=True, exist_ok=True)
    make_py_func_model(out_dir)
    make_system_lib_model(out_dir)
    refs = {}
    for name in CASES:
        for k, a in enumerate(run(name, out_dir)):
            refs[f"{name}.{k}"] = a
    np.savez(pathlib.Path(out_dir) / "builtin_refs.npz", **refs)
    print(f"{len(refs)} arrays from {len(CASES)} cases")


if __name__ == "__main__":
    if sys.argv[1] == "--case":
        import tvm

        arrays = CASES[sys.argv[2]](tvm.get_global_func, tvm.runtime.tensor, sys.argv[3])
        np.savez(sys.argv[4], **{f"a{k}": a for k, a in enumerate(arrays)})
    else:
        main(sys.argv[1])
