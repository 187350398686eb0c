#!/usr/bin/env bash
# The LLM engine's bench (issue 32), medians of ROUNDS processes:
#  - on the 6-layer model of scripts/bench-llm.sh (hidden 256, vocabulary 4096), through
#    tools/llm/examples/bench_engine.rs: 8 requests of 64 new tokens one after another and all
#    at once (continuous batching), the engine's own share of a decode step at batch 1, and the
#    time to first token of a 64-token prompt against the model's prefill call;
#  - on llama_tiny: `tvmrt generate` of 200 greedy tokens against the same generation written in
#    Python on TVM v0.27's own runtime (MLC's call sequence, as expected.json was made), decode
#    tokens/s, processes alternating.
#   [ROUNDS=5] scripts/bench-engine.sh
set -euo pipefail
cd "$(dirname "$0")/.."
ROUNDS="${ROUNDS:-5}"
ref="${TVM27_REF_VENV:-$PWD/target/tvm27-ref}"
venv=target/llm-venv
"$venv/bin/python" -c "import tokenizers" 2>/dev/null || { python3 -m venv "$venv"; "$venv/bin/pip" install -q tokenizers openai pytest; }
[ -x "$ref/bin/python" ] || { python3 -m venv "$ref"; "$ref/bin/pip" install -q "apache-tvm==0.27.0.post1" "apache-tvm-ffi==0.1.15.post2" numpy; }
cargo build --release -p tvmrt -p tvm-llm --examples --bins --target-dir target/tools --quiet
mkdir -p build/bench
bench_model=build/bench/llm-model
if [ ! -f "$bench_model/.made" ] || [ benches/llm_bench.py -nt "$bench_model/.made" ]; then
  rm -rf "$bench_model"
  "$ref/bin/python" benches/llm_bench.py make "$bench_model" >build/bench/llm-model.log 2>&1 || { cat build/bench/llm-model.log; exit 1; }
  touch "$bench_model/.made"
fi
"$venv/bin/python" tests/python/llm_server/make_model_dir.py "$bench_model" build/bench/llm-dir 1024 512
"$venv/bin/python" tests/python/llm_server/make_model_dir.py ../shared/fixtures-llm/llama_tiny build/bench/tiny-dir
out=build/bench/engine.txt
: >"$out"
prompt=1,5,9,17,33,65,129,200
for _ in $(seq "$ROUNDS"); do
  ./target/tools/release/examples/bench_engine build/bench/llm-dir build/bench/llm-dir/lib.so 1 | sed 's/^/ours /' >>"$out"
  line=$(./target/tools/release/tvmrt generate --model build/bench/tiny-dir --model-lib build/bench/tiny-dir/lib.so \
    --prompt-ids "$prompt" --max-tokens 201 --temperature 0 --ignore-eos | tail -1)
  echo "ours tiny_decode_tok_s $(sed 's/.*decode \([0-9.]*\) tok\/s.*/\1/' <<<"$line")" >>"$out"
  echo "tvm tiny_decode_tok_s $(TVM_USE_RUNTIME_LIB=1 "$ref/bin/python" benches/llm_greedy.py ../shared/fixtures-llm/llama_tiny 200)" >>"$out"
done
median() { sort -g | awk '{a[NR]=$1} END {print (NR%2) ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2}'; }
for name in $(awk '$1 == "ours" {print $2}' "$out" | sort -u); do
  o=$(awk -v n="$name" '$1 == "ours" && $2 == n {print $3}' "$out" | median)
  t=""
  grep -q "^tvm $name " "$out" && t=$(awk -v n="$name" '$1 == "tvm" && $2 == n {print $3}' "$out" | median)
  if [ -n "$t" ]; then
    printf '%-34s %10s   python on TVM 0.27: %10s   ratio %s\n' "$name" "$o" "$t" "$(awk -v o="$o" -v t="$t" 'BEGIN {printf "%.2f", o / t}')"
  else
    printf '%-34s %10s\n' "$name" "$o"
  fi
done
