"""The zoo's models of control flow, custom TIR, packed calls and runtime builtins, VM-TIR
(exec_mode="compiled") and what the v0.27 compiler refuses (registered into zoo_common.MODELS
by `@model`)."""

import numpy as np
import tvm
import tvm.relax.frontend.nn as nn
from tvm import relax
from tvm.relax.frontend.nn import spec
from tvm.script import ir as I
from tvm.script import relax as R
from tvm.script import tirx as T

from zoo_common import Prim, Shape, model, randn, bind_all, param_values


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
