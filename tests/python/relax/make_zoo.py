"""Makes a zoo of small TVM v0.27 Relax exports for test_zoo.py (run with the pure
`apache-tvm==0.27.0.post1` wheel, a full compiler):

    python make_zoo.py OUT_DIR [NAME ...]

For each model: `tvm.compile(mod, target="llvm")` (or `relax.build(..., exec_mode="compiled")`),
`export_library(OUT/NAME.so)`, then the exported file is loaded back with TVM's own runtime and
called on random inputs (fixed seed). `NAME.in.K.npy` are the arguments in call order (a tuple
argument flattened depth first), `NAME.out.K.npy` the results (a tuple result flattened depth
first; opaque objects such as a KV cache have no file; bfloat16/float8 arrays are stored as their
raw unsigned-int bits, the manifest names the real dtype). `manifest.json` has the format of
../shared/fixtures-v0.27 (file, function, inputs, outputs, rtol, atol, covers) plus:

- `kind` on an input/output: "tensor" (default), "shape" (`R.Shape`, stored as int64 1-d),
  "prim" (`R.Prim`, stored as a 0-d array of its dtype), "tuple" (an input `R.Tuple`, with
  `items`), "object" (an opaque output, not compared);
- `out_tree`: the nesting of the result, leaves numbered as the output files;
- `init`: {"function", "insert_at"}: call that function with no arguments first and insert its
  (tuple) result, flattened, at that argument position (nn.Module effects: KV cache, IO);
- `needs_full_runtime`: true where TVM's runtime-only library cannot run it (the kernels call
  `tvm.contrib.sort.*` of libtvm_runtime_extra, or compiler-only `relax.run.*` functions);
- `exec_mode`: "compiled" where the VM functions are compiled to TIR (VM-TIR);
- several entries may share one file (`NAME__FUNCTION`): modules with several functions.

Models the compiler rejects are listed under `skipped` with the error (the `refused_*` models are
kept on purpose to record what v0.27 refuses). Naming models after OUT_DIR remakes only those, in
an existing zoo.
"""

import json
import os
import sys
import traceback

import ml_dtypes
import numpy as np
import tvm
import tvm.relax.frontend.nn as nn
from tvm import relax
from tvm.relax.frontend.nn import spec
from tvm.runtime.vm import VirtualMachine
from tvm.script import ir as I
from tvm.script import relax as R
from tvm.script import tirx as T

TARGET = "llvm"


class Prim:
    """An R.Prim argument."""

    def __init__(self, value, dtype="int64"):
        self.value, self.dtype = value, dtype


class Shape:
    """An R.Shape argument."""

    def __init__(self, dims):
        self.dims = [int(d) for d in dims]


# Each TVMScript module class has a unique name: TVMScript reads a class's source through
# inspect.getsource, which finds the first class of that name in the file.
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


# ---------------------------------------------------------------------------------------------
# CNN-style models


@model("cnn_bn", "conv2d (+groups, stride), batch_norm, relu, max_pool2d, avg_pool2d, "
       "adaptive_avg_pool2d, flatten, dense+bias; all weights bound as constants (BindParams)",
       rtol=1e-4, atol=1e-4)
def _(rng):
    @I.ir_module
    class Mod_cnn_bn:
        @R.function
        def main(x: R.Tensor((2, 3, 16, 16), "float32"),
                 w1: R.Tensor((8, 3, 3, 3), "float32"), b1: R.Tensor((1, 8, 1, 1), "float32"),
                 gamma: R.Tensor((8,), "float32"), beta: R.Tensor((8,), "float32"),
                 mean: R.Tensor((8,), "float32"), var: R.Tensor((8,), "float32"),
                 w2: R.Tensor((16, 4, 3, 3), "float32"),
                 wd: R.Tensor((10, 16), "float32"), bd: R.Tensor((10,), "float32")):
            R.func_attr({"num_input": 1})
            with R.dataflow():
                c1 = R.nn.conv2d(x, w1, padding=(1, 1))
                c1 = R.add(c1, b1)
                bn = R.nn.batch_norm(c1, gamma, beta, mean, var, axis=1)
                r = R.nn.relu(bn[0])
                p = R.nn.max_pool2d(r, pool_size=(2, 2), strides=(2, 2))
                c2 = R.nn.conv2d(p, w2, strides=(2, 2), padding=(1, 1), groups=2)
                a = R.nn.avg_pool2d(c2, pool_size=(2, 2), strides=(1, 1), padding=(1, 1))
                g = R.nn.adaptive_avg_pool2d(a, output_size=(1, 1))
                f = R.reshape(g, R.shape([2, 16]))
                d = R.add(R.matmul(f, R.permute_dims(wd)), bd)
                R.output(d)
            return d

    shapes = [(8, 3, 3, 3), (1, 8, 1, 1), (8,), (8,), (8,), (8,), (16, 4, 3, 3), (10, 16), (10,)]
    vals = [randn(rng, *s, scale=0.3) for s in shapes]
    vals[4] = np.abs(vals[4]) + 0.5  # mean
    vals[5] = np.abs(vals[5]) + 0.5  # var
    names = ["w1", "b1", "gamma", "beta", "mean", "var", "w2", "wd", "bd"]
    mod = relax.transform.BindParams("main", {n: tvm.runtime.tensor(v) for n, v in zip(names, vals)})(Mod_cnn_bn)
    return dict(mod=mod, inputs=[randn(rng, 2, 3, 16, 16)])


class SmallCNN(nn.Module):
    def __init__(self):
        self.c1 = nn.Conv2D(3, 8, 3, padding=1)
        self.c2 = nn.Conv2D(8, 8, 3, padding=1, groups=4)
        self.gn = nn.GroupNorm(2, 8)
        self.c1d = nn.Conv1D(8, 4, 3, padding=1)
        self.up = nn.ConvTranspose1D(4, 4, 2, stride=2)
        self.fc = nn.Linear(4 * 32, 5)

    def forward(self, x: nn.Tensor):
        x = nn.op.relu(self.c1(x))
        x = self.gn(nn.op.silu(self.c2(x)))
        x = nn.op.interpolate(x, scale_factor=0.5, mode="bilinear")  # (1, 8, 4, 4)
        x = nn.op.reshape(x, (1, 8, 16))
        x = self.up(nn.op.gelu(self.c1d(x)))  # (1, 4, 32)
        return nn.op.softmax(self.fc(nn.op.reshape(x, (1, 128))), axis=-1)


@model("cnn_nn", "nn.Module export_tvm: Conv2D (groups), GroupNorm, interpolate (bilinear), Conv1D, "
       "ConvTranspose1D, gelu/silu, Linear, softmax; weights as arguments", rtol=1e-4, atol=1e-4)
def _(rng):
    mod, params = SmallCNN().export_tvm({"forward": {"x": spec.Tensor((1, 3, 8, 8), "float32")}})
    return dict(mod=mod, function="forward", inputs=[randn(rng, 1, 3, 8, 8)] + param_values(params, rng))


@model("cnn_fused", "conv2d+bias+relu+pool MLP head compiled with the CPU default pipeline "
       "(relax.get_default_pipeline: FuseOps/FuseTIR fused kernels), constants bound",
       rtol=1e-4, atol=1e-4)
def _(rng):
    class Net(nn.Module):
        def __init__(self):
            self.c1 = nn.Conv2D(3, 6, 3, padding=1)
            self.fc = nn.Linear(6 * 4 * 4, 3)

        def forward(self, x):
            x = nn.op.relu(self.c1(x))
            x = nn.op.reshape(x, (1, 6, 4, 2, 4, 2))
            x = nn.op.max(x, axis=[3, 5])
            return self.fc(nn.op.reshape(x, (1, 96)))

    mod, params = Net().export_tvm({"forward": {"x": spec.Tensor((1, 3, 8, 8), "float32")}})
    mod = bind_all(mod, "forward", params, rng)
    return dict(mod=mod, function="forward", inputs=[randn(rng, 1, 3, 8, 8)],
                pipeline=relax.get_default_pipeline(tvm.target.Target(TARGET)))


@model("image_ops", "conv2d_transpose, nn.pad, image.resize2d (nearest/linear), leakyrelu, "
       "prelu, conv1d, max_pool1d", rtol=1e-4, atol=1e-4)
