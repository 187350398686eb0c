"""The compile step of the KV-state cases (test_kv_cache_cases.py, test_rnn_state_cases.py), run
with the pure `apache-tvm==0.27.0.post1` wheel (a full compiler):

    python make_kv_kernels.py OUT_DIR

apache/tvm's tests of these objects (tests/python/relax/test_runtime_builtin_paged_attention_
kv_cache_cpu.py, test_runtime_builtin_rnn_state.py) build their kernels in the test process. Here
the same kernels are built once and exported, so that the cases run runtime-only:

- `kv_<head_dim>_<dtype>_w<window>.so`: for each configuration the CPU test uses (4 layers, 32
  query heads, 4 KV heads, page size 16, RoPE scale 1 and theta 1e4, no RoPE scaling), the 13 TIR
  kernels of `tvm.relax.frontend.nn.llm.kv_cache` the test passes to
  `vm.builtin.paged_attention_kv_cache_create`, built as the test builds them (the default dlight
  schedule under the `llvm` target, `tvm.tirx.build`), one function each, named below;
- `kv_64_float32_w1024_q8k4.so`: the same kernels for 8 query heads over 4 KV heads (the
  stand-in backend tests, test_kv_cache_backends.py);
- `rnn.so`: the get/set kernels of an RNN state of two states, `(16, 16)` float16 and `(32, 32)`
  float32, 4 sequences and 4 history slots (TVM's test builds them for CUDA; these are our TIR
  of the same functions, for `llvm`, with no GPU schedule).
"""

import json
import os
import sys

import tvm
from tvm.relax.frontend.nn.llm.kv_cache import (
    _attention_decode_cpu,
    _attention_prefill_cpu,
    _attention_prefill_ragged_cpu,
    _compact_kv_copy_cpu,
    _copy_single_page_cpu,
    _kv_cache_debug_get_kv,
    _kv_cache_transpose_append,
    _merge_state_inplace_cpu,
    llama_rope_with_position_map,
    tree_attn_cpu,
    tree_attn_with_paged_kv_cache_cpu,
)
from tvm.s_tir import dlight as dl
from tvm.script import tirx as T

NUM_LAYERS, NUM_QO_HEADS, NUM_KV_HEADS, PAGE_SIZE = 4, 32, 4, 16
ROPE_SCALE, ROPE_THETA, ROPE_SCALING = 1.0, 1e4, {}
CONFIGS = [(64, "float32", 1024), (128, "float32", 1024), (64, "float16", 1024), (128, "float16", 1024), (64, "float32", 3)]
# For test_kv_cache_backends.py: 8 query heads over 4 KV heads (a GQA group below 4, where
# FlashInfer's decode kernel is used), head dim 64, float32.
SMALL = (64, "float32", 1024, 8, 4)
NAMES = [
    "transpose_append",
    "debug_get_kv",
    "attn_prefill",
    "attn_decode",
    "attn_prefill_sliding_window",
    "attn_decode_sliding_window",
    "attn_prefill_ragged",
    "attn_prefill_with_tree_mask",
    "attn_prefill_with_tree_mask_paged_kv_cache",
    "merge_state",
    "split_rotary",
    "copy_single_page",
    "compact_copy",
]


