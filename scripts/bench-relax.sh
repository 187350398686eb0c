#!/usr/bin/env bash
# Side-by-side benchmarks of the Relax VM (issue 25): TVM v0.27's own Python package,
# runtime-only, on this library and on the wheel's own libtvm_runtime.so + libtvm_ffi.so,
# processes alternating, ROUNDS rounds (benches/relax_vm_bench.py). Prints the median of each
# metric per runtime and the median of the per-round ratios ours/TVM. `topk` is timed for ours
# only (TVM's runtime-only build cannot run it) and left out of the sum.
#   [ROUNDS=5] scripts/bench-relax.sh
set -euo pipefail
cd "$(dirname "$0")/.."
ROUNDS="${ROUNDS:-5}"
fixtures="${FIXTURES_V027:-$PWD/../shared/fixtures-v0.27}"
cargo build --release --quiet
venv="$PWD/target/tvm27-venv"
# The venv of scripts/test-tvm-python.sh (made on first use; pytest only collects here).
./scripts/test-tvm-python.sh "$venv" --collect-only >/dev/null
ours=("env" "TVM_USE_RUNTIME_LIB=1" "TVM_LIBRARY_PATH=$venv/tvm-runtime-lib" "$venv/bin/python")
ref="$PWD/target/tvm27-ref"
if [ ! -x "$ref/bin/python" ]; then
  python3 -m venv "$ref"
  "$ref/bin/pip" install -q "apache-tvm==0.27.0.post1" numpy
fi
theirs=("env" "TVM_USE_RUNTIME_LIB=1" "$ref/bin/python")
mkdir -p build/bench
if [ ! -f build/bench/cnn.so ]; then
  "$ref/bin/python" benches/relax_make_cnn.py build/bench
fi
out=build/bench/relax.txt
: >"$out"
for r in $(seq "$ROUNDS"); do
  "${ours[@]}" benches/relax_vm_bench.py "$fixtures" | sed "s/^/ours $r /" >>"$out"
  "${theirs[@]}" benches/relax_vm_bench.py "$fixtures" topk | sed "s/^/tvm $r /" >>"$out"
  "${ours[@]}" benches/relax_vm_bench.py --rss build/bench/cnn.so build/bench/cnn.in.0.npy | sed "s/^/ours $r /" >>"$out"
  "${theirs[@]}" benches/relax_vm_bench.py --rss build/bench/cnn.so build/bench/cnn.in.0.npy | sed "s/^/tvm $r /" >>"$out"
done
python3 - "$out" <<'PY'
import collections, statistics, sys
v = collections.defaultdict(dict)
for line in open(sys.argv[1]):
    who, r, metric, x = line.split()
    v[(who, metric)][int(r)] = float(x)
metrics = sorted({m for (_, m) in v})
print(f"{'metric':22s} {'ours':>10s} {'tvm':>10s} {'ratio':>7s}")
for m in metrics:
    o, t = v[("ours", m)], v.get(("tvm", m), {})
    ratios = [o[r] / t[r] for r in o if r in t]
    print(f"{m:22s} {statistics.median(o.values()):10.3f} "
          + (f"{statistics.median(t.values()):10.3f} {statistics.median(ratios):7.2f}" if ratios else f"{'-':>10s} {'-':>7s}"))
calls = [m for m in metrics if m.startswith("call_") and ("tvm", m) in v]
rounds = sorted(set.intersection(*(set(v[("ours", m)]) & set(v[("tvm", m)]) for m in calls)))
tot = [sum(v[("ours", m)][r] for m in calls) / sum(v[("tvm", m)][r] for m in calls) for r in rounds]
print(f"{'all calls together':22s} {'':10s} {'':10s} {statistics.median(tot):7.2f}")
PY
