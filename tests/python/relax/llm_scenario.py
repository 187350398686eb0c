"""A serving scenario over a model library made by llm_model.py, driven the way MLC-LLM's engine
drives one (TVM's Python only, runtime-only is enough): weights from the tensor cache, the paged
KV cache from `create_tir_paged_kv_cache`, prefills (single and batched, chunked at the prefill
chunk size), greedy batch decodes, a fork inside a page, `popn`, a removal, a fork at the end,
sliding windows where the cache has them; after every step the free pages and total length.

    python llm_scenario.py MODEL_DIR OUT.json     (the result, for a later comparison)

`run(model_dir, module=None, device=None)` returns the result as a dict (`module`: an already
loaded library, to run on several threads at once; `device`: where the model runs, the CPU by
default).
"""

import json
import sys

import numpy as np
import tvm
from tvm.runtime import ShapeTuple as S
from tvm.runtime.vm import VirtualMachine

G = {n: tvm.get_global_func("vm.builtin." + n) for n in [
    "kv_state_add_sequence", "kv_state_remove_sequence", "kv_state_fork_sequence", "kv_state_popn", "kv_state_clear",
    "kv_state_begin_forward", "kv_state_end_forward", "attention_kv_cache_get_num_available_pages",
    "attention_kv_cache_get_total_sequence_length", "attention_kv_cache_enable_sliding_window_for_seq",
    "tensor_cache.load", "param_array_from_cache_by_name", "attention_kv_cache_attention_with_fused_qkv",
]}

PREFILL_CHUNK = 64


def prompt(seed, n, vocab):
    return [int(x) for x in np.random.default_rng(seed).integers(1, vocab, n)]


class Runner:
    def __init__(self, model_dir, module=None, page_size=16, capacity=512, sliding=0, device=None):
        self.cfg = json.load(open(f"{model_dir}/config.json"))
        self.dev = device or tvm.cpu()
        mod = module or tvm.runtime.load_module(f"{model_dir}/lib.so")
        self.vm = VirtualMachine(mod, self.dev)
        G["tensor_cache.load"](f"{model_dir}/params", self.dev.dlpack_device_type(), self.dev.index)
        self.params = G["param_array_from_cache_by_name"](self.cfg["param_names"])
        self.kv = self.vm["create_tir_paged_kv_cache"](S([4]), S([capacity]), S([PREFILL_CHUNK]), S([page_size]), S([sliding]))
        self.log = []
        self.last = {}

    def note(self, what, logits=None):
        entry = {"step": what, "pages": int(G["attention_kv_cache_get_num_available_pages"](self.kv)),
                 "total": int(G["attention_kv_cache_get_total_sequence_length"](self.kv))}
        if logits is not None:
            entry["logits"] = [[float(x) for x in row] for row in logits]
            entry["tokens"] = [int(x) for x in np.argmax(logits, axis=-1)]
        self.log.append(entry)

    def embed(self, ids):
        e = self.vm["embed"](tvm.runtime.tensor(np.array(ids, "int32"), self.dev), self.params).numpy()
        return e.reshape(1, len(ids), -1)

    def prefill(self, seqs):
        """Prefills {seq: ids} in chunks of PREFILL_CHUNK tokens; the last chunk gives the logits."""
        pending = {s: list(ids) for s, ids in seqs.items()}
        while pending:
            batch, budget = [], PREFILL_CHUNK
            for s in list(pending):
                if budget == 0:
                    break
                take = pending[s][:budget]
                batch.append((s, take))
                budget -= len(take)
                pending[s] = pending[s][len(take):]
            G["kv_state_begin_forward"](self.kv, S([s for s, _ in batch]), S([len(t) for _, t in batch]))
            flat = [x for _, t in batch for x in t]
            if len(batch) == 1:
                logits, self.kv = self.vm["prefill"](tvm.runtime.tensor(self.embed(flat), self.dev), self.kv, self.params)
            else:
                pos = np.cumsum([len(t) for _, t in batch]).astype("int32") - 1
                logits, self.kv = self.vm["batch_prefill"](tvm.runtime.tensor(self.embed(flat), self.dev),
                                                          tvm.runtime.tensor(pos, self.dev), self.kv, self.params)
            G["kv_state_end_forward"](self.kv)
            logits = logits.numpy().reshape(len(batch), -1)
            done = [s for s, _ in batch if not pending[s]]
            for k, (s, _) in enumerate(batch):
                if s in done:
                    self.last[s] = int(np.argmax(logits[k]))
            for s in done:
                del pending[s]
            self.note(f"prefill {[(s, len(t)) for s, t in batch]}", logits)

    def decode(self, seqs, steps):
        for _ in range(steps):
            G["kv_state_begin_forward"](self.kv, S(seqs), S([1] * len(seqs)))
            e = np.concatenate([self.embed([self.last[s]]) for s in seqs]).reshape(len(seqs), 1, -1)
            logits, self.kv = self.vm["batch_decode"](tvm.runtime.tensor(e, self.dev), self.kv, self.params)
            G["kv_state_end_forward"](self.kv)
            logits = logits.numpy().reshape(len(seqs), -1)
            for k, s in enumerate(seqs):
                self.last[s] = int(np.argmax(logits[k]))
            self.note(f"decode {seqs}", logits)


