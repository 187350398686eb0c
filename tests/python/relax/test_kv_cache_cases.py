"""The cases of apache/tvm's tests/python/relax/test_runtime_builtin_paged_attention_kv_cache_cpu.py
(TVM main, as the 0.27 wheel runs them), split in two: make_kv_kernels.py built the TIR kernels
with the wheel's compiler (the folder in RELAX_KV_KERNELS), and these cases run runtime-only
with TVM v0.27's own Python (TVM_USE_RUNTIME_LIB=1) on the library under test: every case drives
`vm.builtin.paged_attention_kv_cache_create` and the `vm.builtin.kv_state_*` /
`attention_kv_cache_*` globals with TVM's sequences of prefills, decodes, forks, pops, sliding
windows and token trees, and checks each attention output and the cached K/V against numpy.

The same file runs on TVM's own runtime-only library (TVM_REFERENCE=1, scripts/test-kv-cases.sh
--reference), which passes the same cases: the harness is the judge of both.

Configurations (as TVM's fixture): head dims 64 and 128 in float32 and float16 with normal RoPE,
and head dim 128 float16 with no and inline RoPE, each with and without sliding windows; 4 layers,
32 query and 4 KV heads (GQA), pages of 16, 32 sequences, 2048 tokens, prefill chunks of 512.
"""

import itertools
import json
import os
import pathlib

import numpy as np
import pytest
import tvm
from tvm_ffi import Shape

KERNELS = os.environ.get("RELAX_KV_KERNELS")
if not KERNELS or not (pathlib.Path(KERNELS) / "kernels.json").is_file():
    if os.environ.get("CI") == "true":
        raise RuntimeError("RELAX_KV_KERNELS is not set or has no kernels.json (CI=true)")
    pytest.skip("RELAX_KV_KERNELS is not set (a folder made by make_kv_kernels.py)", allow_module_level=True)
KERNELS = pathlib.Path(KERNELS)
META = json.loads((KERNELS / "kernels.json").read_text())

RESERVED_NSEQ, MAX_TOTAL, PREFILL_CHUNK, PAGE_SIZE = 32, 2048, 512, 16
NUM_LAYERS, NUM_QO, NUM_KV = 4, 32, 4
ROPE_SCALE, ROPE_THETA = 1.0, 1e4
MHA, MHA_SLIDING = 0, 3
ROPE_NONE, ROPE_NORMAL, ROPE_INLINE = 0, 1, 2
DEV = tvm.cpu()
G = {n: tvm.get_global_func("vm.builtin." + n) for n in [
    "kv_state_clear", "kv_state_add_sequence", "kv_state_remove_sequence", "kv_state_fork_sequence",
    "kv_state_popn", "kv_state_begin_forward", "kv_state_end_forward",
    "attention_kv_cache_enable_sliding_window_for_seq", "attention_kv_cache_commit_accepted_token_tree_nodes",
    "attention_kv_cache_attention_with_fused_qkv", "attention_kv_cache_attention_with_shared_kv",
    "attention_kv_cache_empty", "attention_kv_cache_debug_get_kv", "paged_attention_kv_cache_create",
]}
_LOADED = {}


def kernels(head_dim, dtype, window=1024):
    key = (head_dim, dtype, window)
    if key not in _LOADED:
        lib = tvm.runtime.load_module(str(KERNELS / f"kv_{head_dim}_{dtype}_w{window}.so"))
        _LOADED[key] = {n: lib[n] for n in META["names"]}
    return _LOADED[key]


class Cfg:
    def __init__(self, head_dim, dtype, rope_mode, sliding):
        self.head_dim, self.dtype, self.rope_mode, self.sliding = head_dim, dtype, rope_mode, sliding
        self.sm_scale = head_dim ** -0.5