def _(rng):
    @I.ir_module
    class Mod_image_ops:
        @R.function
        def main(x: R.Tensor((1, 4, 5, 5), "float32"), w: R.Tensor((4, 2, 3, 3), "float32"),
                 alpha: R.Tensor((2,), "float32"), w1: R.Tensor((3, 2, 3), "float32")):
            with R.dataflow():
                t = R.nn.conv2d_transpose(x, w, strides=(2, 2), padding=(1, 1))  # (1,2,9,9)
                p = R.nn.pad(t, pad_width=[0, 0, 0, 0, 1, 2, 2, 1], pad_value=0.5)  # (1,2,12,12)
                r1 = R.image.resize2d(p, R.shape([6, 6]), method="nearest_neighbor")
                r2 = R.image.resize2d(p, R.shape([7, 5]), method="linear")
                l = R.nn.leakyrelu(r2, alpha=0.1)
                q = R.nn.prelu(r1, alpha, axis=1)
                s = R.reshape(q, R.shape([1, 2, 36]))
                c = R.nn.conv1d(s, w1, padding=(1, 1))
                m = R.nn.max_pool1d(c, pool_size=(3,), strides=(2,))
                R.output(l, m)
            return (l, m)

    return dict(mod=Mod_image_ops, inputs=[randn(rng, 1, 4, 5, 5), randn(rng, 4, 2, 3, 3), randn(rng, 2),
                               randn(rng, 3, 2, 3)])


# ---------------------------------------------------------------------------------------------
# Transformer-style models


class Block(nn.Module):
    def __init__(self, d=16, heads=2):
        self.ln1 = nn.LayerNorm(d)
        self.qkv = nn.Linear(d, 3 * d)
        self.out = nn.Linear(d, d)
        self.ln2 = nn.LayerNorm(d)
        self.up = nn.Linear(d, 2 * d)
        self.down = nn.Linear(2 * d, d)
        self.d, self.h = d, heads

    def forward(self, x: nn.Tensor):
        b, s, d = x.shape
        h, hd = self.h, self.d // self.h
        y = self.ln1(x)
        qkv = nn.op.reshape(self.qkv(y), (b, s, 3, h, hd))
        q, k, v = nn.op.split(qkv, 3, axis=2)
        q = nn.op.permute_dims(nn.op.reshape(q, (b, s, h, hd)), [0, 2, 1, 3])
        k = nn.op.permute_dims(nn.op.reshape(k, (b, s, h, hd)), [0, 2, 3, 1])
        v = nn.op.permute_dims(nn.op.reshape(v, (b, s, h, hd)), [0, 2, 1, 3])
        att = nn.op.softmax(nn.op.matmul(q, k) * (1.0 / hd**0.5), axis=-1)
        o = nn.op.reshape(nn.op.permute_dims(nn.op.matmul(att, v), [0, 2, 1, 3]), (b, s, d))
        x = x + self.out(o)
        return x + self.down(nn.op.gelu(self.up(self.ln2(x))))


@model("transformer_dyn", "nn.Module attention block: LayerNorm, Linear, split, permute_dims, "
       "matmul+softmax attention, gelu MLP; symbolic batch and seq ('b', 's'), weights as args",
       rtol=1e-4, atol=1e-4)
def _(rng):
    mod, params = Block().export_tvm({"forward": {"x": spec.Tensor(("b", "s", 16), "float32")}})
    return dict(mod=mod, function="forward", inputs=[randn(rng, 2, 5, 16)] + param_values(params, rng))


@model("sdpa_rms", "nn.op.scaled_dot_product_attention (R.nn.attention, causal) "
       "(is_causal), RMSNorm, triu, weights bound as constants", rtol=1e-4, atol=1e-4)
def _(rng):
    class Attn(nn.Module):
        def __init__(self):
            self.norm = nn.RMSNorm(8, axes=-1)
            self.q = nn.Linear(8, 8, bias=False)
            self.k = nn.Linear(8, 8, bias=False)
            self.v = nn.Linear(8, 8, bias=False)

        def forward(self, x):
            y = self.norm(x)
            q = nn.op.reshape(self.q(y), (1, 6, 2, 4))
            k = nn.op.reshape(self.k(y), (1, 6, 2, 4))
            v = nn.op.reshape(self.v(y), (1, 6, 2, 4))
            o = nn.op.scaled_dot_product_attention(q, k, v, is_causal=True)
            mask = nn.op.triu(nn.op.full((6, 8), 1.0, dtype="float32"), 1)
            return nn.op.reshape(o, (1, 6, 8)) + x * mask

    mod, params = Attn().export_tvm({"forward": {"x": spec.Tensor((1, 6, 8), "float32")}})
    mod = bind_all(mod, "forward", params, rng, scale=0.4)
    return dict(mod=mod, function="forward", inputs=[randn(rng, 1, 6, 8)])


@model("dense_act", "dense with bias (matmul + permute_dims + add, R.linear), gelu, gelu_tanh, "
       "silu, sigmoid, tanh, softmax, log_softmax, clip, erf, exp/log/sqrt/rsqrt; weights bound as "
       "constants", rtol=1e-4, atol=1e-4)
def _(rng):
    @I.ir_module
    class Mod_dense_act:
        @R.function
        def main(x: R.Tensor((4, 8), "float32"), w: R.Tensor((6, 8), "float32"),
                 b: R.Tensor((6,), "float32"), w2: R.Tensor((6, 6), "float32")):
            R.func_attr({"num_input": 1})
            with R.dataflow():
                h = R.add(R.matmul(x, R.permute_dims(w)), b)
                a = R.nn.gelu(h)
                c = R.nn.gelu_tanh(h)
                s = R.nn.silu(h)
                t = R.tanh(R.sigmoid(h))
                l = R.linear(a, w2, b)
                sm = R.nn.softmax(l, axis=-1)
                ls = R.nn.log_softmax(l, axis=0)
                cl = R.clip(h, -0.5, 0.5)
                e = R.erf(cl)
                m = R.add(R.sqrt(R.exp(cl)), R.rsqrt(R.add(R.abs(h), R.const(1.0, "float32"))))
                g = R.log(R.add(R.square(c), R.const(1.0, "float32")))
                R.output(sm, ls, s, t, e, m, g)
            return (sm, ls, s, t, e, m, g)

    vals = {"w": randn(rng, 6, 8, scale=0.3), "b": randn(rng, 6), "w2": randn(rng, 6, 6, scale=0.3)}
    mod = relax.transform.BindParams("main", {k: tvm.runtime.tensor(v) for k, v in vals.items()})(Mod_dense_act)
    return dict(mod=mod, inputs=[randn(rng, 4, 8)])


# ---------------------------------------------------------------------------------------------
# Tensor manipulation


@model("concat_split", "concat, split (sections and indices), stack, tuple-of-tuples result")
def _(rng):
    @I.ir_module
    class Mod_concat_split:
        @R.function
        def main(a: R.Tensor((2, 3), "float32"), b: R.Tensor((2, 5), "float32")):
            with R.dataflow():
                c = R.concat((a, b), axis=1)  # (2, 8)
                s = R.split(c, 4, axis=1)  # 4 x (2, 2)
                t = R.split(c, [1, 6], axis=1)  # (2,1) (2,5) (2,2)
                st = R.stack((s[0], s[3]), axis=0)
                out = ((s[0], s[1]), (t[1], (t[2], st)), c)
                R.output(out)
            return out

    return dict(mod=Mod_concat_split, inputs=[randn(rng, 2, 3), randn(rng, 2, 5)])


@model("indexing", "strided_slice (strides, negative), take (int64/int32 indices, axis), where, "
       "reshape, permute_dims, broadcast_to, expand_dims, squeeze, flip, tile, repeat, "
       "gather_elements, scatter_elements, one_hot, dynamic_strided_slice")
