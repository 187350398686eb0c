#!/usr/bin/env bash
# Side-by-side benchmarks with ../shared/tools/rtprobe.c: builds the probe against our headers
# and runs each measurement against our library and, when REF_LIB_DIR names a directory with
# TVM's own libtvm_runtime.so (built by hand from v0.8.0), against it in the same run (or
# REF_TAG=before with an earlier build of this library). Prints medians of alternating processes. Usage: [REF_LIB_DIR=...] [RUNS=5] scripts/bench.sh [call|launch|idle|op|graph|byoc|load|cpp|peak|where|size ...]
# (cpp: the C++ runtime API's costs over the C API, benches/cpp_api.cpp; ours only.)
# Serving figures (issue 17) come from benches/serving.rs: scripts/bench.sh rss|share|serve.
set -euo pipefail
cd "$(dirname "$0")/.."
FIX="${TVM_FIXTURES:-$PWD/../shared/fixtures}"
PROBE_SRC="${PROBE_SRC:-$PWD/../shared/tools/rtprobe.c}"
RUNS="${RUNS:-5}"
cargo build --release --quiet
mkdir -p build/bench
cc -O2 -Iinclude "$PROBE_SRC" -o build/bench/rtprobe -Ltarget/release -ltvm_runtime -lm
libs=("ours:$PWD/target/release")
[ -n "${REF_LIB_DIR:-}" ] && libs+=("${REF_TAG:-tvm}:$REF_LIB_DIR")

median() { sort -g | awk '{a[NR]=$1} END {print (NR%2) ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2}'; }

