"""Greedy generation with llama_tiny written in Python against TVM's runtime, MLC's call
sequence (as ../shared/fixtures-llm/llama_tiny/expected.json was made), one sequence, longer:
prints the decode tokens/s. scripts/bench-engine.sh sets it beside `tvmrt generate`.

    python llm_greedy.py FIXTURE_DIR STEPS
"""
import json, sys, time
import numpy as np
import tvm
from tvm.runtime import ShapeTuple as S
from tvm.runtime.vm import VirtualMachine
from tvm_ffi import get_global_func as get
d, steps = sys.argv[1], int(sys.argv[2])
cfg = json.load(open(f"{d}/config.json")); exp = json.load(open(f"{d}/expected.json"))
dev = tvm.cpu()
vm = VirtualMachine(tvm.runtime.load_module(f"{d}/lib.so"), dev)
get("vm.builtin.tensor_cache.load")(f"{d}/params", 1, 0)
params = get("vm.builtin.param_array_from_cache_by_name")(cfg["param_names"])
kv = vm["create_tir_paged_kv_cache"](S([2]), S([1024]), S([64]), S([16]), S([0]))
H = cfg["hidden"]
add = get("vm.builtin.kv_state_add_sequence"); bf = get("vm.builtin.kv_state_begin_forward"); ef = get("vm.builtin.kv_state_end_forward")
def embed(ids):
    return vm["embed"](tvm.runtime.tensor(np.array(ids, dtype="int32"), dev), params).numpy()
p = exp["prompts"][0]
add(kv, 0); bf(kv, S([0]), S([len(p)]))
logits, kv = vm["prefill"](tvm.runtime.tensor(embed(p).reshape(1, len(p), H), dev), kv, params); ef(kv)
last = int(logits.numpy().argmax()); toks = [last]
t = time.perf_counter()
for _ in range(steps):
    bf(kv, S([0]), S([1]))
    logits, kv = vm["decode"](tvm.runtime.tensor(embed([last]).reshape(1, 1, H), dev), kv, params); ef(kv)
    last = int(logits.numpy().argmax()); toks.append(last)
dt = time.perf_counter() - t
print(steps / dt)
assert toks[:11] == exp["greedy"][0], toks[:11]
