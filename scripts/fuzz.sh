#!/usr/bin/env bash
# Builds and runs the coverage-guided fuzz targets of fuzz/ (libFuzzer through libfuzzer-sys, on
# the stable toolchain: SanitizerCoverage passes enabled by RUSTFLAGS, no sanitizer, no
# cargo-fuzz needed).
#
#   scripts/fuzz.sh build                 build every target (target/fuzz/.../release/<target>)
#   scripts/fuzz.sh run SECONDS [T...]    run each target (default: all) for SECONDS on a copy of
#                                         its committed seeds (fuzz/corpus/<target>) plus its
#                                         regression inputs (fuzz/regressions/<target>); fails on
#                                         a crash, a hang (FUZZ_TIMEOUT s per input, default 10),
#                                         an RSS over FUZZ_RSS_MB (default 2048) or a single
#                                         allocation over 2 GiB. Findings land in
#                                         target/fuzz/run/artifacts/<target>/, logs beside them.
#   scripts/fuzz.sh list                  the targets
#
# FUZZ_JOBS=N runs N processes per target (libFuzzer -fork, shared corpus), for long campaigns;
# FUZZ_KEEP_CORPUS=1 (campaigns) works in target/fuzz/campaign/ instead and keeps the grown
# corpus there between runs; without it each run starts from the committed seeds.
set -euo pipefail
cd "$(dirname "$0")/.."

triple=$(rustc -vV | sed -n 's/^host: //p')
tdir="$PWD/target/fuzz"
bindir="$tdir/$triple/release"
targets=$(sed -n 's/^name = "\(.*\)"$/\1/p' fuzz/Cargo.toml | grep -v '^tvm-runtime-fuzz$')

build() {
  # The flags cargo-fuzz passes for `-s none`, plus debug assertions and overflow checks so that
  # arithmetic overflow on hostile sizes is a finding. `--target` keeps them off build scripts.
  RUSTFLAGS="-Cpasses=sancov-module -Cllvm-args=-sanitizer-coverage-level=4 \
-Cllvm-args=-sanitizer-coverage-inline-8bit-counters -Cllvm-args=-sanitizer-coverage-pc-table \
-Cllvm-args=-sanitizer-coverage-trace-compares --cfg fuzzing -Cdebug-assertions -Coverflow-checks" \
  CARGO_PROFILE_RELEASE_LTO=false CARGO_PROFILE_RELEASE_CODEGEN_UNITS=16 CARGO_PROFILE_RELEASE_DEBUG=line-tables-only \
    cargo build --quiet --release -p tvm-runtime-fuzz --bins --target "$triple" --target-dir "$tdir"
}

run() {
  local secs=$1; shift
  local list=("$@")
  [ ${#list[@]} -gt 0 ] || list=($targets)
  local failed=() state="$tdir/run"
  [ "${FUZZ_KEEP_CORPUS:-0}" = 1 ] && state="$tdir/campaign"
  for t in "${list[@]}"; do
    local corpus="$state/corpus/$t" art="$state/artifacts/$t"
    [ "${FUZZ_KEEP_CORPUS:-0}" = 1 ] || rm -rf "$corpus"
    mkdir -p "$corpus" "$art"
    local seeds=()
    for d in "fuzz/corpus/$t" "fuzz/regressions/$t"; do [ -d "$d" ] && seeds+=("$d"); done
    local par=()
    [ -n "${FUZZ_JOBS:-}" ] && par=(-fork="$FUZZ_JOBS" -ignore_crashes=0)
    echo "== fuzz $t (${secs}s)"
    local log="$state/$t.log"
    if RUST_BACKTRACE=1 "$bindir/$t" "$corpus" "${seeds[@]}" "${par[@]}" -max_total_time="$secs" \
      -timeout="${FUZZ_TIMEOUT:-10}" -rss_limit_mb="${FUZZ_RSS_MB:-2048}" -malloc_limit_mb="${FUZZ_RSS_MB:-2048}" \
      -max_len="${FUZZ_MAX_LEN:-1048576}" -print_final_stats=1 -artifact_prefix="$art/" >"$log" 2>&1; then
      grep -E '^(#[0-9]+.*DONE|stat::number_of_executed_units|stat::peak_rss_mb)' "$log" | tr '\n' ' ' || true
      echo
    else
      failed+=("$t")
      tail -n 60 "$log"
      echo "!! fuzz target $t failed; the input is in $art/ (log: $log)"
    fi
  done
  if [ ${#failed[@]} -gt 0 ]; then
    echo "fuzzing failed: ${failed[*]}"
    return 1
  fi
}

case "${1:-}" in
  build) build ;;
  run) shift; secs=${1:?seconds}; shift; build; run "$secs" "$@" ;;
  list) echo "$targets" ;;
  *) echo "usage: $0 build | run SECONDS [TARGET...] | list" >&2; exit 2 ;;
esac
