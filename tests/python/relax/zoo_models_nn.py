"""The zoo's models of nn.Module and Relax operator coverage: CNN- and transformer-style models,
tensor manipulation, dtypes, dynamic shapes (registered into zoo_common.MODELS by `@model`)."""

import ml_dtypes
import numpy as np
import tvm
import tvm.relax.frontend.nn as nn
from tvm import relax
from tvm.relax.frontend.nn import spec
from tvm.script import ir as I
from tvm.script import relax as R
from tvm.script import tirx as T

from zoo_common import TARGET, Prim, Shape, model, randn, bind_all, param_values


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
