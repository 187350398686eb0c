"""Makes small LLMs the way MLC-LLM makes its model libraries (llm_model.py, TVM v0.27's
`tvm.relax.frontend.nn` with `TIRPagedKVCache` for `llvm`), with random weights as tensor caches,
and records what TVM's own runtime gives for the serving scenario of llm_scenario.py:

    python make_llm_models.py OUT_DIR        (with the full apache-tvm==0.27.0.post1 wheel)

OUT/<model>/{lib.so, params/, config.json, reference.json}. The models vary what the cache must
handle: grouped-query and multi-head attention, tied embeddings, page sizes 16, 8 and 4, a
cache-wide sliding window with attention sinks, per-layer sliding windows (`mha_sliding`), and
float16.
"""

import json
import os
import sys

from llm_model import Cfg, build
from llm_scenario import run

MODELS = [
    (Cfg("gqa_p16"), {}),
    (Cfg("mha_tied_p8", kv_heads=4, tie=True, page_size=8), {"page_size": 8}),
    (Cfg("gqa3_p4", layers=3, heads=6, kv_heads=2, head_dim=8, hidden=48, theta=500000.0, page_size=4),
     {"page_size": 4, "capacity": 600}),
    (Cfg("sliding_p8", page_size=8), {"page_size": 8, "sliding": True, "window": [24, 4], "long_decode": 20}),
    (Cfg("layer_sliding_p16", layers=2, layer_kinds=["mha_sliding", "mha"], layer_window=10), {}),
    (Cfg("f16_p16", dtype="float16"), {}),
]


def main(out):
    os.makedirs(out, exist_ok=True)
    made = []
    for cfg, scenario in MODELS:
        d = os.path.join(out, cfg.name)
        build(cfg, d)
        c = json.load(open(os.path.join(d, "config.json")))
        c["scenario"] = scenario
        json.dump(c, open(os.path.join(d, "config.json"), "w"), indent=1)
        with open(os.path.join(d, "reference.json"), "w") as f:
            json.dump(run(d), f)
        made.append(cfg.name)
        print("made", cfg.name, flush=True)
    json.dump({"models": made}, open(os.path.join(out, "models.json"), "w"))


if __name__ == "__main__":
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    main(sys.argv[1])