def _(rng):
    @I.ir_module
    class Mod_indexing:
        @R.function
        def main(x: R.Tensor((4, 6), "float32"), idx: R.Tensor((3,), "int64"),
                 idx32: R.Tensor((2, 2), "int32"), cond: R.Tensor((4, 6), "bool"),
                 gi: R.Tensor((4, 2), "int64"), begin: R.Tensor((2,), "int64"),
                 end: R.Tensor((2,), "int64"), strides: R.Tensor((2,), "int64")):
            with R.dataflow():
                s = R.strided_slice(x, axes=[0, 1], begin=[3, 0], end=[0, 6], strides=[-1, 2])
                t = R.take(x, idx, axis=1)
                t2 = R.take(x, idx32, axis=0)
                w = R.where(cond, x, R.negative(x))
                r = R.permute_dims(R.reshape(w, R.shape([2, 3, 4])), axes=[2, 0, 1])
                bc = R.broadcast_to(R.expand_dims(idx, axis=1), R.shape([3, 5]))
                sq = R.squeeze(R.expand_dims(x, axis=[0, 3]), axis=[0])
                fl = R.flip(x, axis=1)
                tl = R.tile(s, repeats=(2, 1))
                rp = R.repeat(t, repeats=2, axis=0)
                ge = R.gather_elements(x, gi, axis=1)
                se = R.scatter_elements(x, gi, R.ones(R.shape([4, 2]), "float32"), axis=1)
                oh = R.one_hot(idx, R.prim_value(T.float32(1.0)), R.prim_value(T.float32(0.0)),
                               depth=6, axis=-1)
                ds = R.dynamic_strided_slice(x, begin, end, strides)
                R.output(s, t, t2, r, bc, sq, fl, tl, rp, ge, se, oh, ds)
            return (s, t, t2, r, bc, sq, fl, tl, rp, ge, se, oh, ds)

    return dict(mod=Mod_indexing, inputs=[
        randn(rng, 4, 6), np.array([5, 0, 2], "int64"), np.array([[3, 1], [0, 2]], "int32"),
        rng.random((4, 6)) > 0.5, rng.integers(0, 6, (4, 2)).astype("int64"),
        np.array([1, 2], "int64"), np.array([4, 6], "int64"), np.array([1, 2], "int64")])


@model("reductions", "sum/mean/max/min/prod/variance/std (axes, keepdims), cumsum, cumprod, "
       "argmax/argmin (int64), sum over int32", rtol=1e-4, atol=1e-4)
def _(rng):
    @I.ir_module
    class Mod_reductions:
        @R.function
        def main(x: R.Tensor((3, 4, 5), "float32"), i: R.Tensor((3, 4), "int32")):
            with R.dataflow():
                a = R.sum(x, axis=[1])
                b = R.mean(x, axis=[0, 2], keepdims=True)
                c = R.max(x, axis=[-1])
                d = R.min(x)
                e = R.prod(R.add(R.multiply(x, R.const(0.1, "float32")), R.const(1.0, "float32")), axis=[2])
                f = R.variance(x, axis=[1])
                g = R.std(x, axis=[2], keepdims=True)
                h = R.cumsum(x, axis=1)
                k = R.cumprod(R.add(R.multiply(x, R.const(0.1, "float32")), R.const(1.0, "float32")), axis=2)
                am = R.argmax(x, axis=2)
                an = R.argmin(x, axis=0, keepdims=True)
                si = R.sum(i, axis=[0])
                ci = R.cumsum(i, axis=1, dtype="int64")
                R.output(a, b, c, d, e, f, g, h, k, am, an, si, ci)
            return (a, b, c, d, e, f, g, h, k, am, an, si, ci)

    return dict(mod=Mod_reductions, inputs=[randn(rng, 3, 4, 5), rng.integers(-50, 50, (3, 4)).astype("int32")])


# ---------------------------------------------------------------------------------------------
# dtypes


@model("int_ops", "int32/int64 arithmetic: add, multiply, floor_divide, floor_mod, bitwise and/or/"
       "xor, shifts, maximum, comparisons to bool, astype int->float->int, uint8 input")
def _(rng):
    @I.ir_module
    class Mod_int_ops:
        @R.function
        def main(a: R.Tensor((3, 4), "int32"), b: R.Tensor((3, 4), "int32"),
                 c: R.Tensor((4,), "int64"), u: R.Tensor((3, 4), "uint8")):
            with R.dataflow():
                s = R.add(R.multiply(a, b), R.const(7, "int32"))
                fd = R.floor_divide(a, b)
                fm = R.floor_mod(a, b)
                bw = R.bitwise_xor(R.bitwise_and(a, b), R.bitwise_or(a, R.const(3, "int32")))
                sh = R.right_shift(R.left_shift(a, R.const(2, "int32")), R.const(1, "int32"))
                mx = R.maximum(R.astype(a, "int64"), c)
                lt = R.less(a, b)
                eq = R.equal(R.floor_mod(a, R.const(2, "int32")), R.const(0, "int32"))
                f = R.astype(R.divide(R.astype(a, "float32"), R.const(3.0, "float32")), "int32")
                uu = R.add(u, R.astype(R.const(200, "int32"), "uint8"))
                R.output(s, fd, fm, bw, sh, mx, lt, eq, f, uu)
            return (s, fd, fm, bw, sh, mx, lt, eq, f, uu)

    b = rng.integers(1, 9, (3, 4)).astype("int32") * np.where(rng.random((3, 4)) > 0.5, 1, -1).astype("int32")
    return dict(mod=Mod_int_ops, inputs=[rng.integers(-100, 100, (3, 4)).astype("int32"), b,
                               rng.integers(-50, 50, (4,)).astype("int64"),
                               rng.integers(0, 255, (3, 4)).astype("uint8")])


@model("fp16", "float16 matmul, add, softmax, layer_norm, astype to/from float32, float16 constant",
       rtol=2e-2, atol=2e-2)
def _(rng):
    @I.ir_module
    class Mod_fp16:
        @R.function
        def main(x: R.Tensor((4, 8), "float16"), w: R.Tensor((8, 8), "float16"),
                 g: R.Tensor((8,), "float16"), b: R.Tensor((8,), "float16")):
            with R.dataflow():
                m = R.matmul(x, w)
                a = R.add(m, R.const(np.full((8,), 0.5, "float16")))
                s = R.nn.softmax(a, axis=-1)
                ln = R.nn.layer_norm(a, g, b, axes=[-1])
                f = R.astype(ln, "float32")
                h = R.astype(R.multiply(f, R.const(2.0, "float32")), "float16")
                R.output(s, ln, f, h)
            return (s, ln, f, h)

    return dict(mod=Mod_fp16, inputs=[randn(rng, 4, 8, dtype="float16"), randn(rng, 8, 8, dtype="float16", scale=0.3),
                               randn(rng, 8, dtype="float16"), randn(rng, 8, dtype="float16")])


@model("int8_quant", "int8 x int8 matmul with int32 out_dtype, int32 bias, requantize to int8 "
       "(clip, astype), int8 weight bound as a constant, dequantize to float32")
def _(rng):
    @I.ir_module
    class Mod_int8_quant:
        @R.function
        def main(x: R.Tensor((3, 16), "int8"), w: R.Tensor((16, 4), "int8"), bias: R.Tensor((4,), "int32")):
            R.func_attr({"num_input": 1})
            with R.dataflow():
                acc = R.add(R.matmul(x, w, out_dtype="int32"), bias)
                q = R.astype(R.clip(R.right_shift(acc, R.const(4, "int32")), -128, 127), "int8")
                f = R.multiply(R.astype(q, "float32"), R.const(0.05, "float32"))
                R.output(acc, q, f)
            return (acc, q, f)

    mod = relax.transform.BindParams("main", {
        "w": tvm.runtime.tensor(rng.integers(-128, 127, (16, 4)).astype("int8")),
        "bias": tvm.runtime.tensor(rng.integers(-1000, 1000, (4,)).astype("int32"))})(Mod_int8_quant)
    return dict(mod=mod, inputs=[rng.integers(-128, 127, (3, 16)).astype("int8")])


@model("bool_logic", "bool tensors: logical_and/or/xor/not, where on bool, bool astype int, "
       "comparisons, isnan/isinf/isfinite, bool constant")
def _(rng):
    @I.ir_module
    class Mod_bool_logic:
        @R.function
        def main(a: R.Tensor((5, 3), "bool"), b: R.Tensor((5, 3), "bool"), x: R.Tensor((5, 3), "float32")):
            with R.dataflow():
                c = R.logical_and(a, b)
                d = R.logical_xor(R.logical_or(a, R.const(np.array([True, False, True]))), b)
                n = R.logical_not(c)
                w = R.where(d, a, n)
                i = R.astype(w, "int32")
                g = R.greater_equal(x, R.const(0.0, "float32"))
                nan = R.isnan(R.log(x))
                fin = R.isfinite(R.log(x))
                R.output(c, d, n, w, i, g, nan, fin)
            return (c, d, n, w, i, g, nan, fin)

    return dict(mod=Mod_bool_logic, inputs=[rng.random((5, 3)) > 0.5, rng.random((5, 3)) > 0.5, randn(rng, 5, 3)])


