"""A Llama-style decoder in `tvm.relax.frontend.nn`, in the shape MLC-LLM gives its model
libraries (the functions `embed`, `prefill`, `decode`, `batch_prefill`, `batch_decode`,
`create_tir_paged_kv_cache`, attention through the paged KV cache with RoPE applied by the
cache), used by make_llm_models.py and benches/llm_bench.py. Needs the full TVM wheel.
"""

import json
import os

import numpy as np
import tvm
from tvm import relax, tirx
from tvm.relax.frontend import nn
from tvm.relax.frontend.nn import op
from tvm.relax.frontend.nn.llm import kv_cache as K
from tvm.relax.frontend.nn.llm.kv_cache import AttnKind, PagedKVCache, RopeMode, TIRPagedKVCache


class CpuPagedKVCache(PagedKVCache):
    """TIRPagedKVCache's `llvm` kernels at a page size other than the 16 its kernels assume:
    the same arguments of `vm.builtin.paged_attention_kv_cache_create`, the page kernels made
    for `page_size`."""

    def __init__(self, c, page, max_batch_size, max_total_seq_len, prefill_chunk_size, page_size, support_sliding_window):
        bb = relax.BlockBuilder.current()
        kv, h, d, dt, rs = c.kv_heads, c.heads, c.head_dim, c.dtype, {}
        kinds = [int(getattr(AttnKind, k.upper())) for k in (c.layer_kinds or ["mha"] * c.layers)]

        def fn(prim, name):
            return relax.Tuple([tvm.ir.StringImm("tirx"), bb.add_func(prim, name)])

        args = [
            relax.ShapeExpr([max_batch_size, max_total_seq_len, prefill_chunk_size, page_size, support_sliding_window, c.layer_window]),
            relax.ShapeExpr([0, c.layers]), relax.prim_value(h), relax.prim_value(kv), relax.prim_value(d), relax.prim_value(d),
            relax.ShapeExpr(kinds), relax.prim_value(False), relax.prim_value(int(RopeMode.NORMAL)), relax.prim_value(1),
            relax.prim_value(c.theta), relax.prim_value(0), relax.op.zeros((), dt),
            bb.add_func(K._kv_cache_transpose_append(kv, d, dt, page_size=page), "kv_cache_transpose_append"),
            bb.add_func(K._kv_cache_transpose_append_mla(d, dt), "kv_cache_transpose_append_mla"),
            fn(K._attention_prefill_ragged_cpu(kv, h, d, d, dt, rs), "tir_attention_prefill_ragged_cpu"),
            fn(K._attention_prefill_cpu(kv, h, d, dt, False, rs, page_size=page), "tir_attention_prefill_cpu"),
            fn(K._attention_decode_cpu(kv, h, d, dt, False, rs, page_size=page), "tir_attention_decode_cpu"),
            fn(K._attention_prefill_cpu(kv, h, d, dt, True, rs, sliding_window_size=c.layer_window, page_size=page),
               "tir_attention_prefill_cpu_sliding_window"),
            fn(K._attention_decode_cpu(kv, h, d, dt, True, rs, page_size=page), "tir_attention_decode_cpu_sliding_window"),
            fn(K.tree_attn_cpu(kv, h, d, dt, rs), "tir_attention_prefill_with_tree_mask_cpu"),
            fn(K.tree_attn_with_paged_kv_cache_cpu(kv, h, d, dt, rs), "tir_attention_prefill_with_tree_mask_with_paged_kv_cache_cpu"),
            relax.Tuple([]),
            relax.Tuple([bb.add_func(K._merge_state_inplace_cpu(dt), "tir_attention_merge_state_cpu")]),
            bb.add_func(K.llama_rope_with_position_map(c.theta, 1, d, h, kv, dt, rs, d), "tir_split_rotary"),
            bb.add_func(K._copy_single_page_cpu(kv, page, d, dt), "kv_cache_copy_single_page_cpu"),
            bb.add_func(K._kv_cache_debug_get_kv(c.layers, kv, d, dt), "kv_cache_debug_get_kv"),
            bb.add_func(K._compact_kv_copy_cpu(kv, d, dt, page_size=page), "kv_cache_compact_kv_copy_cpu"),
        ]
        super().__init__(_expr=relax.call_pure_packed("vm.builtin.paged_attention_kv_cache_create", *args,
                                                      ty_args=relax.AnyType()), _name="paged_kv_cache")


