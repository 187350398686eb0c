"""The LLM bench of scripts/bench-llm.sh (issue 31): a Llama-style model of 6 layers, hidden 256,
vocabulary 4096 (tests/python/relax/llm_model.py) driven as MLC's engine drives it.

    python llm_bench.py make OUT_DIR        (the full TVM wheel: compiles the model)
    python llm_bench.py run OUT_DIR         (any runtime: prints "name value" lines)

`run` measures, in one process: decode tokens/s of one sequence and of four at once (greedy,
`batch_decode`), the time of a 64-token prefill, the cache's own bookkeeping per decode step
(`kv_state_begin_forward` + `kv_state_end_forward` from Python, no kernels), and the memory a
cache of the bench's configuration holds (RSS and address space grown by creating it and
running one prefill and one decode).
"""

import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "python", "relax"))

CAPACITY, CHUNK, PAGE = 8192, 512, 16


def make(out):
    from llm_model import Cfg, build

    build(Cfg("bench", hidden=256, layers=6, heads=8, kv_heads=4, head_dim=32, ffn=688, vocab=4096), out)


def mem():
    with open("/proc/self/status") as f:
        v = {line.split(":")[0]: int(line.split()[1]) for line in f if line.startswith(("VmRSS", "VmSize"))}
    return v["VmRSS"] * 1024, v["VmSize"] * 1024


def run(d):
    import json

    import tvm
    from tvm.runtime import ShapeTuple as S
    from tvm.runtime.vm import VirtualMachine

    g = {n: tvm.get_global_func("vm.builtin." + n) for n in ["kv_state_add_sequence", "kv_state_begin_forward",
                                                               "kv_state_end_forward", "kv_state_clear", "tensor_cache.load",
                                                               "param_array_from_cache_by_name"]}
    cfg = json.load(open(f"{d}/config.json"))
    dev = tvm.cpu()
    vm = VirtualMachine(tvm.runtime.load_module(f"{d}/lib.so"), dev)
    g["tensor_cache.load"](f"{d}/params", 1, 0)
    params = g["param_array_from_cache_by_name"](cfg["param_names"])
    h = cfg["hidden"]
    rng = np.random.default_rng(0)
    emb = {}

    def embed(ids):
        key = tuple(ids)
        if key not in emb:
            emb[key] = vm["embed"](tvm.runtime.tensor(np.array(ids, "int32"), dev), params).numpy()
        return emb[key]

    def new_cache(n):
        kv = vm["create_tir_paged_kv_cache"](S([4]), S([CAPACITY]), S([CHUNK]), S([PAGE]), S([0]))
        for s in range(n):
            g["kv_state_add_sequence"](kv, s)
        return kv

    # Memory: the cache itself, after one prefill and one decode of one sequence.
    prompt = [int(x) for x in rng.integers(1, cfg["vocab"], 64)]
    e64 = tvm.runtime.tensor(embed(prompt).reshape(1, 64, h), dev)
    e1 = tvm.runtime.tensor(embed(prompt[:1]).reshape(1, 1, h), dev)
    r0, v0 = mem()
    kv = new_cache(1)
    g["kv_state_begin_forward"](kv, S([0]), S([64]))
    _, kv = vm["prefill"](e64, kv, params)
    g["kv_state_end_forward"](kv)
    g["kv_state_begin_forward"](kv, S([0]), S([1]))
    _, kv = vm["batch_decode"](e1, kv, params)
    g["kv_state_end_forward"](kv)
    r1, v1 = mem()
    print("cache_rss_mb", (r1 - r0) / 2**20)
    print("cache_vm_mb", (v1 - v0) / 2**20)
    del kv

    # Prefill of 64 tokens (best of 7, each on a fresh sequence).
    best = 1e9
    for _ in range(7):
        kv = new_cache(1)
        t = time.perf_counter()
        g["kv_state_begin_forward"](kv, S([0]), S([64]))
        _, kv = vm["prefill"](e64, kv, params)
        g["kv_state_end_forward"](kv)
        best = min(best, time.perf_counter() - t)
    print("prefill64_ms", best * 1e3)

    # Greedy decode, one and four sequences: tokens/s over 64 steps after a 64-token prefill.
    for n in (1, 4):
        kv = new_cache(n)
        ids = list(range(n))
        pos = np.cumsum([64] * n).astype("int32") - 1
        g["kv_state_begin_forward"](kv, S(ids), S([64] * n))
        big = tvm.runtime.tensor(np.concatenate([embed(prompt)] * n).reshape(1, 64 * n, h), dev) if n > 1 else e64
        if n > 1:
            logits, kv = vm["batch_prefill"](big, tvm.runtime.tensor(pos, dev), kv, params)
        else:
            logits, kv = vm["prefill"](e64, kv, params)
        g["kv_state_end_forward"](kv)
        last = [int(x) for x in logits.numpy().reshape(n, -1).argmax(-1)]
        steps = 64
        t = time.perf_counter()
        for _ in range(steps):
            g["kv_state_begin_forward"](kv, S(ids), S([1] * n))
            e = tvm.runtime.tensor(np.concatenate([embed([x]) for x in last]).reshape(n, 1, h), dev)
            logits, kv = vm["batch_decode"](e, kv, params)
            g["kv_state_end_forward"](kv)
            last = [int(x) for x in logits.numpy().reshape(n, -1).argmax(-1)]
        dt = time.perf_counter() - t
        print(f"decode{n}_tok_s", n * steps / dt)

    # Bookkeeping: begin + end forward of a 4-sequence decode step, no kernels (2000 steps).
    best = 1e9
    kv = new_cache(4)
    ids, ones = S([0, 1, 2, 3]), S([1, 1, 1, 1])
    for _ in range(5):
        g["kv_state_clear"](kv)
        for s in range(4):
            g["kv_state_add_sequence"](kv, s)
        g["kv_state_begin_forward"](kv, ids, S([64] * 4))
        g["kv_state_end_forward"](kv)
        t = time.perf_counter()
        for _ in range(1000):
            g["kv_state_begin_forward"](kv, ids, ones)
            g["kv_state_end_forward"](kv)
        best = min(best, (time.perf_counter() - t) / 1000)
    print("bookkeeping_us", best * 1e6)


if __name__ == "__main__":
    {"make": make, "run": run}[sys.argv[1]](sys.argv[2])