@model("dtype_consts", "bound constants of float64, int64, int16, uint8, bool, float16, 0-d scalar "
       "constants, 0-d tensor input and output, float64 math")
def _(rng):
    @I.ir_module
    class Mod_dtype_consts:
        @R.function
        def main(x: R.Tensor((3,), "float64"), s: R.Tensor((), "float32"),
                 c64: R.Tensor((3,), "float64"), ci: R.Tensor((3,), "int64"),
                 c16: R.Tensor((3,), "int16"), cu: R.Tensor((3,), "uint8"),
                 cb: R.Tensor((3,), "bool"), ch: R.Tensor((3,), "float16"), cs: R.Tensor((), "int32")):
            R.func_attr({"num_input": 2})
            with R.dataflow():
                a = R.multiply(R.add(x, c64), R.astype(ci, "float64"))
                b = R.add(R.astype(c16, "int32"), R.astype(cu, "int32"))
                c = R.where(cb, R.astype(ch, "float32"), R.broadcast_to(s, R.shape([3])))
                d = R.add(R.multiply(s, R.const(2.5, "float32")), R.astype(cs, "float32"))
                e = R.sum(a)
                R.output(a, b, c, d, e)
            return (a, b, c, d, e)

    consts = {"c64": np.array([1.5, -2.25, 1e-3]), "ci": np.array([3, -1, 2**40], "int64"),
              "c16": np.array([-300, 7, 32000], "int16"), "cu": np.array([0, 128, 255], "uint8"),
              "cb": np.array([True, False, True]), "ch": np.array([0.5, -1.5, 65504], "float16"),
              "cs": np.array(42, "int32")}
    mod = relax.transform.BindParams("main", {k: tvm.runtime.tensor(v) for k, v in consts.items()})(Mod_dtype_consts)
    return dict(mod=mod, inputs=[randn(rng, 3, dtype="float64"), np.array(1.25, "float32")])


@model("bf16", "bfloat16 inputs/outputs (npy files hold the raw uint16 bits), bf16 add/multiply/"
       "matmul, astype bf16<->float32, bf16 constant", rtol=2e-2, atol=2e-2)
def _(rng):
    @I.ir_module
    class Mod_bf16:
        @R.function
        def main(x: R.Tensor((4, 8), "bfloat16"), w: R.Tensor((8, 3), "bfloat16"), y: R.Tensor((4, 3), "float32")):
            with R.dataflow():
                m = R.matmul(x, w)
                a = R.add(m, R.astype(y, "bfloat16"))
                s = R.multiply(a, R.astype(R.const(0.5, "float32"), "bfloat16"))
                f = R.astype(s, "float32")
                R.output(s, f)
            return (s, f)

    return dict(mod=Mod_bf16, inputs=[randn(rng, 4, 8).astype(ml_dtypes.bfloat16),
                               randn(rng, 8, 3, scale=0.3).astype(ml_dtypes.bfloat16), randn(rng, 4, 3)])


@model("fp8", "float8_e4m3fn / float8_e5m2 tensors (npy files hold the raw uint8 bits): astype "
       "float32<->fp8, multiply in float32", rtol=1e-2, atol=1e-2)
def _(rng):
    @I.ir_module
    class Mod_fp8:
        @R.function
        def main(x: R.Tensor((6,), "float8_e4m3fn"), y: R.Tensor((6,), "float32")):
            with R.dataflow():
                a = R.multiply(R.astype(x, "float32"), y)
                q = R.astype(a, "float8_e4m3fn")
                r = R.astype(y, "float8_e5m2")
                R.output(a, q, r)
            return (a, q, r)

    return dict(mod=Mod_fp8, inputs=[randn(rng, 6).astype(ml_dtypes.float8_e4m3fn), randn(rng, 6)])


# ---------------------------------------------------------------------------------------------
# Dynamic shapes


@model("dyn_multi", "symbolic dims shared by several inputs (n, k, m), matmul, concat on a "
       "symbolic axis, output shapes from expressions (n + 2, k * m), shape return value")
def _(rng):
    @I.ir_module
    class Mod_dyn_multi:
        @R.function
        def main(a: R.Tensor(("n", "k"), "float32"), b: R.Tensor(("k", "m"), "float32"),
                 c: R.Tensor((2, "k"), "float32")):
            n = T.int64()
            k = T.int64()
            m = T.int64()
            with R.dataflow():
                mm = R.matmul(a, b)
                cat = R.concat((a, c), axis=0)  # (n + 2, k)
                flat = R.reshape(b, R.shape([k * m]))
                e = R.add(R.sum(mm, axis=[1]), R.const(1.0, "float32"))
                R.output(mm, cat, flat, e)
            return (mm, cat, flat, e, R.shape([n + 2, k * m]))

    return dict(mod=Mod_dyn_multi, inputs=[randn(rng, 3, 4), randn(rng, 4, 5), randn(rng, 2, 4)])


@model("dyn_shape_args", "R.Shape arguments, reshape to a shape argument, R.full/zeros from a "
       "shape, R.tensor_to_shape (data-dependent output shape), R.shape_of, shape return values")
def _(rng):
    @I.ir_module
    class Mod_dyn_shape_args:
        @R.function
        def main(x: R.Tensor(("n",), "float32"), s: R.Shape(["a", "b"]), t: R.Tensor((2,), "int64")):
            n = T.int64()
            a = T.int64()
            b = T.int64()
            y = R.reshape(x, R.shape([a, b]))
            z = R.full(R.shape([b, a]), R.const(3.0, "float32"), "float32")
            sh = R.tensor_to_shape(t)
            p = T.int64()
            q = T.int64()
            sh2 = R.match_cast(sh, R.Shape([p, q]))
            u = R.reshape(x, R.shape([p, q]))
            shape_of_u = R.shape_of(u)
            zz = R.zeros(R.shape([a + 1]), "int32")
            return (y, z, u, shape_of_u, zz, R.shape([a, b, n]))

    return dict(mod=Mod_dyn_shape_args, inputs=[randn(rng, 12), Shape([3, 4]), np.array([6, 2], "int64")])


@model("prim_args", "R.Prim int64/float32/bool arguments passed through and returned, R.arange to an "
       "R.Prim bound, PrimValue computed from a symbolic dim, PrimValue results (int, float, bool)")
def _(rng):
    @I.ir_module
    class Mod_prim_args:
        @R.function
        def main(x: R.Tensor(("n", 3), "float32"), k: R.Prim("int64"), f: R.Prim("float32"),
                 flag: R.Prim("bool")):
            n = T.int64()
            r = R.arange(R.prim_value(T.int64(0)), k, R.prim_value(T.int64(1)), dtype="int64")
            full = R.full(R.shape([n, 2]), R.const(2.0, "float32"), "float32")
            y = R.add(x, R.const(1.0, "float32"))
            return (r, full, y, R.prim_value(n * 3 + 1), k, f, flag)

    return dict(mod=Mod_prim_args, inputs=[randn(rng, 2, 3), Prim(4, "int64"), Prim(0.25, "float32"), Prim(True, "bool")])


@model("dyn_upper_bound", "symbolic dim with tir_var_upper_bound (static memory planning for a "
       "dynamic function), relu/exp chain, reshape with symbolic dims, different sizes per call")
def _(rng):
    @I.ir_module
    class Mod_dyn_upper_bound:
        @R.function
        def main(x: R.Tensor(("n", 4), "float32")):
            R.func_attr({"tir_var_upper_bound": {"n": 16}, "relax.force_pure": True})
            n = T.int64()
            with R.dataflow():
                a = R.nn.relu(x)
                b = R.exp(R.negative(a))
                c = R.reshape(b, R.shape([n * 2, 2]))
                d = R.add(c, c)
                R.output(d)
            return d

    return dict(mod=Mod_dyn_upper_bound, inputs=[randn(rng, 7, 4)])


@model("zero_size", "symbolic dim called with 0: empty tensors through add, sum (non-empty axis), "
       "concat, matmul with an empty output")