def create(cfg, window=None, attn_kinds=None):
    k = kernels(cfg.head_dim, cfg.dtype, window or 1024)
    config = [RESERVED_NSEQ, MAX_TOTAL, PREFILL_CHUNK, PAGE_SIZE, int(cfg.sliding)]
    if window is not None:
        config.append(window)
    kinds = attn_kinds or [MHA] * NUM_LAYERS
    return G["paged_attention_kv_cache_create"](
        Shape(config), Shape([0, NUM_LAYERS]), NUM_QO, NUM_KV, cfg.head_dim, cfg.head_dim, Shape(kinds),
        False, cfg.rope_mode, ROPE_SCALE, ROPE_THETA, None, tvm.runtime.empty((), cfg.dtype, device=DEV),
        k["transpose_append"], None,
        ["tirx", k["attn_prefill_ragged"]], ["tirx", k["attn_prefill"]], ["tirx", k["attn_decode"]],
        ["tirx", k["attn_prefill_sliding_window"]], ["tirx", k["attn_decode_sliding_window"]],
        ["tirx", k["attn_prefill_with_tree_mask_paged_kv_cache"]], ["tirx", k["attn_prefill_with_tree_mask"]],
        [], [k["merge_state"]], k["split_rotary"], k["copy_single_page"], k["debug_get_kv"], k["compact_copy"],
    )


