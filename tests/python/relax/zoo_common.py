"""What the zoo's model definitions and make_zoo.py share: the argument kinds, the model registry
(`@model`) and seeded random values."""

import numpy as np
import tvm
from tvm import relax


TARGET = "llvm"


class Prim:
    """An R.Prim argument."""

    def __init__(self, value, dtype="int64"):
        self.value, self.dtype = value, dtype


class Shape:
    """An R.Shape argument."""

    def __init__(self, dims):
        self.dims = [int(d) for d in dims]


# Every model of zoo_models_*.py by name, in the order of registration. (Each TVMScript module
# class has a unique name within its file: TVMScript reads a class's source through
# inspect.getsource, which finds the first class of that name in the file.)
MODELS = {}


def model(name, covers, rtol=1e-5, atol=1e-5, needs_full_runtime=False, exec_mode="bytecode",
          needs_compiler_python=False):
    def register(build):
        MODELS[name] = dict(
            build=build,
            covers=covers,
            rtol=rtol,
            atol=atol,
            needs_full_runtime=needs_full_runtime,
            needs_compiler_python=needs_compiler_python,
            exec_mode=exec_mode,
        )
        return build

    return register


def rng_for(name):
    return np.random.default_rng(abs(hash_name(name)) % (2**32))


def hash_name(name):
    h = 0
    for c in name.encode():
        h = (h * 131 + c) % (2**31)
    return h


def randn(rng, *shape, dtype="float32", scale=1.0):
    return (rng.standard_normal(shape) * scale).astype(dtype)


def bind_all(mod, func, params, rng, scale=0.2):
    """BindParams with random values for an nn.Module's parameter list."""
    values = {n: tvm.runtime.tensor(randn(rng, *[int(d) for d in p.shape], dtype=p.dtype, scale=scale)) for n, p in params}
    return relax.transform.BindParams(func, values)(mod)


def param_values(params, rng, scale=0.2):
    return [randn(rng, *[int(d) for d in p.shape], dtype=p.dtype, scale=scale) for _, p in params]