def _(rng):
    @I.ir_module
    class Mod_zero_size:
        @R.function
        def main(x: R.Tensor(("n", 3), "float32"), y: R.Tensor((2, 3), "float32")):
            with R.dataflow():
                a = R.add(x, R.const(1.0, "float32"))
                # No reductions over the empty axis: TVM's kernels leave their output
                # uninitialised there (the init sits inside the empty loop).
                s = R.sum(x, axis=[1])
                c = R.concat((x, y), axis=0)
                m = R.matmul(y, R.permute_dims(x))
                R.output(a, s, c, m)
            return (a, s, c, m)

    return dict(mod=Mod_zero_size, inputs=[np.zeros((0, 3), "float32"), randn(rng, 2, 3)])


# ---------------------------------------------------------------------------------------------
# Control flow, functions, closures


@model("control_flow", "if/else on an R.Prim bool and on a 0-d bool tensor, nested if, tree "
       "recursion (fib), mutual recursion (is_even/is_odd) on R.Prim int64, shape-changing branches")
def _(rng):
    @I.ir_module
    class Mod_control_flow:
        @R.function
        def fib(n: R.Prim("int64"), x: R.Tensor((2, 2), "float32")) -> R.Tensor((2, 2), "float32"):
            cls = Mod_control_flow
            if R.prim_value(n < 2):
                r = x
            else:
                a = cls.fib(R.prim_value(n - 1), x)
                b = cls.fib(R.prim_value(n - 2), x)
                r = R.add(a, b)
            return r

        @R.function
        def is_even(n: R.Prim("int64")) -> R.Prim("bool"):
            cls = Mod_control_flow
            if R.prim_value(n == 0):
                r = R.prim_value(True)
            else:
                r = cls.is_odd(R.prim_value(n - 1))
            return r

        @R.function
        def is_odd(n: R.Prim("int64")) -> R.Prim("bool"):
            cls = Mod_control_flow
            if R.prim_value(n == 0):
                r = R.prim_value(False)
            else:
                r = cls.is_even(R.prim_value(n - 1))
            return r

        @R.function
        def main(c: R.Tensor((), "bool"), n: R.Prim("int64"), x: R.Tensor((2, 2), "float32")):
            cls = Mod_control_flow
            if c:
                if R.prim_value(n > 3):
                    y = R.multiply(x, R.const(2.0, "float32"))
                else:
                    y = R.subtract(x, R.const(2.0, "float32"))
                z = R.reshape(y, R.shape([4]))
            else:
                z = R.reshape(x, R.shape([4]))
            f = cls.fib(n, x)
            e = cls.is_even(n)
            return (z, f, e)

    return dict(mod=Mod_control_flow, inputs=[np.array(True), Prim(6, "int64"), randn(rng, 2, 2)])


@model("closure", "local (nested) functions: a closure capturing a tensor (lambda-lifted to "
       "make_closure/invoke_closure), a closure passed to another function, a non-capturing local "
       "function")
def _(rng):
    @I.ir_module
    class Mod_closure:
        @R.function
        def apply_twice(f: R.Any, x: R.Tensor((3,), "float32")) -> R.Tensor((3,), "float32"):
            # After LambdaLift a closure is R.Any (make_closure), so call it explicitly.
            y = R.invoke_pure_closure(f, (x,), ty_args=R.Tensor((3,), "float32"))
            z = R.invoke_pure_closure(f, (y,), ty_args=R.Tensor((3,), "float32"))
            return z

        @R.function
        def main(x: R.Tensor((3,), "float32"), w: R.Tensor((3,), "float32")):
            cls = Mod_closure

            @R.function
            def scale(v: R.Tensor((3,), "float32")) -> R.Tensor((3,), "float32"):
                return R.multiply(v, w)

            @R.function
            def plain(v: R.Tensor((3,), "float32")) -> R.Tensor((3,), "float32"):
                return R.add(v, R.const(1.0, "float32"))

            a = scale(x)
            b = cls.apply_twice(scale, x)
            # A closure's result is R.Any after LowerRuntimeBuiltin: the v0.27 compiler refuses any
            # later use of it as a typed argument (a Relax call or a kernel: "Argument 0 type
            # mismatch ... given R.Any"), so closure results are only returned or fed to closures.
            c = plain(x)
            return (a, b, c)

    # tvm.compile's default pipeline has no LambdaLift (VMShapeLower refuses local functions).
    mod = relax.transform.LambdaLift()(Mod_closure)
    return dict(mod=mod, inputs=[randn(rng, 3), randn(rng, 3)])


@model("tuples", "R.Tuple argument (nested), tuple get-item, tuple of tuples result, empty tuple "
       "inside the result, the same tensor twice in the result")
def _(rng):
    @I.ir_module
    class Mod_tuples:
        @R.function
        def main(t: R.Tuple(R.Tensor((2,), "float32"), R.Tuple(R.Tensor((3,), "float32"), R.Tensor((), "int32"))),
                 x: R.Tensor((2,), "float32")):
            a = t[0]
            inner = t[1]
            b = inner[0]
            c = inner[1]
            s = R.add(a, x)
            return ((s, (b, c)), R.tuple(), (s, R.multiply(b, R.const(2.0, "float32"))))

    return dict(mod=Mod_tuples, inputs=[(randn(rng, 2), (randn(rng, 3), np.array(5, "int32"))), randn(rng, 2)])


@model("multi_fn", "several exported functions in one module (entries multi_fn, multi_fn__decode, "
       "multi_fn__both, multi_fn__numel, multi_fn__shape) sharing a private helper and a constant; "
       "a bare R.Prim result and a bare R.Shape result")
def _(rng):
    @I.ir_module
    class Mod_multi_fn:
        @R.function(private=True)
        def helper(x: R.Tensor((2, 4), "float32"), w: R.Tensor((4, 4), "float32")) -> R.Tensor((2, 4), "float32"):
            return R.nn.relu(R.matmul(x, w))

        @R.function
        def encode(x: R.Tensor((2, 4), "float32")):
            cls = Mod_multi_fn
            return cls.helper(x, R.const(np.eye(4, dtype="float32") * 2.0))

        @R.function
        def decode(x: R.Tensor((2, 4), "float32"), w: R.Tensor((4, 4), "float32")):
            cls = Mod_multi_fn
            return cls.helper(R.negative(x), w)

        @R.function
        def numel(x: R.Tensor(("n", "m"), "float32")) -> R.Prim("int64"):
            n = T.int64()
            m = T.int64()
            return R.prim_value(n * m)

        @R.function
        def shape(x: R.Tensor(("n", "m"), "float32")) -> R.Shape(ndim=2):
            return R.shape_of(x)

        @R.function
        def both(x: R.Tensor((2, 4), "float32"), w: R.Tensor((4, 4), "float32")):
            cls = Mod_multi_fn
            e = cls.encode(x)
            d = cls.decode(e, w)
            return (e, d)

    x, w = randn(rng, 2, 4), randn(rng, 4, 4)
    return dict(mod=Mod_multi_fn, calls=[("encode", [x]), ("decode", [x, w]), ("both", [x, w]),
                                       ("numel", [randn(rng, 3, 5)]), ("shape", [randn(rng, 3, 5)])])


@model("nn_multi_method", "nn.Module with two methods (embed: Embedding/take on int32 ids; forward: "
       "RMSNorm, silu, Linear) with a symbolic seq len, weights as arguments, entries "
       "nn_multi_method and nn_multi_method__forward", rtol=1e-4, atol=1e-4)
def _(rng):
    class LM(nn.Module):
        def __init__(self):
            self.emb = nn.Embedding(20, 8)
            self.norm = nn.RMSNorm(8, axes=-1)
            self.fc = nn.Linear(8, 20, bias=False)

        def embed(self, ids: nn.Tensor):
            return self.emb(ids)

        def forward(self, h: nn.Tensor):
            return self.fc(nn.op.silu(self.norm(h)))

    mod, params = LM().export_tvm({
        "embed": {"ids": spec.Tensor(("s",), "int32")},
        "forward": {"h": spec.Tensor((1, "s", 8), "float32")}})
    w = param_values(params, rng, scale=0.5)
    names = [n for n, _ in params]
    # Each method takes the parameters after its inputs.
    fn_params = {f: [w[names.index(p.name)] for p in mod[f].params[1:]] for f in ("embed", "forward")}
    return dict(mod=mod, calls=[("embed", [rng.integers(0, 20, (5,)).astype("int32")] + fn_params["embed"]),
                                ("forward", [randn(rng, 1, 5, 8)] + fn_params["forward"])])


