#!/usr/bin/env bash
# The LLM engine (issue 32): a model directory made from ../shared/fixtures-llm/llama_tiny
# (tests/python/llm_server/make_model_dir.py: a byte-level tokenizer.json made with PyPI's
# `tokenizers`, an mlc-chat-config.json), then the engine's tests (cargo test -p tvm-llm),
# `tvmrt generate` giving expected.json's greedy tokens for both prompts, and `tvmrt serve`
# under the real `openai` client (tests/python/llm_server/test_openai.py). Installs tokenizers,
# openai and pytest into target/llm-venv. Absent fixtures skip it, except under CI=true.
set -euo pipefail
cd "$(dirname "$0")/.."
fx=../shared/fixtures-llm/llama_tiny
if [ ! -f "$fx/expected.json" ]; then
  if [ "${CI:-}" = true ]; then echo "test-llm-engine: $fx is missing (CI=true)" >&2; exit 1; fi
  echo "test-llm-engine: $fx is missing: skipped"
  exit 0
fi
venv=target/llm-venv
if ! "$venv/bin/python" -c "import tokenizers, openai, pytest" 2>/dev/null; then
  python3 -m venv "$venv"
  "$venv/bin/pip" install -q tokenizers openai pytest
fi
model="$PWD/target/llm-model"
"$venv/bin/python" tests/python/llm_server/make_model_dir.py "$fx" "$model"
export LLM_MODEL_DIR="$model"
echo "== tvm-llm: cargo test (the engine on $model)"
cargo test -p tvm-llm --target-dir target/tools --quiet
cargo build -p tvmrt --release --target-dir target/tools --quiet
tvmrt=target/tools/release/tvmrt
echo "== tvmrt generate: expected.json's greedy tokens"
"$venv/bin/python" - "$tvmrt" "$model" <<'PY'
import json, subprocess, sys
tvmrt, model = sys.argv[1:]
exp = json.load(open(f"{model}/expected.json"))
for prompt, want in zip(exp["prompts"], exp["greedy"]):
    out = subprocess.run([tvmrt, "generate", "--model", model, "--model-lib", f"{model}/lib.so",
                          "--prompt-ids", ",".join(map(str, prompt)), "--max-tokens", str(len(want)),
                          "--temperature", "0", "--ignore-eos", "--print-tokens"],
                         check=True, capture_output=True, text=True, errors="replace").stdout
    got = [int(t) for t in out.split("tokens:")[1].split("\n")[0].split()]
    assert got == want, (got, want)
    assert "time to first token" in out.splitlines()[-1], out
    print("  ", got, out.splitlines()[-1])
PY
echo "== tvmrt serve under the openai client"
TVMRT="$tvmrt" "$venv/bin/python" -m pytest -q -p no:cacheprovider tests/python/llm_server