def run(model_dir, module=None, device=None):
    cfg = json.load(open(f"{model_dir}/config.json"))
    scen = cfg.get("scenario", {})
    r = Runner(model_dir, module, page_size=scen.get("page_size", 16), capacity=scen.get("capacity", 512),
               sliding=int(scen.get("sliding", False)), device=device)
    v = cfg["vocab"]
    window = scen.get("window")
    r.note("created")

    def add(s):
        G["kv_state_add_sequence"](r.kv, s)
        if window:
            G["attention_kv_cache_enable_sliding_window_for_seq"](r.kv, s, window[0], window[1])
        r.note(f"add {s}")

    add(0)
    r.prefill({0: prompt(1, 20, v)})
    add(1)
    add(2)
    r.prefill({1: prompt(2, 7, v), 2: prompt(3, 33, v)})
    r.decode([0, 1, 2], 6)
    if not window:
        G["kv_state_fork_sequence"](r.kv, 0, 3, 12)
        r.note("fork 0 -> 3 at 12")
        r.prefill({3: prompt(4, 5, v)})
        r.decode([0, 3, 2], 4)
        G["kv_state_popn"](r.kv, 2, 3)
        r.note("popn 2 by 3")
        r.last[2] = prompt(5, 1, v)[0]
    else:
        add(3)
        r.prefill({3: prompt(4, 5, v)})
        r.decode([0, 3, 2], 4)
    r.decode([2], 2)
    G["kv_state_remove_sequence"](r.kv, 1)
    r.note("remove 1")
    add(4)
    r.prefill({4: prompt(6, 70, v)})
    r.decode([0, 2, 3, 4], 3)
    if not window:
        G["kv_state_fork_sequence"](r.kv, 4, 5, -1)
        r.note("fork 4 -> 5 at the end")
        r.last[5] = r.last[4]
        r.decode([4, 5], 2)
    r.decode([0, 2], scen.get("long_decode", 8))
    return {"log": r.log}


def compare(got, want, atol=1e-5):
    """Raises AssertionError at the first step where `got` differs from `want`."""
    assert len(got["log"]) == len(want["log"]), (len(got["log"]), len(want["log"]))
    for g, w in zip(got["log"], want["log"]):
        assert g["step"] == w["step"], (g["step"], w["step"])
        assert (g["pages"], g["total"]) == (w["pages"], w["total"]), (w["step"], g["pages"], w["pages"], g["total"], w["total"])
        if "logits" in w:
            assert g["tokens"] == w["tokens"], (w["step"], g["tokens"], w["tokens"])
            np.testing.assert_allclose(np.array(g["logits"]), np.array(w["logits"]), rtol=0, atol=atol, err_msg=w["step"])


if __name__ == "__main__":
    with open(sys.argv[2], "w") as f:
        json.dump(run(sys.argv[1]), f)