class Cfg:
    def __init__(self, name, hidden=64, layers=2, heads=4, kv_heads=2, head_dim=16, ffn=128, vocab=256, tie=False,
                 theta=10000.0, dtype="float32", layer_kinds=None, layer_window=1024, page_size=16, target="llvm"):
        self.__dict__.update(locals())
        del self.__dict__["self"]


def make_target(t):
    """`llvm`, or `cuda:ARCH` (CUDA with an LLVM host)."""
    if t.startswith("cuda:"):
        return tvm.target.Target({"kind": "cuda", "arch": t.split(":", 1)[1]}, host="llvm")
    return tvm.target.Target(t)


class Attention(nn.Module):
    def __init__(self, c):
        self.c = c
        self.qkv_proj = nn.Linear(c.hidden, (c.heads + 2 * c.kv_heads) * c.head_dim, bias=False, dtype=c.dtype)
        self.o_proj = nn.Linear(c.heads * c.head_dim, c.hidden, bias=False, dtype=c.dtype)

    def forward(self, x, cache: PagedKVCache, layer_id: int):
        c = self.c
        b, s, _ = x.shape
        qkv = op.reshape(self.qkv_proj(x), (b, s, c.heads + 2 * c.kv_heads, c.head_dim))
        out = cache.attention_with_fused_qkv(layer_id, qkv, c.heads, sm_scale=c.head_dim**-0.5)
        return self.o_proj(op.reshape(out, (b, s, c.heads * c.head_dim)))


class Layer(nn.Module):
    def __init__(self, c):
        self.attn = Attention(c)
        self.gate_up = nn.Linear(c.hidden, 2 * c.ffn, bias=False, dtype=c.dtype)
        self.down = nn.Linear(c.ffn, c.hidden, bias=False, dtype=c.dtype)
        self.norm1 = nn.RMSNorm(c.hidden, -1, 1e-5, bias=False, dtype=c.dtype)
        self.norm2 = nn.RMSNorm(c.hidden, -1, 1e-5, bias=False, dtype=c.dtype)

    def forward(self, x, cache, layer_id):
        x = x + self.attn(self.norm1(x), cache, layer_id)
        gate, up = op.split(self.gate_up(self.norm2(x)), 2, axis=-1)
        return x + self.down(op.silu(gate) * up)


class Model(nn.Module):
    def __init__(self, c):
        self.c = c
        self.embed_tokens = nn.Embedding(c.vocab, c.hidden, dtype=c.dtype)
        self.layers = nn.ModuleList([Layer(c) for _ in range(c.layers)])
        self.norm = nn.RMSNorm(c.hidden, -1, 1e-5, bias=False, dtype=c.dtype)
        if not c.tie:
            self.lm_head = nn.Linear(c.hidden, c.vocab, bias=False, dtype=c.dtype)

    def _logits(self, h):
        h = self.norm(h)
        if self.c.tie:
            logits = op.matmul(h, op.permute_dims(self.embed_tokens.weight))
        else:
            logits = self.lm_head(h)
        return logits.astype("float32") if self.c.dtype != "float32" else logits

    def _body(self, x, cache):
        for i, layer in enumerate(self.layers):
            x = layer(x, cache, i)
        return x

    def embed(self, input_ids: nn.Tensor):
        return self.embed_tokens(input_ids)

    def prefill(self, input_embed: nn.Tensor, cache: PagedKVCache):
        h = self._body(input_embed, cache)
        b, s, d = h.shape
        last = op.take(h, op.reshape(op.arange(s - 1, s, dtype="int32"), (1,)), axis=1)
        return self._logits(last), cache

    def decode(self, input_embed: nn.Tensor, cache: PagedKVCache):
        return self._logits(self._body(input_embed, cache)), cache

    def batch_prefill(self, input_embeds: nn.Tensor, logit_positions: nn.Tensor, cache: PagedKVCache):
        h = self._body(input_embeds, cache)
        return self._logits(op.take(h, logit_positions, axis=1)), cache

    def batch_decode(self, input_embeds: nn.Tensor, cache: PagedKVCache):
        return self._logits(self._body(input_embeds, cache)), cache

    def create_tir_paged_kv_cache(self, max_batch_size: tirx.Var, max_total_seq_len: tirx.Var,
                                  prefill_chunk_size: tirx.Var, page_size: tirx.Var, support_sliding_window: tirx.Var):
        c = self.c
        if c.page_size != 16:
            return CpuPagedKVCache(c, c.page_size, max_batch_size, max_total_seq_len, prefill_chunk_size, page_size,
                                   support_sliding_window)
        return TIRPagedKVCache(
            attn_kind=c.layer_kinds or "mha", max_batch_size=max_batch_size, max_total_seq_len=max_total_seq_len,
            prefill_chunk_size=prefill_chunk_size, page_size=page_size, support_sliding_window=support_sliding_window,
            layer_partition=relax.ShapeExpr([0, c.layers]), num_hidden_layers=c.layers, num_attention_heads=c.heads,
            num_key_value_heads=c.kv_heads, qk_head_dim=c.head_dim, v_head_dim=c.head_dim, mla_original_qk_head_dim=0,
            mla_original_v_head_dim=0, rope_mode=RopeMode.NORMAL, rope_scale=1, rope_theta=c.theta, rope_scaling={},
            rope_ext_factors=relax.prim_value(0), rotary_dim=c.head_dim, enable_disaggregation=False, dtype=c.dtype,
            target=make_target(c.target), layer_sliding_window_size=c.layer_window,
        )


