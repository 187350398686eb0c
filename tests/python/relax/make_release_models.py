"""Makes the six models of ../shared/fixtures-v0.27 (mlp, mlp_bound, mlp_dyn, if_tuple, loop,
topk) with whichever TVM release runs it, for test_release_models.py:

    python make_release_models.py OUT_DIR

Run it with a full `apache-tvm` wheel (a compiler): 0.25.0, 0.26.0 or 0.27.0.post1. apache-tvm
0.25.0 needs `apache-tvm-ffi==0.1.12`: pip picks the newest (0.1.15.post2), whose
`tvm::ffi::json::Stringify` takes its Optional by reference, and 0.25.0's libtvm_runtime.so then
fails to load (undefined symbol _ZN3tvm3ffi4json9StringifyERKNS0_3AnyENS0_8OptionalIivEE).

For each model: `tvm.compile(mod, target="llvm")` (`relax.build` where there is no
`tvm.compile`), `export_library(OUT/NAME.so)`; the export is loaded back with that version's
own (full) runtime and called: `NAME.in.K.npy` are the arguments in call order, `NAME.out.K.npy`
the outputs (a tuple result flattened depth first), `NAME.text.txt` the executable's `as_text()`
(its function table and bytecode). `manifest.json` has the fixtures' format plus a top-level
"tvm" (the version that made them) and "tvm_ffi".

API differences handled: `tvm.runtime.tensor` vs `tvm.nd.array`, `tvm.compile` vs
`relax.build`, `tvm.runtime.vm.VirtualMachine` vs `tvm.relax.VirtualMachine`, the Tensor type
(`tvm.runtime.Tensor` vs `tvm.nd.NDArray`). None of the six models needs TIR script
(`tvm.script.tirx`, `tvm.script.tir` before it).
"""

import json
import os
import sys

import numpy as np
import tvm
import tvm.relax.frontend.nn as nn
from tvm import relax
from tvm.script import ir as I
from tvm.script import relax as R

TARGET = "llvm"

# --------------------------------------------------------------------------------------------
# version compatibility


def to_tensor(a):
    if hasattr(tvm.runtime, "tensor"):
        return tvm.runtime.tensor(a)
    return tvm.nd.array(a)


def compile_llvm(mod):
    if hasattr(tvm, "compile"):
        return tvm.compile(mod, target=TARGET)
    return relax.build(mod, target=TARGET)


def vm_class():
    try:
        from tvm.runtime.vm import VirtualMachine
    except ImportError:
        from tvm.relax import VirtualMachine
    return VirtualMachine


def is_tensor(v):
    return hasattr(v, "numpy") and hasattr(v, "shape")


def ffi_version():
    try:
        import importlib.metadata as md

        return md.version("apache-tvm-ffi")
    except Exception:
        return None


# --------------------------------------------------------------------------------------------
# models


class MLP(nn.Module):
    def __init__(self):
        self.fc1 = nn.Linear(16, 32)
        self.fc2 = nn.Linear(32, 4)

    def forward(self, x: nn.Tensor):
        return nn.op.softmax(self.fc2(nn.op.relu(self.fc1(x))), axis=-1)


def weights(params, rng):
    return [(rng.standard_normal([int(d) for d in p.shape]) * 0.3).astype(p.dtype) for _, p in params]


def mlp(rng):
    mod, params = MLP().export_tvm({"forward": {"x": nn.spec.Tensor((2, 16), "float32")}})
    x = rng.standard_normal((2, 16)).astype("float32")
    return dict(mod=mod, function="forward", inputs=[x] + weights(params, rng),
                covers="nn.Module export, weights as arguments")


def mlp_bound(rng):
    mod, params = MLP().export_tvm({"forward": {"x": nn.spec.Tensor((2, 16), "float32")}})
    values = {name: to_tensor(w) for (name, _), w in zip(params, weights(params, rng))}
    mod = relax.transform.BindParams("forward", values)(mod)
    x = rng.standard_normal((2, 16)).astype("float32")
    return dict(mod=mod, function="forward", inputs=[x],
                covers="weights bound as VM constants (tensor constants in the executable)")


def mlp_dyn(rng):
    mod, params = MLP().export_tvm({"forward": {"x": nn.spec.Tensor(("batch", 16), "float32")}})
    x = rng.standard_normal((5, 16)).astype("float32")
    return dict(mod=mod, function="forward", inputs=[x] + weights(params, rng),
                covers="symbolic batch: shape heap, match_shape, make_shape")