def kv_kernels(head_dim, dtype, window, qo=NUM_QO_HEADS, kv=NUM_KV_HEADS):
    return [
        _kv_cache_transpose_append(kv, head_dim, dtype),
        _kv_cache_debug_get_kv(NUM_LAYERS, kv, head_dim, dtype),
        _attention_prefill_cpu(kv, qo, head_dim, dtype, False, ROPE_SCALING),
        _attention_decode_cpu(kv, qo, head_dim, dtype, False, ROPE_SCALING),
        _attention_prefill_cpu(kv, qo, head_dim, dtype, True, ROPE_SCALING, sliding_window_size=window),
        _attention_decode_cpu(kv, qo, head_dim, dtype, True, ROPE_SCALING),
        _attention_prefill_ragged_cpu(kv, qo, head_dim, head_dim, dtype, ROPE_SCALING),
        tree_attn_cpu(kv, qo, head_dim, dtype, ROPE_SCALING),
        tree_attn_with_paged_kv_cache_cpu(kv, qo, head_dim, dtype, ROPE_SCALING),
        _merge_state_inplace_cpu(dtype),
        llama_rope_with_position_map(ROPE_THETA, ROPE_SCALE, head_dim, qo, kv, dtype, ROPE_SCALING),
        _copy_single_page_cpu(kv, PAGE_SIZE, head_dim, dtype),
        _compact_kv_copy_cpu(kv, head_dim, dtype),
    ]


def rnn_get(shape, dtype, nseq, hist):
    @T.prim_func
    def get(var_storage: T.handle, var_seq: T.handle, var_hist: T.handle, var_out: T.handle):
        n = T.int32()
        storage = T.match_buffer(var_storage, (nseq, hist, shape[0], shape[1]), dtype)
        seq = T.match_buffer(var_seq, (n,), "int32")
        hst = T.match_buffer(var_hist, (n,), "int32")
        out = T.match_buffer(var_out, (n, shape[0], shape[1]), dtype)
        for b, x, y in T.grid(n, shape[0], shape[1]):
            out[b, x, y] = storage[seq[b], hst[b], x, y]

    return get


def rnn_set(shape, dtype, nseq, hist):
    @T.prim_func
    def set_(var_storage: T.handle, var_seq: T.handle, var_hist: T.handle, var_data: T.handle):
        n = T.int32()
        storage = T.match_buffer(var_storage, (nseq, hist, shape[0], shape[1]), dtype)
        seq = T.match_buffer(var_seq, (n,), "int32")
        hst = T.match_buffer(var_hist, (n,), "int32")
        data = T.match_buffer(var_data, (n, shape[0], shape[1]), dtype)
        for b, x, y in T.grid(n, shape[0], shape[1]):
            # The slot of the next step: the state written now is read after end_forward.
            storage[seq[b], (hst[b] + 1) % hist, x, y] = data[b, x, y]

    return set_


def export(funcs, names, path):
    target = tvm.target.Target("llvm")
    mod = tvm.IRModule({n: f.with_attr("global_symbol", n) for n, f in zip(names, funcs)})
    with target:
        mod = dl.ApplyDefaultSchedule(dl.gpu.Fallback())(mod)
    tvm.tirx.build(mod, target=target).export_library(path)


def main(out):
    os.makedirs(out, exist_ok=True)
    made = []
    for head_dim, dtype, window in CONFIGS:
        name = f"kv_{head_dim}_{dtype}_w{window}.so"
        export(kv_kernels(head_dim, dtype, window), NAMES, os.path.join(out, name))
        made.append(name)
        print("made", name, flush=True)
    d, dt, w, qo, kv = SMALL
    export(kv_kernels(d, dt, w, qo, kv), NAMES, os.path.join(out, f"kv_{d}_{dt}_w{w}_q{qo}k{kv}.so"))
    made.append(f"kv_{d}_{dt}_w{w}_q{qo}k{kv}.so")
    states = [((16, 16), "float16"), ((32, 32), "float32")]
    funcs, names = [], []
    for k, (shape, dtype) in enumerate(states):
        funcs += [rnn_get(shape, dtype, 4, 4), rnn_set(shape, dtype, 4, 4)]
        names += [f"rnn_get_{k}", f"rnn_set_{k}"]
    export(funcs, names, os.path.join(out, "rnn.so"))
    made.append("rnn.so")
    with open(os.path.join(out, "kernels.json"), "w") as f:
        json.dump({"configs": CONFIGS, "names": NAMES, "files": made}, f, indent=1)


if __name__ == "__main__":
    main(sys.argv[1])