def rotary(x, offset, positions=None):
    """RoPE of x (tokens, heads, dim) at positions offset + (0.. or `positions`), in float32."""
    d = x.shape[-1]
    x = x.astype("float32")
    rot = np.concatenate([-x[:, :, d // 2:], x[:, :, : d // 2]], axis=-1)
    inv = ROPE_SCALE / (ROPE_THETA ** (np.arange(0, d, 2).astype("float32") / d))
    pos = np.arange(offset, offset + x.shape[0], dtype="float32") if positions is None else np.array(positions, "float32") + offset
    ang = np.concatenate([np.outer(pos, inv)] * 2, axis=-1)
    return np.cos(ang)[:, None, :] * x + np.sin(ang)[:, None, :] * rot


def softmax(x):
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def close(a, b):
    np.testing.assert_allclose(a, b, rtol=1e-3, atol=1e-3)


def verify(cache, cfg, ids, ck, cv):
    for s in ids:
        keys = tvm.runtime.empty(ck[s].shape, cfg.dtype, device=DEV)
        vals = tvm.runtime.empty(cv[s].shape, cfg.dtype, device=DEV)
        G["attention_kv_cache_debug_get_kv"](cache, s, 0, ck[s].shape[1], keys, vals)
        close(keys.numpy(), ck[s])
        close(vals.numpy(), cv[s])


def tree_depths(parents):
    out = []
    for p in parents:
        out.append(0 if p == -1 else out[p] + 1)
    return out


def step(cache, cfg, batch, ck, cv, windows=None, sinks=None, trees=None, accepted=None):
    """One forward of `batch` [(seq or (seq, parent, fork_pos), length)], checked against numpy:
    forks and new sequences first, attention per layer, then the commit of accepted tree nodes,
    the windows' slide, and the cached K/V of every sequence of the batch."""
    hd, dt, mode = cfg.head_dim, cfg.dtype, cfg.rope_mode
    ids, lens = [], []
    for k, (s, n) in enumerate(batch):
        if isinstance(s, tuple):
            s, parent, pos = s
            batch[k] = (s, n)
            G["kv_state_fork_sequence"](cache, parent, s, pos)
            ck[s] = ck[parent] if pos == -1 else ck[parent][:, :pos]
            cv[s] = cv[parent] if pos == -1 else cv[parent][:, :pos]
        elif s not in ck:
            G["kv_state_add_sequence"](cache, s)
            ck[s] = np.zeros((NUM_LAYERS, 0, NUM_KV, hd), dt)
            cv[s] = np.zeros((NUM_LAYERS, 0, NUM_KV, hd), dt)
        ids.append(s)
        lens.append(n)
    depths = [None] * len(batch)
    flat = None
    if trees:
        flat = []
        for k, (tree, n) in enumerate(zip(trees, lens)):
            flat += tree[-n:]
            depths[k] = tree_depths(tree)
    G["kv_state_begin_forward"](cache, Shape(ids), Shape(lens), Shape(flat) if flat is not None else None)
    qs = []
    new_q = np.zeros((NUM_LAYERS, 0, NUM_QO, hd), dt)
    new_k = np.zeros((NUM_LAYERS, 0, NUM_KV, hd), dt)
    new_v = np.zeros((NUM_LAYERS, 0, NUM_KV, hd), dt)
    for k, (s, n) in enumerate(batch):
        q = np.random.rand(NUM_LAYERS, n, NUM_QO, hd).astype(dt)
        kk = np.random.rand(NUM_LAYERS, n, NUM_KV, hd).astype(dt)
        vv = np.random.rand(NUM_LAYERS, n, NUM_KV, hd).astype(dt)
        qs.append(q)
        off = ck[s].shape[1] - (len(trees[k]) - n if trees else 0)
        pos = depths[k][-n:] if depths[k] is not None else None
        roped = np.stack([kk[l] if mode != ROPE_NORMAL else rotary(kk[l], off, pos) for l in range(NUM_LAYERS)])
        ck[s] = np.concatenate([ck[s], roped], axis=1)
        cv[s] = np.concatenate([cv[s], vv], axis=1)
        new_q = np.concatenate([new_q, q], axis=1)
        new_k = np.concatenate([new_k, kk], axis=1)
        new_v = np.concatenate([new_v, vv], axis=1)
    for layer in range(NUM_LAYERS):
        qkv = tvm.runtime.tensor(np.concatenate([new_q[layer], new_k[layer], new_v[layer]], axis=1), DEV)
        out = tvm.runtime.empty(new_q[layer].shape, dt, device=DEV)
        G["attention_kv_cache_attention_with_fused_qkv"](cache, layer, cfg.sm_scale, qkv, out)
        out = out.numpy()
        at = 0
        for k, (s, n) in enumerate(batch):
            total = ck[s].shape[1]
            off = total - (len(trees[k]) if trees else n)
            pos = depths[k][-n:] if depths[k] is not None else None
            q = qs[k][layer] if mode == ROPE_NONE else rotary(qs[k][layer], off, pos)
            keys = ck[s][layer]
            if mode == ROPE_INLINE:
                keys = rotary(keys, 0, list(range(off)) + [d + off for d in depths[k]] if depths[k] is not None else None)
            keys = np.repeat(keys.astype("float32"), NUM_QO // NUM_KV, axis=1)
            vals = np.repeat(cv[s][layer].astype("float32"), NUM_QO // NUM_KV, axis=1)
            scores = np.einsum("qhd,khd->hqk", q.astype("float32"), keys) / np.sqrt(hd)
            allowed = np.tril(np.ones((n, total), bool), k=total - n)
            if trees:
                size = len(trees[k])
                tmask = np.zeros((size, size), bool)
                for node, p in enumerate(trees[k]):
                    if p != -1:
                        tmask[node] = tmask[p]
                    tmask[node, node] = True
                allowed[:, -size:] = tmask[-n:]
            scores = np.where(allowed[None], scores, np.finfo("float32").min)
            want = np.einsum("hqk,khd->qhd", softmax(scores), vals).astype(dt)
            close(out[at: at + n], want)
            at += n
    G["kv_state_end_forward"](cache)
    if accepted is not None:
        G["attention_kv_cache_commit_accepted_token_tree_nodes"](cache, Shape(ids), Shape(accepted))
        for k, (leaf, (s, n)) in enumerate(zip(accepted, batch)):
            path = []
            node = leaf
            while node != -1:
                path.append(node)
                node = trees[k][node]
            off = ck[s].shape[1] - n
            for dst, src in enumerate(reversed(path)):
                if dst != src:
                    ck[s][:, off + dst] = ck[s][:, off + src]
                    cv[s][:, off + dst] = cv[s][:, off + src]
            pop = n - len(path)
            if pop > 0:
                ck[s], cv[s] = ck[s][:, :-pop], cv[s][:, :-pop]
    for s, _ in batch:
        if windows is not None and len(windows) > s and windows[s] != 0 and ck[s].shape[1] > windows[s]:
            slide = ck[s].shape[1] - windows[s]
            sink = sinks[s]
            ck[s] = np.concatenate([ck[s][:, :sink], ck[s][:, sink + slide:]], axis=1)
            cv[s] = np.concatenate([cv[s][:, :sink], cv[s][:, sink + slide:]], axis=1)
    verify(cache, cfg, ids, ck, cv)


CONFIGS = list(itertools.chain(
    itertools.product([64, 128], ["float32", "float16"], [ROPE_NORMAL], [False]),
    itertools.product([128], ["float16"], [ROPE_NONE, ROPE_INLINE], [False, True]),
))


@pytest.fixture(params=CONFIGS, ids=lambda p: f"d{p[0]}-{p[1]}-rope{p[2]}-sw{int(p[3])}")
def setup(request):
    cfg = Cfg(*request.param)
    return create(cfg), cfg


def test_prefill_and_decode(setup):
    cache, cfg = setup
    if cfg.sliding and cfg.rope_mode == ROPE_NORMAL:
        return
    G["kv_state_clear"](cache)
    ops = [[(0, 6)], [(1, 8)], [(2, 11)], [(3, 16)], [(4, 19), (5, 20)], [(6, 21), (7, 24)], [(2, 5), (4, 7), (8, 24)],
           [(6, 13)], [(8, 19)], [(0, 1)], [(1, 3), (3, 8), (5, 12), (7, 11)]]
    ops += [[(s, 1) for s in range(9)]] * 2 + [[(0, 1), (2, 1), (4, 1), (6, 1), (8, 1)], [(s, 1) for s in range(4, 9)]]
    ck, cv = {}, {}
    for batch in ops:
        step(cache, cfg, list(batch), ck, cv)


def test_remove_sequence(setup):
    cache, cfg = setup
    if cfg.sliding and cfg.rope_mode == ROPE_NORMAL:
        return
    G["kv_state_clear"](cache)
    ck, cv = {}, {}
    for gone in range(5):
        step(cache, cfg, [(s, 1) for s in range(5)], ck, cv)
        G["kv_state_remove_sequence"](cache, gone)
        ck.pop(gone)
        cv.pop(gone)
        verify(cache, cfg, [s for s in range(5) if s != gone], ck, cv)


def _remove_all_and_check_empty(cache, cfg, n, ck, cv):
    for s in range(n):
        G["kv_state_remove_sequence"](cache, s)
        ck.pop(s)
        cv.pop(s)
        verify(cache, cfg, list(range(s + 1, n)), ck, cv)
    assert G["attention_kv_cache_empty"](cache), "the KV cache is not empty after removing all sequences"


def test_fork_sequence(setup):
    cache, cfg = setup
    if cfg.sliding and cfg.rope_mode == ROPE_NORMAL:
        return
    G["kv_state_clear"](cache)
    ck, cv = {}, {}
    step(cache, cfg, [(0, 60), (1, 88), (2, 17), (3, 4)], ck, cv)
    for batch in [[((4, 3, -1), 35)], [((5, 0, -1), 20)], [((6, 5, -1), 102)], [((7, 0, -1), 3)],
                  [((8, 5, -1), 71), ((9, 5, -1), 20)],
                  [(2, 1), (4, 1), (7, 1), (6, 1), (8, 1), (9, 1)], [(7, 1), (6, 1), (8, 1), (9, 1)],
                  [(7, 1), (1, 1), (6, 1), (2, 1), (8, 1), (4, 1), (9, 1)], [(7, 10), (6, 2), (8, 3), (9, 4)],
                  [((10, 1, 33), 11)], [((11, 0, 60), 45), ((12, 0, 15), 14)], [((13, 0, 16), 19), ((14, 0, 17), 19)],
                  [((15, 5, 60), 8), ((16, 5, 80), 10)], [((17, 5, 75), 11), ((18, 5, 76), 45), ((19, 5, 77), 14)],
                  [(6, 1), (11, 1), (13, 1), (9, 1)], [(10, 1), (16, 1), (18, 1), (19, 1)],
                  [(8, 1), (15, 1), (17, 1), (12, 1), (14, 1)], [(10, 10), (6, 2), (8, 3), (19, 4)]]:
        step(cache, cfg, batch, ck, cv)
    _remove_all_and_check_empty(cache, cfg, 20, ck, cv)
    # Forks after the pages were recycled.
    for batch in [[(0, 7), (1, 24)], [((2, 1, -1), 10)], [((3, 0, -1), 20)], [(2, 1), (3, 1)], [(10, 7), (11, 24)],
                  [((12, 11, -1), 200)], [(10, 1), (12, 1)]]:
        step(cache, cfg, batch, ck, cv)


def test_unlimited_depth(setup):
    cache, cfg = setup
    if cfg.sliding and cfg.rope_mode == ROPE_NORMAL:
        return
    G["kv_state_clear"](cache)
    ck, cv = {}, {}
    step(cache, cfg, [(0, 30)], ck, cv)
    for child, parent, n in [(1, 0, 15), (2, 1, 5), (3, 2, 20), (4, 3, 26), (5, 3, 18), (6, 5, 22), (7, 5, 12),
                             (8, 7, 29), (9, 7, 9), (10, 9, 31), (11, 9, 4)]:
        step(cache, cfg, [((child, parent, -1), n)], ck, cv)
    for batch in [[(3, 1), (6, 1), (9, 1)], [(4, 1), (8, 1), (10, 1)], [(5, 1), (7, 1), (11, 1)]]:
        step(cache, cfg, batch, ck, cv)
    _remove_all_and_check_empty(cache, cfg, 12, ck, cv)


def test_popn(setup):
    cache, cfg = setup
    if cfg.sliding and cfg.rope_mode == ROPE_NORMAL:
        return
    G["kv_state_clear"](cache)
    ck, cv = {}, {}
    step(cache, cfg, [(0, 35), (1, 88), (2, 17), (3, 4)], ck, cv)
    step(cache, cfg, [((4, 3, -1), 35)], ck, cv)
    for s, n in [(0, 17), (1, 57), (2, 16), (3, 0), (4, 37)]:
        G["kv_state_popn"](cache, s, n)
        if n:
            ck[s], cv[s] = ck[s][:, :-n], cv[s][:, :-n]
        verify(cache, cfg, list(range(4)), ck, cv)
    for s in range(5):
        G["kv_state_remove_sequence"](cache, s)
        verify(cache, cfg, list(range(s + 1, 5)), ck, cv)
    assert G["attention_kv_cache_empty"](cache)


def _windowed(cache, cfg, windows, sinks, ck, cv):
    for s, (w, k) in enumerate(zip(windows, sinks)):
        G["kv_state_add_sequence"](cache, s)
        G["attention_kv_cache_enable_sliding_window_for_seq"](cache, s, w, k)
        ck[s] = np.zeros((NUM_LAYERS, 0, NUM_KV, cfg.head_dim), cfg.dtype)
        cv[s] = np.zeros((NUM_LAYERS, 0, NUM_KV, cfg.head_dim), cfg.dtype)


def test_sliding_window(setup):
    cache, cfg = setup
    if not cfg.sliding or cfg.rope_mode == ROPE_NORMAL:
        return
    G["kv_state_clear"](cache)
    ck, cv = {}, {}
    windows, sinks = [20, 25, 30, 35, 40], [6, 4, 8, 3, 7]
    _windowed(cache, cfg, windows, sinks, ck, cv)
    ops = [[(0, 4)], [(1, 6)], [(2, 6), (3, 7), (4, 7)], [(0, 20), (1, 19), (2, 30), (3, 35), (4, 40)],
           [(0, 6), (1, 5), (2, 4), (3, 3), (4, 2)]] + [[(s, 1) for s in range(5)]] * 20
    for batch in ops:
        step(cache, cfg, list(batch), ck, cv, windows, sinks)


def test_sliding_window_fork(setup):
    cache, cfg = setup
    if not cfg.sliding or cfg.rope_mode == ROPE_NORMAL:
        return
    G["kv_state_clear"](cache)
    ck, cv = {}, {}
    windows, sinks = [30, 35, 40], [15, 20, 25]
    _windowed(cache, cfg, windows, sinks, ck, cv)
    step(cache, cfg, [(0, 12), (1, 18), (2, 28)], ck, cv, windows, sinks)
    windows, sinks = windows + [0, 0, 0], sinks + [0, 0, 0]
    step(cache, cfg, [((3, 0, 10), 8), ((4, 1, -1), 20), ((5, 2, 18), 18)], ck, cv, windows, sinks)
    step(cache, cfg, [(0, 9), (1, 15), (2, 4), (3, 10), (4, 3), (5, 7)], ck, cv, windows, sinks)
    windows, sinks = windows + [25], sinks + [24]
    G["kv_state_fork_sequence"](cache, 3, 6, 18)
    G["attention_kv_cache_enable_sliding_window_for_seq"](cache, 6, windows[-1], sinks[-1])
    ck[6], cv[6] = ck[3][:, :18], cv[3][:, :18]
    step(cache, cfg, [(3, 10), (6, 12)], ck, cv, windows, sinks)


def test_tree_attn(setup):
    cache, cfg = setup
    if cfg.sliding or cfg.rope_mode == ROPE_INLINE:
        return
    prefill = [(0, 10), (1, 20), (2, 30), (3, 40)]
    decode = [(s, 1) for s in range(4)]
    G["kv_state_clear"](cache)
    ck, cv = {}, {}
    step(cache, cfg, list(prefill), ck, cv)
    trees = [[-1, 0, 0, 1, 1, 2, 2], [-1, 0, 0, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5, 6, 6], list(range(-1, 9)),
             [-1, 0, 0, 1, 1, 2, 2, -1, 7, 7, 8, 8, 9, 9]]
    step(cache, cfg, [(0, 7), (1, 15), (2, 10), (3, 14)], ck, cv, trees=trees, accepted=[6, 11, 6, 13])
    for _ in range(5):
        step(cache, cfg, list(decode), ck, cv)
    # Every tree a chain.
    G["kv_state_clear"](cache)
    ck, cv = {}, {}
    step(cache, cfg, list(prefill), ck, cv)
    chains = [list(range(-1, 6)), list(range(-1, 14)), list(range(-1, 9)), list(range(-1, 13))]
    step(cache, cfg, [(0, 7), (1, 15), (2, 10), (3, 14)], ck, cv, trees=chains, accepted=[2, 6, -1, 4])
    for _ in range(5):
        step(cache, cfg, list(decode), ck, cv)
    # Trees over cached K/V, grown over five forwards and committed at the end.
    G["kv_state_clear"](cache)
    ck, cv = {}, {}
    step(cache, cfg, list(prefill), ck, cv)
    for i in range(5):
        leaves = 2 ** i
        parents = [(k - 1) // 2 for k in range(2 * leaves - 1)]
        step(cache, cfg, [(s, leaves) for s in range(4)], ck, cv, trees=[parents] * 4,
             accepted=None if i != 4 else [2, 6, -1, 4])


def _causal_reference(cfg, q, k, v, past, window=None):
    k = np.repeat(k, NUM_QO // NUM_KV, axis=1).astype("float32")
    v = np.repeat(v, NUM_QO // NUM_KV, axis=1).astype("float32")
    scores = np.einsum("qhd,khd->hqk", q.astype("float32"), k) * cfg.sm_scale
    qpos = past + np.arange(q.shape[0])
    kpos = np.arange(k.shape[0])
    mask = kpos[None, :] <= qpos[:, None]
    if window is not None:
        mask &= kpos[None, :] > qpos[:, None] - window
    scores = np.where(mask[None], scores, np.finfo("float32").min)
    return np.einsum("hqk,khd->qhd", softmax(scores), v)


def test_per_layer_sliding_window():
    cfg = Cfg(64, "float32", ROPE_NONE, False)
    window = 3
    cache = create(cfg, window=window, attn_kinds=[MHA_SLIDING] + [MHA] * (NUM_LAYERS - 1))
    G["kv_state_add_sequence"](cache, 0)
    rng = np.random.default_rng(0)
    keys = np.empty((0, NUM_KV, 64), "float32")
    vals = np.empty((0, NUM_KV, 64), "float32")
    for n in [3, 2, 1]:
        past = keys.shape[0]
        q = rng.standard_normal((n, NUM_QO, 64)).astype("float32")
        k = rng.standard_normal((n, NUM_KV, 64)).astype("float32")
        v = rng.standard_normal((n, NUM_KV, 64)).astype("float32")
        G["kv_state_begin_forward"](cache, Shape([0]), Shape([n]), None)
        out = tvm.runtime.empty(q.shape, "float32", device=DEV)
        G["attention_kv_cache_attention_with_fused_qkv"](cache, 0, cfg.sm_scale, tvm.runtime.tensor(np.concatenate([q, k, v], 1), DEV), out)
        keys, vals = np.concatenate([keys, k]), np.concatenate([vals, v])
        close(out.numpy(), _causal_reference(cfg, q, keys, vals, past, window))
        G["kv_state_end_forward"](cache)


@pytest.mark.parametrize("source_kind, window", [(MHA, None), (MHA_SLIDING, 3)])
def test_attention_with_shared_kv(source_kind, window):
    cfg = Cfg(64, "float32", ROPE_NONE, False)
    cache = create(cfg, window=window or 1024, attn_kinds=[source_kind] + [MHA] * (NUM_LAYERS - 1))
    G["kv_state_add_sequence"](cache, 0)
    rng = np.random.default_rng(0)
    keys = np.empty((0, NUM_KV, 64), "float32")
    vals = np.empty((0, NUM_KV, 64), "float32")
    for n in [3, 2, 1]:
        past = keys.shape[0]
        q = rng.standard_normal((n, NUM_QO, 64)).astype("float32")
        k = rng.standard_normal((n, NUM_KV, 64)).astype("float32")
        v = rng.standard_normal((n, NUM_KV, 64)).astype("float32")
        shared_q = rng.standard_normal((n, NUM_QO, 64)).astype("float32")
        G["kv_state_begin_forward"](cache, Shape([0]), Shape([n]), None)
        out = tvm.runtime.empty(q.shape, "float32", device=DEV)
        G["attention_kv_cache_attention_with_fused_qkv"](cache, 0, cfg.sm_scale, tvm.runtime.tensor(np.concatenate([q, k, v], 1), DEV), out)
        shared = tvm.runtime.empty(q.shape, "float32", device=DEV)
        G["attention_kv_cache_attention_with_shared_kv"](cache, 0, cfg.sm_scale, tvm.runtime.tensor(shared_q, DEV),
                                                         tvm.runtime.tensor(k, DEV), tvm.runtime.tensor(v, DEV), shared)
        keys, vals = np.concatenate([keys, k]), np.concatenate([vals, v])
        close(shared.numpy(), _causal_reference(cfg, shared_q, keys, vals, past, window))
        G["kv_state_end_forward"](cache)