run() { # name env... -- args...
  local name=$1; shift
  local envs=()
  while [ "$1" != "--" ]; do envs+=("$1"); shift; done; shift
  # Processes alternate between the libraries (the machine's speed drifts between runs).
  local -A vals=()
  for _ in $(seq "$RUNS"); do
    for l in "${libs[@]}"; do
      local tag=${l%%:*} dir=${l#*:}
      vals[$tag]+="$(cd "$FIX" && env "${envs[@]}" LD_LIBRARY_PATH="$dir" ${WRAP:-} "$PROBE" "$@" | awk -v m="${METRIC:-}" 'm == "" || $1 == m {print $2}' | head -1)"$'\n'
    done
  done
  for l in "${libs[@]}"; do
    local tag=${l%%:*}
    printf '%-28s %-5s %s\n' "$name" "$tag" "$(printf '%s' "${vals[$tag]}" | median)"
  done
}
PROBE="$PWD/build/bench/rtprobe"
[ -d "$FIX" ] || { echo "fixtures not found at $FIX"; exit 1; }
what=("$@"); [ ${#what[@]} -eq 0 ] && what=(call launch)
for w in "${what[@]}"; do
  case $w in
    call) run "call_ns" -- call 1000000 ;;
    launch) run "launch_ns(2 threads)" TVM_NUM_THREADS=2 -- launch 100000
            run "launch_ns(default)" -u TVM_NUM_THREADS -u OMP_NUM_THREADS -- launch 100000 ;;
    idle) run "idle_cpu_ms(2 threads)" TVM_NUM_THREADS=2 -- idle 10000 ;;
    op) for t in 1 2; do METRIC=op_us run "matmul_us($t threads)" TVM_NUM_THREADS=$t -- op "$FIX/matmul_packed.so" matmul_packed 50 \
          "$FIX/matmul_packed.A.npy" "$FIX/matmul_packed.B.npy" "$FIX/matmul_packed.C.npy"; done ;;
    graph) for m in resnet18 mobilenet; do
             for metric in load_ms create_ms run_ms; do
               METRIC=$metric run "${m}_$metric(2 threads)" TVM_NUM_THREADS=2 -- graph "$FIX/$m.so" "$FIX/$m.input.data.npy" "$FIX/$m.output.0.npy" 20
             done
           done ;;
    byoc) for m in cnn_dnnl cnn; do for metric in load_ms create_ms run_ms; do  # cnn: the same model without BYOC
            METRIC=$metric run "${m}_$metric(2 threads)" TVM_NUM_THREADS=2 -- graph "$FIX/$m.so" "$FIX/$m.input.data.npy" "$FIX/cnn.output.0.npy" 200
          done; done ;;
    load) run "load_add_one_ms" METRIC=load_ms -- op "$FIX/add_one.so" add_one 1 "$FIX/add_one.A.npy" "$FIX/add_one.B.npy" ;;
    cpp) c++ -O2 -std=c++17 -Iinclude benches/cpp_api.cpp -o build/bench/cpp_api -Ltarget/release -ltvm_runtime
         for _ in $(seq "$RUNS"); do LD_LIBRARY_PATH="$PWD/target/release" build/bench/cpp_api; done |
           awk '{v[$1] = v[$1] " " $2} END {for (k in v) print k, v[k]}' | sort |
           while read -r k vals; do printf '%-28s %-5s %s\n' "$k" ours "$(tr ' ' '\n' <<<"$vals" | median)"; done ;;
    peak) for m in resnet18 mobilenet; do  # peak resident set of rtprobe graph (load, create, 3 runs)
            WRAP="/usr/bin/time -o /dev/stdout -f peak_rss_kb\\t%M" METRIC=peak_rss_kb run "${m}_peak_rss_kb(2 threads)" \
              TVM_NUM_THREADS=2 -- graph "$FIX/$m.so" "$FIX/$m.input.data.npy" "$FIX/$m.output.0.npy" 3
          done ;;
    where)  # where a 2-thread model run spends its time: scheduler events per run, CPU by library
      command -v perf >/dev/null 2>&1 || { echo "where: needs perf (apt-get install linux-perf)"; continue; }
      perfdata="$PWD/build/bench/perf.data"
      for m in resnet18 mobilenet; do
        for l in "${libs[@]}"; do
          tag=${l%%:*} dir=${l#*:}
          args=(graph "$FIX/$m.so" "$FIX/$m.input.data.npy" "$FIX/$m.output.0.npy" 20)
          ev=task-clock,context-switches,cpu-migrations
          perf stat -e syscalls:sys_enter_futex true >/dev/null 2>&1 && ev+=",syscalls:sys_enter_futex,syscalls:sys_enter_sched_yield"
          printf '%-10s %-5s per run (21 runs): ' "$m" "$tag"
          (cd "$FIX" && TVM_NUM_THREADS=2 LD_LIBRARY_PATH="$dir" perf stat -x, -e "$ev" "$PROBE" "${args[@]}" 2>&1 >/dev/null) |
            awk -F, '$1 ~ /^[0-9.]+$/ {printf "%s %.1f  ", $3, $1 / 21} END {print ""}' || true
          (cd "$FIX" && TVM_NUM_THREADS=2 LD_LIBRARY_PATH="$dir" perf record -q -e cpu-clock -F 5000 -o "$perfdata" \
             "$PROBE" "${args[@]}" >/dev/null 2>&1)
          perf report -i "$perfdata" --no-children --sort dso --stdio 2>/dev/null | awk '/%/ && n++ < 5 {print "    " $0}' || true
        done
      done ;;
    size)  # stripped library sizes (default and minimal build, TVM's) and where the bytes go
      strip_size() { cp "$1" build/bench/s.so && strip build/bench/s.so && stat -c %s build/bench/s.so; }
      ref=""
      [ -n "${REF_LIB_DIR:-}" ] && ref=$(strip_size "$REF_LIB_DIR/libtvm_runtime.so") && echo "tvm: $ref bytes stripped"
      for build in default minimal; do
        flags=(); [ "$build" = minimal ] && flags=(--no-default-features)
        CARGO_TARGET_DIR="$PWD/target/size-$build" cargo build --release --lib --quiet "${flags[@]}" \
          --config 'profile.release.strip=false'
        lib="target/size-$build/release/libtvm_runtime.so"
        n=$(strip_size "$lib")
        awk -v b="$build" -v n="$n" -v r="${ref:-0}" \
          'BEGIN { printf "%s: %d bytes stripped (%.0f KiB)%s\n", b, n, n / 1024, (r > 0 ? sprintf(", %.3fx tvm", n / r) : "") }'
        python3 scripts/size_report.py "$lib" | sed 's/^/  /'
      done ;;
    rss|share|serve)  # benches/serving.rs: peak RSS by form, second process, concurrent executors
      TVM_REF_LIB="${REF_LIB_DIR:+$REF_LIB_DIR/libtvm_runtime.so}" cargo bench --quiet --bench serving -- "$w" ;;
  esac
done