def if_tuple(rng):
    @I.ir_module
    class ReleaseIfTuple:
        @R.function
        def main(c: R.Tensor((), "bool"), x: R.Tensor((2, 3), "float32"), y: R.Tensor((2, 3), "float32")):
            if c:
                a = R.add(x, y)
                b = R.multiply(x, y)
                t = (a, b)
            else:
                a = R.subtract(x, y)
                b = R.nn.relu(x)
                t = (a, b)
            s = R.sum(x, axis=[1])
            return (t, s)

    x = rng.standard_normal((2, 3)).astype("float32")
    y = rng.standard_normal((2, 3)).astype("float32")
    return dict(mod=ReleaseIfTuple, inputs=[np.array(True), x, y],
                covers="R.If on a bool tensor, nested tuple result")


def loop(rng):
    @I.ir_module
    class ReleaseLoop:
        @R.function
        def acc(i: R.Tensor((), "int32"), n: R.Tensor((), "int32"), x: R.Tensor((4,), "float32"),
                s: R.Tensor((4,), "float32")) -> R.Tensor((4,), "float32"):
            cls = ReleaseLoop
            if R.less(i, n):
                i2 = R.add(i, R.const(1, "int32"))
                s2 = R.add(R.multiply(s, R.const(0.5, "float32")), x)
                r = cls.acc(i2, n, x, s2)
            else:
                r = s
            return r

        @R.function
        def main(n: R.Tensor((), "int32"), x: R.Tensor((4,), "float32")) -> R.Tensor((4,), "float32"):
            cls = ReleaseLoop
            return cls.acc(R.const(0, "int32"), n, x, x)

    x = rng.standard_normal((4,)).astype("float32")
    return dict(mod=ReleaseLoop, inputs=[np.array(5, dtype="int32"), x],
                covers="a VM function calling itself (recursion), If")


def topk(rng):
    @I.ir_module
    class ReleaseTopk:
        @R.function
        def main(x: R.Tensor((3, 10), "float32")):
            with R.dataflow():
                t = R.topk(x, k=3, axis=-1, ret_type="both", largest=True, dtype="int32")
                v = t[0]
                i = t[1]
                s = R.sort(x, axis=-1, descending=False)
                a = R.argsort(x, axis=-1, descending=True, dtype="int32")
                R.output(v, i, s, a)
            return (v, i, s, a)

    x = rng.standard_normal((3, 10)).astype("float32")
    return dict(mod=ReleaseTopk, inputs=[x], covers="topk/sort/argsort kernels, int32 and float outputs")


MODELS = [mlp, mlp_bound, mlp_dyn, if_tuple, loop, topk]

# --------------------------------------------------------------------------------------------
# driver


def flatten(value, out):
    if is_tensor(value):
        out.append(value.numpy())
    else:  # tuple / ffi Array
        for v in value:
            flatten(v, out)
    return out


def make(build, out_dir, seed):
    name = build.__name__
    rng = np.random.default_rng(seed)
    m = build(rng)
    so = os.path.join(out_dir, f"{name}.so")
    compile_llvm(m["mod"]).export_library(so)
    loaded = tvm.runtime.load_module(so)
    with open(os.path.join(out_dir, f"{name}.text.txt"), "w") as f:
        f.write(loaded["as_text"]())
    func = m.get("function", "main")
    vm = vm_class()(loaded, tvm.cpu())
    outs = flatten(vm[func](*[to_tensor(a) for a in m["inputs"]]), [])
    for k, a in enumerate(m["inputs"]):
        np.save(os.path.join(out_dir, f"{name}.in.{k}.npy"), a)
    for k, a in enumerate(outs):
        np.save(os.path.join(out_dir, f"{name}.out.{k}.npy"), a)
    spec = lambda a: {"shape": list(a.shape), "dtype": str(a.dtype)}  # noqa: E731
    return {"file": f"{name}.so", "function": func, "inputs": [spec(a) for a in m["inputs"]],
            "outputs": [spec(a) for a in outs], "rtol": 1e-5, "atol": 1e-5, "covers": m["covers"]}


def main():
    out_dir = sys.argv[1]
    os.makedirs(out_dir, exist_ok=True)
    manifest = {"tvm": tvm.__version__, "tvm_ffi": ffi_version(), "models": {}}
    for seed, build in enumerate(MODELS):
        manifest["models"][build.__name__] = make(build, out_dir, seed)
        print(f"ok {build.__name__}", flush=True)
    with open(os.path.join(out_dir, "manifest.json"), "w") as f:
        json.dump(manifest, f, indent=1)
    print(f"tvm {tvm.__version__}: {len(manifest['models'])} models -> {out_dir}")


if __name__ == "__main__":
    main()