def spec(c):
    h, dt = c.hidden, c.dtype
    none = {"param_mode": "packed", "effect_mode": "none"}
    return {
        "embed": {"input_ids": nn.spec.Tensor(["n"], "int32"), "$": none},
        "prefill": {"input_embed": nn.spec.Tensor([1, "n", h], dt), "cache": nn.spec.Object(object_type=PagedKVCache), "$": none},
        "decode": {"input_embed": nn.spec.Tensor([1, 1, h], dt), "cache": nn.spec.Object(object_type=PagedKVCache), "$": none},
        "batch_prefill": {"input_embeds": nn.spec.Tensor([1, "n", h], dt), "logit_positions": nn.spec.Tensor(["b"], "int32"),
                          "cache": nn.spec.Object(object_type=PagedKVCache), "$": none},
        "batch_decode": {"input_embeds": nn.spec.Tensor(["b", 1, h], dt), "cache": nn.spec.Object(object_type=PagedKVCache), "$": none},
        "create_tir_paged_kv_cache": {"max_batch_size": int, "max_total_seq_len": int, "prefill_chunk_size": int,
                                      "page_size": int, "support_sliding_window": int,
                                      "$": {"param_mode": "none", "effect_mode": "none"}},
    }


def build(c, out_dir, seed=0):
    """Compiles the model for llvm into OUT/lib.so and writes random weights as a tensor cache
    (OUT/params) and OUT/config.json."""
    from tvm.contrib import tvmjs

    os.makedirs(out_dir, exist_ok=True)
    model = Model(c)
    mod, named = model.export_tvm(spec=spec(c))
    target = make_target(c.target)
    ex = tvm.compile(mod, target=target, relax_pipeline=relax.get_default_pipeline(target))
    ex.export_library(os.path.join(out_dir, "lib.so"))
    rng = np.random.default_rng(seed)
    params = {}
    for name, p in named:
        shape = [int(x) for x in p.shape]
        scale = 1.0 if name.endswith("norm1.weight") or name.endswith("norm2.weight") or name == "norm.weight" else shape[-1] ** -0.5
        v = rng.standard_normal(shape).astype("float32") * scale
        if "norm" in name:
            v = 1.0 + 0.1 * rng.standard_normal(shape).astype("float32")
        params[name] = v.astype(c.dtype)
    tvmjs.dump_tensor_cache(params, os.path.join(out_dir, "params"), encode_format="raw", show_progress=False)
    cfg = {k: v for k, v in c.__dict__.items()}
    cfg["param_names"] = [n for n, _ in named]
    with open(os.path.join(out_dir, "config.json"), "w") as f:
        json.dump(cfg, f, indent=1)
