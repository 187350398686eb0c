"""The paged KV cache with kernels other than TIR's, through stand-ins written here in numpy:

- FlashInfer (`["flashinfer", run, plan]`): TVM's calling convention (attn_backend.h, TVM main):
  the plan functions are called at the first attention call of each forward with the host page
  tables, KV lengths, head counts and workspaces, their result reaches every run, and the runs
  get the K/V halves of the pages as strided views and the index arrays at byte offset 0. The
  stand-ins compute paged and ragged attention (base-2 LSE, as FlashInfer's and TVM's merge
  kernels use), so the cache's outputs are checked against plain attention in numpy over
  prefills, batch decodes (the decode plan: a GQA group below 4) and a fork.
- MLA (`attn_kind` 1): `append_mla_kv`, `self_attention`, `cross_attention` and
  `merge_attn_output_inplace` reach MLA stand-ins with TVM's arguments, and `debug_get_kv_mla`
  gives back what was appended.

The non-attention kernels (RoPE split, append, page copy, merge, debug) are TVM's TIR ones from
make_kv_kernels.py (RELAX_KV_KERNELS). TVM_REFERENCE=1 runs the same on TVM's runtime.
"""

import os
import pathlib

import numpy as np
import pytest
import tvm
import tvm_ffi
from tvm_ffi import Shape

KERNELS = os.environ.get("RELAX_KV_KERNELS")
SMALL = "kv_64_float32_w1024_q8k4.so"
if not KERNELS or not (pathlib.Path(KERNELS) / SMALL).is_file():
    if os.environ.get("CI") == "true":
        raise RuntimeError(f"RELAX_KV_KERNELS is not set or has no {SMALL} (CI=true)")
    pytest.skip("RELAX_KV_KERNELS is not set (a folder made by make_kv_kernels.py)", allow_module_level=True)

QO, KV, D, PAGE, LAYERS = 8, 4, 64, 16, 4
DEV = tvm.cpu()
G = {n: tvm.get_global_func("vm.builtin." + n) for n in [
    "kv_state_add_sequence", "kv_state_fork_sequence", "kv_state_begin_forward", "kv_state_end_forward",
    "attention_kv_cache_attention_with_fused_qkv", "attention_kv_cache_debug_get_kv", "paged_attention_kv_cache_create",
    "attention_kv_cache_append_mla_kv", "attention_kv_cache_self_attention", "attention_kv_cache_cross_attention",
    "attention_kv_cache_merge_attn_output_inplace", "attention_kv_cache_debug_get_kv_mla",
]}


def arr(t):
    """A numpy view of a tensor (strided views included)."""
    return np.from_dlpack(t)


