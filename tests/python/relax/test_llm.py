"""LLMs as MLC-LLM compiles them, on this library through TVM v0.27's own Python (runtime-only):

- ../shared/fixtures-llm/llama_tiny: MLC's call sequence gives the tokens and logits (1e-5) of
  its expected.json (TVM's own runtime);
- the models of make_llm_models.py (RELAX_LLM_MODELS): the serving scenario of llm_scenario.py
  gives the tokens, logits (1e-5), free pages and total lengths TVM's runtime gave, after every
  step; also from four threads at once (one loaded library, a VM and a cache per thread);
- bad input to the cache: a clear error, and the cache still gives TVM's answers afterwards.

With TVM_REFERENCE=1 the same tests run on TVM's own runtime-only library.
"""

import json
import os
import pathlib
import sys
import threading

import numpy as np
import pytest
import tvm
from tvm.runtime import ShapeTuple as S
from tvm.runtime.vm import VirtualMachine

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import llm_scenario  # noqa: E402

REFERENCE = os.environ.get("TVM_REFERENCE") == "1"
CI = os.environ.get("CI") == "true"
TINY = pathlib.Path(__file__).resolve().parents[3] / ".." / "shared" / "fixtures-llm" / "llama_tiny"
MODELS = os.environ.get("RELAX_LLM_MODELS")
G = llm_scenario.G


def need_tiny():
    if not (TINY / "expected.json").is_file():
        if CI:
            raise RuntimeError(f"{TINY} is missing (CI=true)")
        pytest.skip(f"{TINY} is missing")


def model_names():
    if not MODELS or not (pathlib.Path(MODELS) / "models.json").is_file():
        if CI:
            raise RuntimeError("RELAX_LLM_MODELS is not set or has no models.json (CI=true)")
        return []
    return json.loads((pathlib.Path(MODELS) / "models.json").read_text())["models"]


def tiny_run(module=None):
    cfg = json.loads((TINY / "config.json").read_text())
    exp = json.loads((TINY / "expected.json").read_text())
    dev = tvm.cpu()
    vm = VirtualMachine(module or tvm.runtime.load_module(str(TINY / "lib.so")), dev)
    G["tensor_cache.load"](str(TINY / "params"), 1, 0)
    params = G["param_array_from_cache_by_name"](cfg["param_names"])
    kv = vm["create_tir_paged_kv_cache"](*[S([x]) for x in exp["create_tir_paged_kv_cache"]])
    h = cfg["hidden"]

    def embed(ids):
        return vm["embed"](tvm.runtime.tensor(np.array(ids, "int32"), dev), params).numpy()

    toks, prefill_logits, last = [[], []], [], []
    for i, p in enumerate(exp["prompts"]):
        G["kv_state_add_sequence"](kv, i)
        G["kv_state_begin_forward"](kv, S([i]), S([len(p)]))
        logits, kv = vm["prefill"](tvm.runtime.tensor(embed(p).reshape(1, len(p), h), dev), kv, params)
        G["kv_state_end_forward"](kv)
        logits = logits.numpy().reshape(-1)
        prefill_logits.append(logits)
        toks[i].append(int(logits.argmax()))
        last.append(toks[i][-1])
    for _ in range(len(exp["greedy"][0]) - 1):
        G["kv_state_begin_forward"](kv, S([0, 1]), S([1, 1]))
        logits, kv = vm["batch_decode"](tvm.runtime.tensor(embed(last).reshape(2, 1, h), dev), kv, params)
        G["kv_state_end_forward"](kv)
        logits = logits.numpy().reshape(2, -1)
        last = [int(x) for x in logits.argmax(-1)]
        for i in range(2):
            toks[i].append(last[i])
    return toks, prefill_logits, logits, exp


def test_llama_tiny_expected():
    need_tiny()
    toks, prefill_logits, last_logits, exp = tiny_run()
    assert toks == exp["greedy"]
    for i in range(2):
        np.testing.assert_allclose(prefill_logits[i], exp["prefill_logits"][i], rtol=0, atol=1e-5)
    np.testing.assert_allclose(last_logits, exp["last_logits"], rtol=0, atol=1e-5)