@model("lift_params", "relax.transform.LiftTransformParams: main_transform_params takes a tuple "
       "of weights and returns a tuple (entry lift_params__main_transform_params), main takes the "
       "transformed weights", rtol=1e-4, atol=1e-4)
def _(rng):
    @I.ir_module
    class Mod_lift_params:
        @R.function
        def main(x: R.Tensor((2, 4), "float32"), w: R.Tensor((3, 4), "float32"), b: R.Tensor((3,), "float32")):
            R.func_attr({"num_input": 1})
            with R.dataflow():
                wt = R.permute_dims(w)
                bb = R.multiply(b, R.const(2.0, "float32"))
                y = R.add(R.matmul(x, wt), bb)
                R.output(y)
            return y

    mod = relax.transform.LiftTransformParams()(Mod_lift_params)
    w, b = randn(rng, 3, 4), randn(rng, 3)
    x = randn(rng, 2, 4)
    return dict(mod=mod, calls=[("main", [x, np.ascontiguousarray(w.T), b * 2]),
                                ("main_transform_params", [(w, b)])])


# ---------------------------------------------------------------------------------------------
# Custom TIR, packed calls, runtime builtins


@model("custom_tir", "hand-written T.prim_func kernels through R.call_tir (static, and a symbolic "
       "shape matched from the buffers), T.exp, a reduction loop (plain TIR, no blocks), two outputs of one "
       "call_tir, R.call_tir_inplace (v0.27 call_tir has no tir_vars)")
def _(rng):
    @I.ir_module
    class Mod_custom_tir:
        @T.prim_func
        def add_scale(a: T.handle, b: T.handle, out: T.handle):
            n = T.int64()
            A = T.match_buffer(a, (n,), "float32")
            B = T.match_buffer(b, (n,), "float32")
            O = T.match_buffer(out, (n,), "float32")
            for i in range(n):
                O[i] = (A[i] + B[i]) * T.float32(3) + T.exp(A[i])

        @T.prim_func
        def two_out(a: T.Buffer((4, 4), "float32"), s: T.Buffer((4,), "float32"), m: T.Buffer((4,), "float32")):
            for i in range(4):
                s[i] = T.float32(0)
                m[i] = T.float32(-1e30)
                for j in range(4):
                    s[i] = s[i] + a[i, j]
                    m[i] = T.max(m[i], a[i, j])

        @T.prim_func
        def inc_inplace(a: T.Buffer((4, 4), "float32")):
            for i, j in T.grid(4, 4):
                a[i, j] = a[i, j] + T.float32(1)

        @R.function
        def main(x: R.Tensor(("n",), "float32"), y: R.Tensor(("n",), "float32"), z: R.Tensor((4, 4), "float32")):
            cls = Mod_custom_tir
            n = T.int64()
            o = R.call_tir(cls.add_scale, (x, y), out_ty=R.Tensor((n,), "float32"))
            so = R.call_tir(cls.two_out, (z,), out_ty=[R.Tensor((4,), "float32"), R.Tensor((4,), "float32")])
            zc = R.add(z, R.const(0.0, "float32"))
            inc = R.call_tir_inplace(cls.inc_inplace, (zc,), inplace_indices=[0],
                                     out_ty=R.Tensor((4, 4), "float32"))
            return (o, so[0], so[1], inc)

    return dict(mod=Mod_custom_tir, inputs=[randn(rng, 5), randn(rng, 5), randn(rng, 4, 4)])


@model("call_packed", "R.call_packed / R.call_pure_packed of runtime builtins by name: "
       "vm.builtin.copy, vm.builtin.reshape, vm.builtin.shape_of, vm.builtin.null_value, "
       "vm.builtin.tensor_to_shape, vm.builtin.make_tuple")
def _(rng):
    @I.ir_module
    class Mod_call_packed:
        @R.function(pure=False)
        def main(x: R.Tensor((2, 6), "float32"), t: R.Tensor((3,), "int64")):
            c = R.call_packed("vm.builtin.copy", x, ty_args=R.Tensor((2, 6), "float32"))
            r = R.call_pure_packed("vm.builtin.reshape", c, R.shape([3, 4]), ty_args=R.Tensor((3, 4), "float32"))
            s = R.call_pure_packed("vm.builtin.shape_of", r, ty_args=R.Shape(ndim=2))
            nv = R.call_packed("vm.builtin.null_value", ty_args=R.Any)
            ts = R.call_pure_packed("vm.builtin.tensor_to_shape", t, ty_args=R.Shape(ndim=3))
            tup = R.call_pure_packed("vm.builtin.make_tuple", r, x, ty_args=R.Tuple(R.Tensor((3, 4), "float32"), R.Tensor((2, 6), "float32")))
            return (r, s, ts, tup)

    return dict(mod=Mod_call_packed, inputs=[randn(rng, 2, 6), np.array([1, 2, 6], "int64")])


@model("kv_cache", "nn.Module effects: nn.KVCache (vm.builtin.attention_kv_cache_create/append/"
       "view, growth past the initial capacity 2 to 6 rows), _initialize_effect called first "
       "(init), opaque cache object in the result")
def _(rng):
    class Dec(nn.Module):
        def __init__(self):
            self.k = nn.KVCache(2, [2, 4])
            self.proj = nn.Linear(4, 4)

        def forward(self, x: nn.Tensor):
            y = self.proj(x)  # (3, 2, 4)
            self.k.append(y)
            self.k.append(y * 2.0)
            v = self.k.view(6)
            return nn.op.sum(v, axis=0)

    mod, params = Dec().export_tvm({"forward": {"x": spec.Tensor((3, 2, 4), "float32")}})
    return dict(mod=mod, function="forward", inputs=[randn(rng, 3, 2, 4)] + param_values(params, rng),
                init={"function": "_initialize_effect", "insert_at": 1})


@model("nn_debug_print", "nn.Module export_tvm(debug=True): an IO effect (R.null_value) from "
       "_initialize_effect, nn.op.print_ -> vm.builtin.invoke_debug_func calling "
       "vm.builtin.debug_print (a global registered by tvm.runtime.vm's Python)")
def _(rng):
    class Dbg(nn.Module):
        def __init__(self):
            self.fc = nn.Linear(4, 2)

        def forward(self, x: nn.Tensor):
            y = self.fc(x)
            nn.op.print_(nn.op.sum(y))
            return nn.op.relu(y)

    mod, params = Dbg().export_tvm({"forward": {"x": spec.Tensor((3, 4), "float32")}}, debug=True)
    return dict(mod=mod, function="forward", inputs=[randn(rng, 3, 4)] + param_values(params, rng),
                init={"function": "_initialize_effect", "insert_at": 1})


@model("tir_parallel", "hand-written TIR with T.parallel (TVMBackendParallelLaunch), "
       "T.vectorized, a 64 KiB scratch buffer (TVMBackendAllocWorkspace/FreeWorkspace), "
       "on a symbolic row count")
def _(rng):
    @I.ir_module
    class Mod_tir_parallel:
        @T.prim_func
        def rowwise(a: T.handle, out: T.handle):
            n = T.int64()
            A = T.match_buffer(a, (n, 64), "float32")
            O = T.match_buffer(out, (n, 64), "float32")
            for i in T.parallel(n):
                tmp = T.decl_buffer((64, 256), "float32")
                for j in range(64):
                    for k in T.vectorized(256):
                        tmp[j, k] = A[i, j] * T.Cast("float32", k)
                for j in range(64):
                    O[i, j] = T.float32(0)
                    for k in range(256):
                        O[i, j] = O[i, j] + tmp[j, k] * T.float32(0.001)

        @R.function
        def main(x: R.Tensor(("n", 64), "float32")):
            cls = Mod_tir_parallel
            n = T.int64()
            y = R.call_tir(cls.rowwise, (x,), out_ty=R.Tensor((n, 64), "float32"))
            return y

    return dict(mod=Mod_tir_parallel, inputs=[randn(rng, 9, 64)])


@model("wide_args", "a function of 70 tensor arguments (more than any small register window) "
       "plus a 256x256 float32 (256 KiB) bound constant", rtol=1e-4, atol=1e-4)
