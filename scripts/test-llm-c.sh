#!/usr/bin/env bash
# The C example examples/llm_generate.c (tvm-ffi C ABI only) on the LLM fixture
# ../shared/fixtures-llm/llama_tiny: compiled with -Wall -Werror -std=c11, plain and under
# ASan + LSan + UBSan (a leak fails the run); the greedy tokens must equal expected.json's. Then bad
# inputs must fail cleanly (status 1, an "error:" line, no crash): a missing folder, a model
# library without the LLM functions, a damaged config.
#   scripts/test-llm-c.sh      (against include/ and target/release: cargo build --release first)
# FIXTURES_LLM names the fixtures folder; absent, the test is skipped, except under CI=true.
set -euo pipefail
cd "$(dirname "$0")/.."
fx=${FIXTURES_LLM:-../shared/fixtures-llm}
if [ ! -f "$fx/llama_tiny/expected.json" ]; then
  if [ "${CI:-}" = true ]; then echo "test-llm-c: $fx/llama_tiny is missing (CI=true)" >&2; exit 1; fi
  echo "test-llm-c: $fx/llama_tiny is missing: skipped"
  exit 0
fi
fx=$(cd "$fx" && pwd)
lib="$PWD/target/release"
out="$PWD/build/llm-c"
mkdir -p "$out"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
for flavour in plain asan; do
  flags=(-Wall -Werror -std=c11)
  [ $flavour = asan ] && flags+=(-g -O1 -fno-omit-frame-pointer -fsanitize=address,undefined -fno-sanitize-recover=undefined)
  exe="$out/llm_generate-$flavour"
  echo "== cc ${flags[*]} examples/llm_generate.c"
  cc "${flags[@]}" -Iinclude examples/llm_generate.c -o "$exe" -L"$lib" -ltvm_runtime
  export ASAN_OPTIONS=detect_leaks=1
  LD_LIBRARY_PATH="$lib" "$exe" "$fx/llama_tiny" --expect | tee "$tmp/out"
  grep -q "the tokens match expected.json" "$tmp/out"
  fails() { # WHAT ARGS...: must exit 1 with an error message
    local what=$1 rc=0
    shift
    LD_LIBRARY_PATH="$lib" "$exe" "$@" >"$tmp/bad.out" 2>"$tmp/bad.err" || rc=$?
    if [ $rc -ne 1 ] || ! grep -q "error:" "$tmp/bad.err"; then
      echo "test-llm-c: $what: status $rc, expected 1 with an error" >&2
      cat "$tmp/bad.err" >&2
      exit 1
    fi
    echo "   $what: $(head -1 "$tmp/bad.err")"
  }
  fails "missing folder" "$tmp/nothing-here"
  mkdir -p "$tmp/nollm"
  cp "$fx/llama_tiny/config.json" "$fx/llama_tiny/expected.json" "$tmp/nollm/"
  cp -r "$fx/llama_tiny/params" "$tmp/nollm/"
  if [ -f ../shared/fixtures-v0.27/mlp.so ]; then
    cp ../shared/fixtures-v0.27/mlp.so "$tmp/nollm/lib.so"
    fails "a library without the LLM functions" "$tmp/nollm"
  fi
  mkdir -p "$tmp/badcfg"
  cp -r "$fx/llama_tiny/." "$tmp/badcfg/"
  chmod -R u+w "$tmp/badcfg"
  printf '{"hidden": 64, "param_names": [' >"$tmp/badcfg/config.json"
  fails "a truncated config.json" "$tmp/badcfg"
  printf '{"hidden": 64, "param_names": ["no.such.weight"]}' >"$tmp/badcfg/config.json"
  fails "a weight missing from the tensor cache" "$tmp/badcfg"
done
echo "test-llm-c: ok"