def attend(q, k, v, causal, sm_scale):
    """q (n, QO, D), k/v (L, KV, D): (out, base-2 LSE)."""
    k = np.repeat(k, q.shape[1] // k.shape[1], axis=1)
    v = np.repeat(v, q.shape[1] // v.shape[1], axis=1)
    s = np.einsum("nhd,lhd->hnl", q.astype("float64"), k.astype("float64")) * sm_scale
    if causal:
        n, length = q.shape[0], k.shape[0]
        s = np.where(np.tril(np.ones((n, length), bool), k=length - n)[None], s, -np.inf)
    m = s.max(axis=-1, keepdims=True)
    p = np.exp(s - m)
    out = np.einsum("hnl,lhd->nhd", p / p.sum(-1, keepdims=True), v)
    lse = (np.log(p.sum(-1)) + m[..., 0]) / np.log(2)
    return out.astype("float32"), lse.T.astype("float32")


def gather(k_pages, v_pages, pages, last):
    k = np.concatenate([k_pages[p].transpose(1, 0, 2) for p in pages])  # (tokens, KV, D)
    v = np.concatenate([v_pages[p].transpose(1, 0, 2) for p in pages])
    n = (len(pages) - 1) * PAGE + last
    return k[:n], v[:n]


class FlashInferStandIn:
    """Plans and runs with FlashInfer's signatures; records the calls."""

    def __init__(self):
        self.plans, self.runs = [], []

    def plan_prefill(self, fws, iws, pws, qo_indptr, page_indptr, kv_len, total_qo, batch, qo_heads, kv_heads, page,
                     cuda_graph, qk, vd, causal, window_left, split, disable_split, ctas):
        self.plans.append(("prefill", arr(qo_indptr).tolist(), arr(page_indptr).tolist(), arr(kv_len).tolist(),
                           int(total_qo), int(batch), int(qo_heads), int(kv_heads), int(page), int(qk), int(vd), bool(causal)))
        assert fws.shape == (768 * 1024 * 1024,) and iws.shape == (8 * 1024 * 1024,)
        return [len(self.plans), 101]

    def plan_ragged(self, fws, iws, pws, qo_indptr, kv_indptr, kv_len, total_qo, batch, qo_heads, kv_heads, page,
                    cuda_graph, qk, vd, causal, window_left, split, disable_split, ctas):
        self.plans.append(("ragged", arr(qo_indptr).tolist(), arr(kv_indptr).tolist(), arr(kv_len).tolist(),
                           int(total_qo), int(batch), int(qo_heads), int(kv_heads), int(page), int(qk), int(vd), bool(causal)))
        return [len(self.plans), 102]

    def plan_decode(self, fws, iws, pws, page_indptr, batch, qo_heads, kv_heads, page, cuda_graph, window_left,
                    soft_cap, qk, vd, empty_q, empty_kv):
        self.plans.append(("decode", arr(page_indptr).tolist(), int(batch), int(qo_heads), int(kv_heads), int(page),
                           int(qk), int(vd), str(empty_q.dtype), tuple(empty_q.shape)))
        return [len(self.plans), 103]

    def run_prefill(self, fws, iws, info, q, k_pages, v_pages, qo_indptr, page_indptr, page_indices, last_page_len,
                    out, lse, mask_mode, layout, window_left, pdl, sm_scale, rcp_scale, rcp_theta):
        self.runs.append(("prefill", list(info), int(layout)))
        assert k_pages.shape == v_pages.shape and k_pages.shape[1:] == (KV, PAGE, D)
        qi, pi, idx, last = (arr(x) for x in (qo_indptr, page_indptr, page_indices, last_page_len))
        qa, ka, va, o, ls = arr(q), arr(k_pages), arr(v_pages), arr(out), arr(lse)
        for b in range(len(qi) - 1):
            k, v = gather(ka, va, idx[pi[b]:pi[b + 1]], last[b])
            o[qi[b]:qi[b + 1]], ls[qi[b]:qi[b + 1]] = attend(qa[qi[b]:qi[b + 1]], k, v, mask_mode == 1, sm_scale)

    def run_ragged(self, fws, iws, info, q, k, v, qo_indptr, kv_indptr, out, lse, mask_mode, layout, window_left, pdl,
                   sm_scale, rcp_scale, rcp_theta):
        self.runs.append(("ragged", list(info), int(layout)))
        qi = arr(qo_indptr)
        qa, ka, va, o, ls = arr(q), arr(k), arr(v), arr(out), arr(lse)
        for b in range(len(qi) - 1):
            s, e = qi[b], qi[b + 1]
            o[s:e], ls[s:e] = attend(qa[s:e], ka[s:e], va[s:e], mask_mode == 1, sm_scale)

    def run_decode(self, fws, iws, info, q, k_pages, v_pages, page_indptr, page_indices, last_page_len, out, lse,
                   layout, window_left, pdl, sm_scale, rcp_scale, rcp_theta):
        self.runs.append(("decode", list(info), int(layout)))
        pi, idx, last = arr(page_indptr), arr(page_indices), arr(last_page_len)
        qa, ka, va, o, ls = arr(q), arr(k_pages), arr(v_pages), arr(out), arr(lse)
        for b in range(len(pi) - 1):
            k, v = gather(ka, va, idx[pi[b]:pi[b + 1]], last[b])
            o[b:b + 1], ls[b:b + 1] = attend(qa[b:b + 1], k, v, False, sm_scale)


def tir():
    lib = tvm.runtime.load_module(str(pathlib.Path(KERNELS) / SMALL))
    return {n: lib[n] for n in ["transpose_append", "split_rotary", "copy_single_page", "debug_get_kv", "merge_state",
                                "compact_copy", "attn_prefill_sliding_window", "attn_decode_sliding_window",
                                "attn_prefill_with_tree_mask", "attn_prefill_with_tree_mask_paged_kv_cache"]}


def create_flashinfer(fi):
    k = tir()
    f = tvm_ffi.convert
    return G["paged_attention_kv_cache_create"](
        Shape([4, 1024, 256, PAGE, 0]), Shape([0, LAYERS]), QO, KV, D, D, Shape([0] * LAYERS), False, 0, 1.0, 1e4, None,
        tvm.runtime.empty((), "float32", device=DEV), k["transpose_append"], None,
        ["flashinfer", f(fi.run_ragged), f(fi.plan_ragged)], ["flashinfer", f(fi.run_prefill), f(fi.plan_prefill)],
        ["flashinfer", f(fi.run_decode), f(fi.plan_decode)],
        ["tirx", k["attn_prefill_sliding_window"]], ["tirx", k["attn_decode_sliding_window"]],
        ["tirx", k["attn_prefill_with_tree_mask_paged_kv_cache"]], ["tirx", k["attn_prefill_with_tree_mask"]],
        [], [k["merge_state"]], k["split_rotary"], k["copy_single_page"], k["debug_get_kv"], k["compact_copy"],
    )


def forward(cache, ids, lens, ck, cv, rng):
    """One forward; checks layer 0's output against attention over each sequence's K/V."""
    G["kv_state_begin_forward"](cache, Shape(ids), Shape(lens))
    q = rng.standard_normal((sum(lens), QO, D)).astype("float32")
    k = rng.standard_normal((sum(lens), KV, D)).astype("float32")
    v = rng.standard_normal((sum(lens), KV, D)).astype("float32")
    for layer in range(LAYERS):
        out = tvm.runtime.empty((sum(lens), QO, D), "float32", device=DEV)
        qkv = tvm.runtime.tensor(np.concatenate([q, k, v], axis=1), DEV)
        G["attention_kv_cache_attention_with_fused_qkv"](cache, layer, D**-0.5, qkv, out)
        if layer == 0:
            at = 0
            got = out.numpy()
            for s, n in zip(ids, lens):
                ck[s] = np.concatenate([ck[s], k[at:at + n]])
                cv[s] = np.concatenate([cv[s], v[at:at + n]])
                want, _ = attend(q[at:at + n], ck[s], cv[s], True, D**-0.5)
                np.testing.assert_allclose(got[at:at + n], want, rtol=1e-4, atol=1e-4)
                at += n
    G["kv_state_end_forward"](cache)


def test_flashinfer_convention():
    fi = FlashInferStandIn()
    cache = create_flashinfer(fi)
    rng = np.random.default_rng(0)
    ck, cv = {}, {}
    for s in range(3):
        G["kv_state_add_sequence"](cache, s)
        ck[s], cv[s] = np.zeros((0, KV, D), "float32"), np.zeros((0, KV, D), "float32")
    forward(cache, [0, 1], [20, 5], ck, cv, rng)
    # A prefill from empty pages: only the ragged kernel runs (its plan: causal, the append indptr).
    assert fi.plans[0] == ("ragged", [0, 20, 25], [0, 20, 25], [20, 5], 25, 2, QO, KV, 1, D, D, True)
    assert [r[0] for r in fi.runs] == ["ragged"] * LAYERS and all(r[1] == [1, 102] and r[2] == 0 for r in fi.runs)
    fi.plans.clear()
    fi.runs.clear()
    forward(cache, [0, 1, 2], [1, 1, 1], ck, cv, rng)
    # A decode over cached pages: the decode plan (one per forward, not per layer), then its runs.
    assert fi.plans == [("decode", [0, 2, 3, 4], 3, QO, KV, PAGE, D, D, "float32", (0,))]
    assert [r[0] for r in fi.runs] == ["decode"] * LAYERS and all(r[1] == [1, 103] and r[2] == 1 for r in fi.runs)
    fi.plans.clear()
    fi.runs.clear()
    forward(cache, [2, 1], [7, 3], ck, cv, rng)
    # A prefill over cached pages: ragged for the new tokens, paged prefill for the cache, merged.
    kinds = sorted({p[0] for p in fi.plans})
    assert kinds == ["prefill", "ragged"], fi.plans
    prefill = [p for p in fi.plans if p[0] == "prefill"][0]
    assert prefill[3] == [1, 6] and prefill[6:10] == (QO, KV, PAGE, D), prefill
    assert sorted({r[0] for r in fi.runs}) == ["prefill", "ragged"]
    G["kv_state_fork_sequence"](cache, 0, 3, 13)
    ck[3], cv[3] = ck[0][:13], cv[0][:13]
    forward(cache, [3, 0], [4, 2], ck, cv, rng)


def test_flashinfer_plan_errors_reach_the_caller():
    def bad_plan(*args):
        raise ValueError("plan refused")

    fi = FlashInferStandIn()
    fi.plan_ragged = bad_plan
    cache = create_flashinfer(fi)
    G["kv_state_add_sequence"](cache, 0)
    G["kv_state_begin_forward"](cache, Shape([0]), Shape([4]))
    out = tvm.runtime.empty((4, QO, D), "float32", device=DEV)
    qkv = tvm.runtime.tensor(np.zeros((4, QO + 2 * KV, D), "float32"), DEV)
    with pytest.raises(Exception, match="plan refused"):
        G["attention_kv_cache_attention_with_fused_qkv"](cache, 0, 0.125, qkv, out)


def test_mla_convention():
    ckv, kpe = 48, 16
    qk = ckv + kpe
    calls = []
    pages_seen = {}

    def append_mla(pages, kv_data, position_map):
        p, kd, pos = arr(pages), arr(kv_data), arr(position_map)
        assert p.shape[1:] == (PAGE, qk)
        for i, slot in enumerate(pos):
            p[slot // PAGE, slot % PAGE] = kd[i]
        pages_seen["pages"] = pages

    def mla_prefill(q, qo_indptr, pages, page_indptr, page_indices, length_info, out, lse, causal, sm_scale):
        calls.append(("mla_prefill", tuple(q.shape), tuple(pages.shape), arr(page_indptr).tolist(), arr(length_info).tolist(), int(causal)))
        arr(out)[:] = 1.0
        arr(lse)[:] = 0.0

    def ragged(q, qo_indptr, k, v, kv_indptr, q_rope, k_rope, out, lse, causal, rotary_mode, scale, theta, sm_scale):
        calls.append(("ragged", tuple(q.shape), tuple(k.shape), tuple(v.shape), int(causal), int(rotary_mode)))
        arr(out)[:] = 2.0
        arr(lse)[:] = 0.0

    def merge(o1, l1, o2, l2):
        calls.append(("merge", tuple(o1.shape)))
        arr(o1)[:] = (arr(o1) + arr(o2)) / 2

    def debug_get(pages, position_map, kv_data, layer):
        p, pos, out = arr(pages), arr(position_map), arr(kv_data)
        for i, slot in enumerate(pos):
            out[layer, i] = p[slot // PAGE, slot % PAGE]

    f = tvm_ffi.convert
    k = tir()
    cache = G["paged_attention_kv_cache_create"](
        Shape([4, 512, 64, PAGE, 0]), Shape([0, 2]), 4, 1, qk, ckv, Shape([1, 1]), False, 0, 1.0, 1e4, None,
        tvm.runtime.empty((), "float32", device=DEV), None, f(append_mla), ["tirx", f(ragged)], [], [], [], [], [], [],
        ["tirx", f(mla_prefill)], [f(merge), f(merge)], k["split_rotary"], k["copy_single_page"], f(debug_get), k["compact_copy"],
    )
    G["kv_state_add_sequence"](cache, 0)
    # A prefill of 5 tokens: the new tokens attend to each other (ragged, no RoPE, causal).
    G["kv_state_begin_forward"](cache, Shape([0]), Shape([5]))
    kv = np.arange(5 * qk, dtype="float32").reshape(5, qk)
    for layer in range(2):
        assert G["attention_kv_cache_append_mla_kv"](cache, layer, tvm.runtime.tensor(kv + layer, DEV)).same_as(cache)
    q = tvm.runtime.tensor(np.ones((5, 4, qk), "float32"), DEV)
    kk = tvm.runtime.tensor(np.ones((5, 4, qk), "float32"), DEV)
    vv = tvm.runtime.tensor(np.ones((5, 4, ckv), "float32"), DEV)
    o2 = tvm.runtime.empty((5, 4, ckv), "float32", device=DEV)
    lse2 = tvm.runtime.empty((5, 4), "float32", device=DEV)
    G["attention_kv_cache_self_attention"](cache, 0, 0.1, q, kk, vv, o2, lse2)
    assert calls[-1] == ("ragged", (5, 4, qk), (5, 4, qk), (5, 4, ckv), 1, 0)
    G["kv_state_end_forward"](cache)
    # A decode: the query attends to the cached compressed KV (MLA paged prefill, not causal).
    G["kv_state_begin_forward"](cache, Shape([0]), Shape([1]))
    for layer in range(2):
        G["attention_kv_cache_append_mla_kv"](cache, layer, tvm.runtime.tensor(kv[:1] + 10 * (layer + 1), DEV))
    q1 = tvm.runtime.tensor(np.ones((1, 4, qk), "float32"), DEV)
    o = tvm.runtime.empty((1, 4, ckv), "float32", device=DEV)
    lse = tvm.runtime.empty((1, 4), "float32", device=DEV)
    G["attention_kv_cache_cross_attention"](cache, 1, 0.1, q1, o, lse)
    assert calls[-1] == ("mla_prefill", (1, 4, qk), (33, PAGE, qk), [0, 1], [6], 0), calls[-1]
    o3 = tvm.runtime.tensor(np.full((1, 4, ckv), 2.0, "float32"), DEV)
    merged = G["attention_kv_cache_merge_attn_output_inplace"](cache, o, lse, o3, lse)
    assert calls[-1] == ("merge", (1, 4, ckv)) and merged[0].same_as(o)
    np.testing.assert_allclose(o.numpy(), 1.5)
    G["kv_state_end_forward"](cache)
    out = tvm.runtime.empty((2, 6, qk), "float32", device=DEV)
    G["attention_kv_cache_debug_get_kv_mla"](cache, 0, 0, 6, out)
    want = np.stack([np.concatenate([kv + l, kv[:1] + 10 * (l + 1)]) for l in range(2)])
    np.testing.assert_allclose(out.numpy(), want)
    with pytest.raises(Exception):
        G["attention_kv_cache_debug_get_kv"](cache, 0, 0, 6, out, out)