def _(rng):
    bb = relax.BlockBuilder()
    xs = [relax.Var(f"x{i}", relax.TensorType((4, 256), "float32")) for i in range(70)]
    big = relax.const(randn(rng, 256, 256, scale=0.05))
    with bb.function("main", xs):
        with bb.dataflow():
            acc = xs[0]
            for i, x in enumerate(xs[1:]):
                acc = bb.emit(relax.op.add(acc, relax.op.multiply(x, relax.const(float(i % 7), "float32"))))
            out = bb.emit_output(relax.op.matmul(acc, big))
        bb.emit_func_output(out)
    return dict(mod=bb.get(), inputs=[randn(rng, 4, 256) for _ in range(70)])


@model("sampling", "nn.op.multinomial_from_uniform and sample_top_p_top_k_from_sorted_prob "
       "(LLM sampling ops as the CPU pipeline lowers them), int64 index outputs")
def _(rng):
    class Sampler(nn.Module):
        def forward(self, prob: nn.Tensor, sorted_prob: nn.Tensor, sorted_idx: nn.Tensor,
                    top_p: nn.Tensor, top_k: nn.Tensor, u: nn.Tensor, idx: nn.Tensor):
            # renormalize_top_p_top_k_prob is in the `refused_renormalize` model: v0.27 emits
            # invalid LLVM for it on CPU.
            m = nn.op.multinomial_from_uniform(prob, u, idx)
            s = nn.op.sample_top_p_top_k_from_sorted_prob(sorted_prob, sorted_idx, top_p, top_k, u, idx)
            return m, s

    mod, _ = Sampler().export_tvm({"forward": {
        "prob": spec.Tensor((2, 6), "float32"), "sorted_prob": spec.Tensor((2, 6), "float32"),
        "sorted_idx": spec.Tensor((2, 6), "int64"), "top_p": spec.Tensor((2, 1), "float32"),
        "top_k": spec.Tensor((2, 1), "int64"), "u": spec.Tensor((2, 1), "float32"),
        "idx": spec.Tensor((2, 1), "int64")}})
    logits = randn(rng, 2, 6)
    prob = (np.exp(logits) / np.exp(logits).sum(-1, keepdims=True)).astype("float32")
    order = np.argsort(-prob, axis=-1)
    sp = np.take_along_axis(prob, order, -1).astype("float32")
    return dict(mod=mod, function="forward", inputs=[
        prob, sp, order.astype("int64"), np.array([[0.9], [0.5]], "float32"),
        np.array([[3], [6]], "int64"), np.array([[0.3], [0.8]], "float32"), np.array([[0], [1]], "int64")])


@model("print_assert", "R.print and R.assert_op (compiler-only relax.run.print / relax.run.assert_op)",
       needs_full_runtime=True, needs_compiler_python=True)
def _(rng):
    @I.ir_module
    class Mod_print_assert:
        @R.function(pure=False)
        def main(x: R.Tensor((3,), "float32")):
            y = R.add(x, R.const(1.0, "float32"))
            R.print(y, format="zoo print_assert y={}")
            R.assert_op(R.const(True), format="never fails")
            return y

    return dict(mod=Mod_print_assert, inputs=[randn(rng, 3)])


@model("sort_topk", "sort, argsort (descending, int64/int32), topk (values+indices, both/largest/"
       "smallest), on float32 and int32: kernels call tvm.contrib.sort.* (libtvm_runtime_extra)",
       needs_full_runtime=True)
def _(rng):
    @I.ir_module
    class Mod_sort_topk:
        @R.function
        def main(x: R.Tensor((3, 8), "float32"), i: R.Tensor((4, 5), "int32")):
            with R.dataflow():
                s = R.sort(x, axis=1, descending=True)
                a = R.argsort(x, axis=0, descending=False, dtype="int64")
                tk = R.topk(x, k=3, axis=-1, ret_type="both", largest=True, dtype="int64")
                tv = R.topk(i, k=2, axis=0, ret_type="values", largest=False)
                si = R.sort(i, axis=-1)
                ai = R.argsort(i, axis=-1, dtype="int32")
                R.output(s, a, tk, tv, si, ai)
            return (s, a, tk, tv, si, ai)

    x = rng.permutation(24).astype("float32").reshape(3, 8) * 0.5
    i = rng.permutation(20).astype("int32").reshape(4, 5)
    return dict(mod=Mod_sort_topk, inputs=[x, i])


@model("unique_nonzero", "data-dependent output shapes through compiler-only builtins "
       "(R.unique -> relax.run.unique, R.nonzero -> relax.run.nonzero)", needs_full_runtime=True,
       needs_compiler_python=True)
def _(rng):
    @I.ir_module
    class Mod_unique_nonzero:
        @R.function
        def main(x: R.Tensor((8,), "int32")):
            u = R.unique(x, sorted=True, return_inverse=False, return_counts=False)
            nz = R.nonzero(x)
            return (u, nz)

    return dict(mod=Mod_unique_nonzero, inputs=[np.array([3, 0, 1, 3, 0, 7, 1, 3], "int32")])


@model("shape_to_tensor", "R.shape_to_tensor of a symbolic shape expression (legalized to a TIR "
       "kernel taking the dims as scalar arguments), int64 tensor result")
def _(rng):
    @I.ir_module
    class Mod_shape_to_tensor:
        @R.function
        def main(x: R.Tensor(("n", "m"), "float32")):
            n = T.int64()
            m = T.int64()
            t = R.shape_to_tensor(R.shape([n, m, n * m]))
            return t

    return dict(mod=Mod_shape_to_tensor, inputs=[randn(rng, 3, 5)])


# ---------------------------------------------------------------------------------------------
# exec_mode="compiled" (VM functions compiled to TIR; needs TVMBackendAnyList* from the runtime)


@model("compiled_mlp", "exec_mode='compiled': an MLP with bound weights; the VM function is "
       "compiled to TIR (__vmtir__main) calling TVMBackendAnyList*", exec_mode="compiled",
       rtol=1e-5, atol=1e-5)
def _(rng):
    class MLP(nn.Module):
        def __init__(self):
            self.a = nn.Linear(8, 16)
            self.b = nn.Linear(16, 4)

        def forward(self, x):
            return nn.op.softmax(self.b(nn.op.relu(self.a(x))), axis=-1)

    mod, params = MLP().export_tvm({"forward": {"x": spec.Tensor((2, 8), "float32")}})
    mod = bind_all(mod, "forward", params, rng)
    return dict(mod=mod, function="forward", inputs=[randn(rng, 2, 8)])


@model("compiled_dyn", "exec_mode='compiled' with a symbolic dim, an if/else on a 0-d bool tensor "
       "and a tuple result", exec_mode="compiled")
def _(rng):
    @I.ir_module
    class Mod_compiled_dyn:
        @R.function
        def main(c: R.Tensor((), "bool"), x: R.Tensor(("n", 3), "float32")):
            n = T.int64()
            if c:
                y = R.add(x, x)
            else:
                y = R.multiply(x, x)
            s = R.sum(y, axis=[0])
            return (y, (s, R.shape([n])))

    return dict(mod=Mod_compiled_dyn, inputs=[np.array(False), randn(rng, 5, 3)])


# ---------------------------------------------------------------------------------------------
# Models the v0.27 compiler refuses (kept so that `skipped` in the manifest records why; if a
# later wheel accepts one, it simply becomes a model)


@model("refused_renormalize", "nn.op.renormalize_top_p_top_k_prob (v0.27: LLVM module "
       "verification fails, fcmp on i1)")
def _(rng):
    class Renorm(nn.Module):
        def forward(self, prob: nn.Tensor, sorted_prob: nn.Tensor, top_p: nn.Tensor, top_k: nn.Tensor):
            return nn.op.renormalize_top_p_top_k_prob(prob, sorted_prob, top_p, top_k)

    mod, _ = Renorm().export_tvm({"forward": {
        "prob": spec.Tensor((2, 6), "float32"), "sorted_prob": spec.Tensor((2, 6), "float32"),
        "top_p": spec.Tensor((2, 1), "float32"), "top_k": spec.Tensor((2, 1), "int64")}})
    p = np.full((2, 6), 1 / 6, "float32")
    return dict(mod=mod, function="forward", inputs=[p, p, np.array([[0.9], [0.5]], "float32"),
                                                     np.array([[3], [6]], "int64")])