def test_llama_tiny_threads():
    need_tiny()
    mod = tvm.runtime.load_module(str(TINY / "lib.so"))
    results, errors = [None] * 4, []

    def work(k):
        try:
            results[k] = tiny_run(mod)[0]
        except Exception as e:  # noqa: BLE001 - reported below
            errors.append(e)

    threads = [threading.Thread(target=work, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    exp = json.loads((TINY / "expected.json").read_text())
    assert all(r == exp["greedy"] for r in results)


@pytest.mark.parametrize("name", model_names())
def test_model_scenario(name):
    d = pathlib.Path(MODELS) / name
    want = json.loads((d / "reference.json").read_text())
    llm_scenario.compare(llm_scenario.run(str(d)), want)


@pytest.mark.parametrize("name", model_names()[:2])
def test_model_scenario_threads(name):
    d = pathlib.Path(MODELS) / name
    want = json.loads((d / "reference.json").read_text())
    mod = tvm.runtime.load_module(str(d / "lib.so"))
    cfg = json.loads((d / "config.json").read_text())
    G["tensor_cache.load"](str(d / "params"), 1, 0)
    G["param_array_from_cache_by_name"](cfg["param_names"])
    results, errors = [None] * 4, []

    def work(k):
        try:
            results[k] = llm_scenario.run(str(d), mod)
        except Exception as e:  # noqa: BLE001 - reported below
            errors.append(e)

    threads = [threading.Thread(target=work, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    for r in results:
        llm_scenario.compare(r, want)


def _raises(f, *args):
    with pytest.raises(Exception) as info:  # noqa: PT011 - any error kind, the message is checked by the caller
        f(*args)
    return str(info.value)


@pytest.mark.skipif(REFERENCE, reason="TVM's runtime does not check the prefill chunk and keeps part of a refused "
                    "forward (a zero-length append grows the sequence first)")
def test_bad_input_leaves_cache_usable():
    """Every refused call names the problem; the tiny model then still gives TVM's tokens."""
    need_tiny()
    cfg = json.loads((TINY / "config.json").read_text())
    exp = json.loads((TINY / "expected.json").read_text())
    dev = tvm.cpu()
    vm = VirtualMachine(tvm.runtime.load_module(str(TINY / "lib.so")), dev)
    G["tensor_cache.load"](str(TINY / "params"), 1, 0)
    params = G["param_array_from_cache_by_name"](cfg["param_names"])
    kv = vm["create_tir_paged_kv_cache"](*[S([x]) for x in exp["create_tir_paged_kv_cache"]])
    pages = G["attention_kv_cache_get_num_available_pages"](kv)
    bf, add = G["kv_state_begin_forward"], G["kv_state_add_sequence"]
    assert "7" in _raises(bf, kv, S([7]), S([3]))
    assert "7" in _raises(G["kv_state_remove_sequence"], kv, 7)
    assert "9" in _raises(G["kv_state_fork_sequence"], kv, 9, 10, -1)
    assert "3" in _raises(G["kv_state_popn"], kv, 3, 1)
    add(kv, 0)
    assert "already" in _raises(add, kv, 0)
    assert "exceed" in _raises(G["kv_state_fork_sequence"], kv, 0, 1, 5)
    assert "exceeds" in _raises(G["kv_state_popn"], kv, 0, 1)
    assert "prefill chunk" in _raises(bf, kv, S([0]), S([65]))
    assert "mismatch" in _raises(bf, kv, S([0]), S([1, 2]))
    assert "length 0" in _raises(bf, kv, S([0]), S([0]))
    add(kv, 1)
    add(kv, 2)
    for _ in range(4):  # 16 of the 17 pages (forwards reserve pages without running the model)
        bf(kv, S([0]), S([64]))
    assert G["attention_kv_cache_get_num_available_pages"](kv) == pages - 16
    assert "pages" in _raises(bf, kv, S([1, 2]), S([16, 16]))  # two more pages wanted, one free
    assert G["attention_kv_cache_get_num_available_pages"](kv) == pages - 16
    assert G["attention_kv_cache_get_total_sequence_length"](kv) == 256
    G["kv_state_clear"](kv)
    add(kv, 0)
    # Wrong tensors in the attention call itself.
    bf(kv, S([0]), S([4]))
    att = G["attention_kv_cache_attention_with_fused_qkv"]
    qkv = tvm.runtime.tensor(np.zeros((4, 8, 16), "float32"), dev)
    out = tvm.runtime.tensor(np.zeros((4, 4, 16), "float32"), dev)
    assert "layer" in _raises(att, kv, 5, 0.25, qkv, out)
    assert "shape" in _raises(att, kv, 0, 0.25, tvm.runtime.tensor(np.zeros((4, 7, 16), "float32"), dev), out)
    assert "dtype" in _raises(att, kv, 0, 0.25, tvm.runtime.tensor(np.zeros((4, 8, 16), "float16"), dev), out)
    G["kv_state_clear"](kv)
    assert G["attention_kv_cache_get_num_available_pages"](kv) == pages
    # The cache still answers as TVM's does.
    h = cfg["hidden"]
    toks = []
    for i, p in enumerate(exp["prompts"]):
        add(kv, i)
        bf(kv, S([i]), S([len(p)]))
        e = vm["embed"](tvm.runtime.tensor(np.array(p, "int32"), dev), params).numpy().reshape(1, len(p), h)
        logits, kv = vm["prefill"](tvm.runtime.tensor(e, dev), kv, params)
        G["kv_state_end_forward"](kv)
        toks.append(int(logits.numpy().argmax()))
    assert toks == [g[0] for g in exp["greedy"]]


def test_unknown_backend_and_bad_create():
    fcreate = tvm.get_global_func("vm.builtin.paged_attention_kv_cache_create")
    f = tvm.get_global_func("vm.builtin.kv_state_clear")  # any function, never called
    init = tvm.runtime.empty((), "float32", device=tvm.cpu())
    args = [S([2, 64, 16, 16, 0]), S([0, 1]), 2, 2, 8, 8, S([0]), False, 1, 1.0, 1e4, None, init, f, None,
            ["tirx", f], ["tirx", f], ["tirx", f], ["tirx", f], ["tirx", f], ["tirx", f], ["tirx", f], [], [f], f, f, f, f]
    fcreate(*args)  # the arguments themselves are accepted
    bad = list(args)
    bad[16] = ["cutlass", f]
    msg = _raises(fcreate, *bad)
    assert REFERENCE or "cutlass" in msg
    assert "args" in _raises(fcreate, *args[:20])
    bad = list(args)
    bad[7] = True
    if not REFERENCE:  # TVM's runtime aborts on the missing NVSHMEM globals instead
        assert "NVSHMEM" in _raises(fcreate, *bad)