@model("refused_closure_result", "a closure's result used by an op (v0.27: invoke_closure is R.Any "
       "after LowerRuntimeBuiltin, 'Argument 0 type mismatch')")
def _(rng):
    @I.ir_module
    class Mod_refused_closure_result:
        @R.function
        def main(x: R.Tensor((3,), "float32"), w: R.Tensor((3,), "float32")):
            @R.function
            def scale(v: R.Tensor((3,), "float32")) -> R.Tensor((3,), "float32"):
                return R.multiply(v, w)

            a = scale(x)
            return R.add(a, x)

    return dict(mod=relax.transform.LambdaLift()(Mod_refused_closure_result), inputs=[randn(rng, 3), randn(rng, 3)])


@model("refused_closure_no_lift", "a local function compiled without LambdaLift (v0.27: "
       "'VMShapeLower do not work for local functions')")
def _(rng):
    @I.ir_module
    class Mod_refused_closure_no_lift:
        @R.function
        def main(x: R.Tensor((3,), "float32"), w: R.Tensor((3,), "float32")):
            @R.function
            def scale(v: R.Tensor((3,), "float32")) -> R.Tensor((3,), "float32"):
                return R.multiply(v, w)

            return scale(x)

    return dict(mod=Mod_refused_closure_no_lift, inputs=[randn(rng, 3), randn(rng, 3)])


@model("refused_reshape_shape_var", "R.reshape to an R.Shape argument itself (v0.27: the reshape "
       "legalizer asserts a ShapeExpr)")
def _(rng):
    @I.ir_module
    class Mod_refused_reshape_shape_var:
        @R.function
        def main(x: R.Tensor((12,), "float32"), s: R.Shape(["a", "b"])):
            return R.reshape(x, s)

    return dict(mod=Mod_refused_reshape_shape_var, inputs=[randn(rng, 12), Shape([3, 4])])


# ---------------------------------------------------------------------------------------------
# driver


def npy_safe(a):
    """ml_dtypes arrays (bfloat16, float8_*) are saved as their raw unsigned-int bits."""
    if a.dtype.name in ("bfloat16",) or a.dtype.name.startswith("float8"):
        return a.view(f"uint{a.dtype.itemsize * 8}")
    return a


def flatten_inputs(values, files, specs):
    for v in values:
        if isinstance(v, tuple):
            items = []
            flatten_inputs(v, files, items)
            specs.append({"kind": "tuple", "items": items})
        elif isinstance(v, Prim):
            files.append(np.array(v.value, dtype=v.dtype))
            specs.append({"kind": "prim", "shape": [], "dtype": v.dtype})
        elif isinstance(v, Shape):
            files.append(np.array(v.dims, dtype="int64"))
            specs.append({"kind": "shape", "shape": [len(v.dims)], "dtype": "int64"})
        else:
            files.append(v)
            specs.append({"shape": list(v.shape), "dtype": str(v.dtype)})


def to_tvm(values):
    out = []
    for v in values:
        if isinstance(v, tuple):
            out.append(tuple(to_tvm(v)))
        elif isinstance(v, Prim):
            out.append(v.value)
        elif isinstance(v, Shape):
            out.append(tvm.runtime.ShapeTuple(v.dims))
        else:
            out.append(tvm.runtime.tensor(v))
    return out


def flatten_result(value, files, specs):
    """Returns the tree of leaf indices."""
    if type(value).__name__ not in ("Shape", "ShapeTuple") and (
        isinstance(value, (list, tuple)) or type(value).__name__ == "Array"):
        return [flatten_result(v, files, specs) for v in value]
    k = len(specs)
    if isinstance(value, tvm.runtime.Tensor):
        a = value.numpy()
        files.append(a)
        specs.append({"shape": list(a.shape), "dtype": str(a.dtype)})
    elif type(value).__name__ in ("Shape", "ShapeTuple"):
        a = np.array(list(value), dtype="int64")
        files.append(a)
        specs.append({"kind": "shape", "shape": [len(a)], "dtype": "int64"})
    elif isinstance(value, (bool, int, float)):
        dt = "bool" if isinstance(value, bool) else "int64" if isinstance(value, int) else "float64"
        files.append(np.array(value, dtype=dt))
        specs.append({"kind": "prim", "shape": [], "dtype": dt})
    else:
        files.append(None)
        specs.append({"kind": "object", "type": type(value).__name__})
    return k


def make(name, info, out_dir):
    rng = rng_for(name)
    built = info["build"](rng)
    mod = built["mod"]
    kwargs = {}
    if "pipeline" in built:
        kwargs["relax_pipeline"] = built["pipeline"]
    if info["exec_mode"] == "compiled":
        ex = relax.build(mod, target=TARGET, exec_mode="compiled", **kwargs)
    else:
        ex = tvm.compile(mod, target=TARGET, **kwargs)
    so = f"{name}.so"
    ex.export_library(os.path.join(out_dir, so))
    loaded = tvm.runtime.load_module(os.path.join(out_dir, so))
    calls = built.get("calls") or [(built.get("function", "main"), built["inputs"])]
    entries = {}
    for idx, (func, inputs) in enumerate(calls):
        entry = name if idx == 0 else f"{name}__{func}"
        vm = VirtualMachine(loaded, tvm.cpu())
        args = to_tvm(inputs)
        init = built.get("init")
        if init:
            state = vm[init["function"]]()
            state = list(state) if type(state).__name__ == "Array" or isinstance(state, (list, tuple)) else [state]
            args = args[: init["insert_at"]] + state + args[init["insert_at"]:]
        result = vm[func](*args)
        in_files, in_specs = [], []
        flatten_inputs(inputs, in_files, in_specs)
        out_files, out_specs = [], []
        tree = flatten_result(result, out_files, out_specs)
        for k, a in enumerate(in_files):
            np.save(os.path.join(out_dir, f"{entry}.in.{k}.npy"), npy_safe(a))
        for k, a in enumerate(out_files):
            if a is not None:
                np.save(os.path.join(out_dir, f"{entry}.out.{k}.npy"), npy_safe(a))
        e = {"file": so, "function": func, "inputs": in_specs, "outputs": out_specs,
             "out_tree": tree, "rtol": info["rtol"], "atol": info["atol"], "covers": info["covers"]}
        if init:
            e["init"] = init
        if info["needs_full_runtime"]:
            e["needs_full_runtime"] = True
        if info["needs_compiler_python"]:
            e["needs_compiler_python"] = True
        if info["exec_mode"] != "bytecode":
            e["exec_mode"] = info["exec_mode"]
        entries[entry] = e
    return entries


def main():
    out_dir = sys.argv[1]
    only = sys.argv[2:]
    os.makedirs(out_dir, exist_ok=True)
    manifest = {"tvm": tvm.__version__, "models": {}, "skipped": {}}
    path = os.path.join(out_dir, "manifest.json")
    if only and os.path.isfile(path):  # remake some models of an existing zoo
        with open(path) as f:
            manifest = json.load(f)
    unknown = [n for n in only if n not in MODELS]
    if unknown:
        sys.exit(f"unknown models {unknown}; known: {list(MODELS)}")
    for name, info in MODELS.items():
        if only and name not in only:
            continue
        for old in [e for e in manifest["models"] if e == name or e.startswith(name + "__")]:
            del manifest["models"][old]
        manifest["skipped"].pop(name, None)
        try:
            entries = make(name, info, out_dir)
            manifest["models"].update(entries)
            print(f"ok    {name}: {', '.join(entries)}", flush=True)
        except Exception as e:  # the compiler refused it: record why
            msg = f"{type(e).__name__}: {e}".strip()
            where = traceback.extract_tb(e.__traceback__)[-1]
            if msg.endswith(":"):  # a bare assert
                msg += f" (at {where.filename}:{where.lineno}: {where.line})"
            lines = [l.strip() for l in msg.splitlines() if l.strip()]
            short = next((l for l in lines if "Error:" in l or "error:" in l), lines[-1])
            manifest["skipped"][name] = {"covers": info["covers"], "error": short, "detail": msg[-3000:]}
            print(f"SKIP  {name}: {short[:300]}", flush=True)
            if os.environ.get("ZOO_TRACE"):
                traceback.print_exc()
    with open(path, "w") as f:
        json.dump(manifest, f, indent=1)
    print(f"{len(manifest['models'])} entries, {len(manifest['skipped'])} skipped -> {out_dir}")


if __name__ == "__main__":
    main()
