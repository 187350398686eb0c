#!/usr/bin/env bash
# The CUDA check (issue 26): every CUDA test and bench of the project, from a prebuilt bundle
# (scripts/gpu-bundle.sh), against NVIDIA's real driver (libcuda.so.1) or, with --simulator, the
# simulated driver of tools/cudasim. Builds nothing; meant to finish in well under 8 minutes.
#
#   scripts/gpu-check.sh [--simulator] [--bundle DIR]      (run from anywhere; DIR: build/gpu-bundle)
#
# Runs: tests/cuda.rs (device API, memory, streams, events, copies, pinned memory, workspaces,
# a second device, an out-of-bounds kernel reported with the context still usable by the next
# process, TVM v0.8's mlp2_nvptx.so against its manifest), ctests/cuda.c, the Python CUDA test,
# the Relay VM's CUDA test, the simulator's kernel tests on this driver, mlp2_nvptx.so through
# tvmrt (v0.8; v0.18 where the fixtures have one), then benches/gpu.rs beside TVM's own CUDA
# runtime (bundle's tvm/v*/; not on the simulator: TVM's libcudart cannot use it).
# Prints one table and writes it as JSON to $OUT/summary.json ($OUT: build/gpu-check[-sim]).
# Exit status 1 when a check fails; a check that cannot run here is "skip" with its reason.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
mode=real
B="$root/build/gpu-bundle"
while [ $# -gt 0 ]; do
  case $1 in
    --simulator) mode=simulator ;;
    --bundle) B=$(cd "$2" && pwd); shift ;;
    *) echo "usage: $0 [--simulator] [--bundle DIR]" >&2; exit 2 ;;
  esac
  shift
done
[ -f "$B/BUNDLE" ] || { echo "no bundle at $B: build it with scripts/gpu-bundle.sh" >&2; exit 2; }
if [ "$mode" = simulator ]; then OUT="${OUT:-$root/build/gpu-check-sim}"; else OUT="${OUT:-$root/build/gpu-check}"; fi
rm -rf "$OUT/logs" "$OUT/tmp"
mkdir -p "$OUT/logs" "$OUT/tmp"
rows="$OUT/rows.tsv"
benches="$OUT/bench.tsv"
: >"$rows"
: >"$benches"
t_start=$(date +%s)

# The environment every check shares: fixtures and sources from the bundle and this tree.
export TVMRT_SOURCE_DIR="$root" TVMRT_SHARED_DIR="$B/shared" TVMRT_TEST_TMPDIR="$OUT/tmp"
export TVM_FIXTURES="$B/shared/fixtures" TVM_LIBRARY_PATH="$B/lib" TVM_RT_LIB="$B/lib/libtvm_runtime.so"
export LD_LIBRARY_PATH="$B/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export TVMRT_REQUIRE_CUDA=1  # the tests fail instead of skipping when cuda(0) is missing
if [ "$mode" = simulator ]; then
  export TVM_CUDA_LIBRARY="$B/lib/libcudasim.so" CUDASIM_TEST_DRIVER="$B/lib/libcudasim.so"
  driver="cudasim (simulated driver, $TVM_CUDA_LIBRARY)"
  # Without a GPU's JIT, NVIDIA's assembler checks every PTX module the tests load (as the
  # driver would get it) for an H100 (sm_90): scripts/cuda-wheels.sh fetched it.
  ptxas="${TVMRT_PTXAS:-$root/build/tvm-cuda/cuda/nvidia/cuda_nvcc/bin/ptxas}"
  [ -x "$ptxas" ] && export TVMRT_PTXAS="$ptxas" TVMRT_PTXAS_ARCH="${TVMRT_PTXAS_ARCH:-sm_90}"
else
  unset TVM_CUDA_LIBRARY CUDASIM_DEVICES
  # NVIDIA's driver by its soname, as the runtime opens it.
  drvpath=$(ldconfig -p 2>/dev/null | awk '/libcuda\.so\.1 / {print $NF; exit}')
  [ -n "$drvpath" ] || drvpath=libcuda.so.1
  export CUDASIM_TEST_DRIVER=libcuda.so.1
  driver="NVIDIA libcuda.so.1 ($drvpath)"
  if command -v nvidia-smi >/dev/null; then
    driver+="; $(nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>/dev/null | paste -sd';' || true)"
  fi
fi

row() { # check status detail seconds
  printf '%s\t%s\t%s\t%s\n' "$1" "$2" "${3//$'\t'/ }" "$4" >>"$rows"
  printf '  %-44s %-5s %s\n' "$1" "$2" "$3"
}

# run NAME LOG CMD...: runs CMD with a time limit, records pass/fail with the log's last line.
run() {
  local name=$1 log="$OUT/logs/$2" t0=$SECONDS rc=0; shift 2
  timeout "${LIMIT:-240}" "$@" >"$log" 2>&1 || rc=$?
  local detail
  detail=$( { grep -E 'test result:|checks,|passed|failed|matches|differ' "$log" || true; } | tail -1 | cut -c1-120)
  if [ $rc -eq 0 ] && grep -Eq '^SKIP|SKIP:|no CUDA driver or GPU' "$log"; then
    row "$name" fail "a part skipped: $(grep -Em1 'SKIP|no CUDA driver' "$log" | cut -c1-100)" $((SECONDS - t0))
  elif [ $rc -eq 0 ]; then
    row "$name" pass "${detail:-ok}" $((SECONDS - t0))
  else
    [ $rc -eq 124 ] && detail="timed out after ${LIMIT:-240} s"
    row "$name" fail "exit $rc: ${detail:-see logs/$(basename "$log")}" $((SECONDS - t0))
  fi
}

echo "== CUDA check ($mode): driver $driver"
echo "   bundle $B: $(head -1 "$B/BUNDLE")"

# Does the runtime see the device at all? (Everything below needs it.)
cat >"$OUT/tmp/probe.py" <<'EOF'
import ctypes, os, sys
lib = ctypes.CDLL(os.path.join(os.environ["TVM_LIBRARY_PATH"], "libtvm_runtime.so"), ctypes.RTLD_GLOBAL)
lib.TVMGetLastError.restype = ctypes.c_char_p
class V(ctypes.Union):
    _fields_ = [("i", ctypes.c_int64), ("d", ctypes.c_double), ("h", ctypes.c_void_p), ("s", ctypes.c_char_p)]
f = ctypes.c_void_p()
assert lib.TVMFuncGetGlobal(b"runtime.GetDeviceAttr", ctypes.byref(f)) == 0
def attr(dev, kind):
    args = (V * 3)(V(i=2), V(i=dev), V(i=kind)); codes = (ctypes.c_int * 3)(0, 0, 0)
    rv, rc = V(), ctypes.c_int()
    if lib.TVMFuncCall(f, args, codes, 3, ctypes.byref(rv), ctypes.byref(rc)) != 0:
        return None
    return rv.s.decode() if rc.value == 11 else rv.i
n = 0
while n < 16 and attr(n, 0) == 1:
    n += 1
if n == 0:
    h = ctypes.c_void_p(); shape = (ctypes.c_int64 * 1)(1)
    lib.TVMArrayAlloc(shape, 1, 2, 32, 1, 2, 0, ctypes.byref(h))
    print(0, lib.TVMGetLastError().decode().splitlines()[0][:150])
else:
    print(n, attr(0, 5), attr(0, 4))
EOF
probe=$(python3 "$OUT/tmp/probe.py" 2>"$OUT/logs/probe.log" || true)
ndev=${probe%% *}
if [ "${ndev:-0}" -ge 1 ] 2>/dev/null; then
  row "cuda devices seen by the runtime" pass "$ndev: ${probe#* }" 0
else
  row "cuda devices seen by the runtime" fail "none: ${probe#* }$(tail -1 "$OUT/logs/probe.log" 2>/dev/null)" 0
fi

echo "== tests"
# tests/cuda.rs, one row per test (the binary runs once).
t0=$SECONDS; rc=0
timeout 300 "$B/tests/cuda" --test-threads=4 >"$OUT/logs/rust-cuda.log" 2>&1 || rc=$?
while read -r name result; do
  st=pass; [ "$result" = ok ] || st=fail
  row "tests/cuda.rs $name" $st "$result" 0
done < <(sed -n 's/^test \([a-z0-9_]*\) \.\.\. \([a-zA-Z]*\).*/\1 \2/p' "$OUT/logs/rust-cuda.log" | grep -v '^child_')
if grep -q 'SKIP' "$OUT/logs/rust-cuda.log"; then
  row "tests/cuda.rs (skips)" fail "$(grep -m1 SKIP "$OUT/logs/rust-cuda.log" | cut -c1-100)" 0
fi
row "tests/cuda.rs (all)" "$([ $rc -eq 0 ] && echo pass || echo fail)" \
  "$(grep 'test result' "$OUT/logs/rust-cuda.log" | tail -1 | cut -c1-90)" $((SECONDS - t0))

if [ "$mode" = simulator ]; then
  row "multi-device (mlp2_nvptx on cuda(1))" pass "in gpu_model_on_device_1 above, on 2 simulated devices (CUDASIM_DEVICES=2)" 0
elif [ "${ndev:-0}" -ge 2 ] 2>/dev/null; then
  row "multi-device (mlp2_nvptx on cuda(1))" pass "in gpu_model_on_device_1 above, $ndev GPUs" 0
else
  row "multi-device (mlp2_nvptx on cuda(1))" skip "one GPU here (gpu_model_on_device_1 checked device 0 only)" 0
fi

run "ctests/cuda.c (mlp2_nvptx, stream, pinned)" ctest-cuda "$B/bin/ctest-cuda"

if python3 -c "import numpy, pytest" 2>/dev/null; then
  run "tests/python/test_cuda.py" python-cuda python3 -m pytest -q -p no:cacheprovider tests/python/test_cuda.py
else
  row "tests/python/test_cuda.py" skip "python3 lacks numpy or pytest on this machine" 0
fi

if command -v cc >/dev/null; then
  run "Relay VM on cuda (vm_programs)" vm-cuda "$B/tests/vm_programs" --exact cuda_kernels_device_copies_and_storage
else
  row "Relay VM on cuda (vm_programs)" skip "no C compiler here (the test builds its VM library with cc)" 0
fi

for t in kernels instructions mlp2; do
  run "cudasim's $t tests on this driver" "cudasim-$t" "$B/tests/cudasim-$t" --test-threads=1
done

if [ "$mode" = real ]; then
  : # the driver's JIT compiled every module above
elif [ -n "${TVMRT_PTXAS:-}" ]; then
  row "PTX of the tests accepted by ptxas -arch=$TVMRT_PTXAS_ARCH" pass \
    "$(find "$OUT/tmp" -name '*.cubin' | wc -l) modules (tests/cuda.rs incl. TVM's mlp2 PTX as the driver gets it, cudasim's kernel tests)" 0
elif [ "${CI:-}" = true ]; then
  row "PTX of the tests accepted by ptxas" fail "no ptxas at $ptxas (scripts/cuda-wheels.sh fetches it)" 0
else
  row "PTX of the tests accepted by ptxas" skip "no ptxas at $ptxas (scripts/cuda-wheels.sh fetches it)" 0
fi

for v in fixtures fixtures-v0.18; do
  label="mlp2_nvptx.so of ${v#fixtures-}"; [ "$v" = fixtures ] && label="mlp2_nvptx.so of v0.8"
  if [ -f "$B/shared/$v/mlp2_nvptx.so" ]; then
    run "$label via tvmrt on cuda:0" "tvmrt-$v" "$B/bin/tvmrt" run "$B/shared/$v/mlp2_nvptx.so" --device cuda:0 \
      --input "data=$B/shared/$v/mlp2_nvptx.input.data.npy" --expect "$B/shared/$v/mlp2.output.0.npy" --rtol 1e-4 --atol 1e-4
  else
    row "$label via tvmrt on cuda:0" skip "no mlp2_nvptx.so in ../shared/$v (no CUDA export of that version yet)" 0
  fi
done

if [ -f "$B/shared/fixtures/mlp2_nvptx_libdevice.so" ]; then
  run "mlp2_nvptx_libdevice.so (__nv_fmaf defined) via tvmrt" tvmrt-libdevice "$B/bin/tvmrt" run \
    "$B/shared/fixtures/mlp2_nvptx_libdevice.so" --device cuda:0 --input "data=$B/shared/fixtures/mlp2_nvptx.input.data.npy" \
    --expect "$B/shared/fixtures/mlp2.output.0.npy" --rtol 1e-4 --atol 1e-4
else
  row "mlp2_nvptx_libdevice.so (__nv_fmaf defined) via tvmrt" fail "not in the bundle (scripts/gpu-bundle.sh makes it)" 0
fi

echo "== benches (benches/gpu.rs, beside TVM's own CUDA runtime)"
anchors=()
for a in "$B"/tvm/v*/lib/libtvm_runtime.so; do [ -f "$a" ] && anchors+=("$a"); done
if [ "$mode" = simulator ]; then
  row "TVM's own CUDA runtime (anchor)" skip "TVM's runtime reaches the driver through libcudart, which the simulator cannot serve (tools/cudasim/README.md); ${#anchors[@]} anchor(s) carried" 0
  anchors=()
elif [ ${#anchors[@]} -eq 0 ]; then
  row "TVM's own CUDA runtime (anchor)" skip "none in the bundle (scripts/build-tvm-cuda.sh before scripts/gpu-bundle.sh)" 0
fi
bench() { # label ref-lib-or-empty
  local t0=$SECONDS rc=0 log="$OUT/logs/bench-$1.log"
  # The model: mlp2_nvptx.so with __nv_fmaf defined in its PTX, which TVM's runtime can load too.
  BENCH_DEVICE=cuda ROUNDS="${ROUNDS:-5}" TVM_REF_LIB="$2" BENCH_MODEL="$B/shared/fixtures/mlp2_nvptx_libdevice.so" \
    timeout 240 "$B/bin/bench-gpu" >"$log" 2>&1 || rc=$?
  [ -n "$2" ] || sed -i '/^BENCH .*\ttvm\t/d' "$log"
  sed -n 's/^BENCH //p' "$log" | awk -F'\t' -v ref="$1" 'BEGIN{OFS="\t"} {if ($2=="tvm") $2=ref; print}' >>"$benches"
  # Ours failing is a failure; TVM's runtime failing is reported (its cells say why).
  local st=pass ours_failed ref_failed
  ours_failed=$(awk -F'\t' '$2 == "ours" && $3 == "failed" {printf "%s ", $1}' <(sed -n 's/^BENCH //p' "$log"))
  ref_failed=$(awk -F'\t' '$2 == "tvm" && $3 == "failed" {printf "%s ", $1}' <(sed -n 's/^BENCH //p' "$log"))
  { [ $rc -eq 0 ] && [ -z "$ours_failed" ]; } || st=fail
  row "bench ($1)" $st "exit $rc, $(grep -c $'^BENCH .*\t[0-9.]*\t' "$log") figures${ours_failed:+; ours failed: $ours_failed}${ref_failed:+; TVM failed: $ref_failed}" $((SECONDS - t0))
}
if [ ${#anchors[@]} -eq 0 ]; then
  TVM_REF_LIB= bench ours ""
else
  first=1
  for a in "${anchors[@]}"; do
    v=$(basename "$(dirname "$(dirname "$a")")")
    bench "tvm-$v" "$a"
    # Our figures once: from the first run.
    if [ $first -eq 0 ]; then
      awk -F'\t' -v v="tvm-$v" '!($2=="ours" && seen[$1]++)' "$benches" >"$benches.tmp" && mv "$benches.tmp" "$benches"
    fi
    first=0
  done
fi

echo "== summary"
python3 - "$rows" "$benches" "$OUT/summary.json" "$mode" "$driver" "$B" "$(( $(date +%s) - t_start ))" <<'EOF'
import json, sys
rows_p, bench_p, out, mode, driver, bundle, secs = sys.argv[1:]
rows = []
for line in open(rows_p):
    c, st, d, s = line.rstrip("\n").split("\t")
    rows.append({"check": c, "status": st, "detail": d, "seconds": int(s or 0)})
bench = {}
for line in open(bench_p):
    name, lib, val, unit = (line.rstrip("\n").split("\t") + ["", ""])[:4]
    e = bench.setdefault(name, {})
    e[lib] = {"value": float(val), "unit": unit} if val != "failed" else {"failed": unit}
for name, e in bench.items():
    ours = e.get("ours", {}).get("value")
    for lib, v in list(e.items()):
        if lib != "ours" and "value" in v and ours:
            v["ours_over_this"] = round(ours / v["value"], 3)
count = {s: sum(r["status"] == s for r in rows) for s in ("pass", "fail", "skip")}
summary = {"mode": mode, "driver": driver, "bundle": open(bundle + "/BUNDLE").read().splitlines(),
           "seconds": int(secs), "counts": count, "checks": rows, "bench": bench}
json.dump(summary, open(out, "w"), indent=1)
print(f"{'check':<62} {'status':<6} detail")
for r in rows:
    print(f"{r['check'][:62]:<62} {r['status']:<6} {r['detail'][:100]}")
if bench:
    libs = sorted({l for e in bench.values() for l in e}, key=lambda l: (l != "ours", l))
    print()
    print(f"{'bench':<28}" + "".join(f"{l:>18}" for l in libs))
    for name, e in bench.items():
        cells = []
        for l in libs:
            v = e.get(l)
            if v is None: cells.append(f"{'-':>18}")
            elif "failed" in v: cells.append(f"{'failed':>18}")
            else:
                r = f" ({v['ours_over_this']}x)" if "ours_over_this" in v else ""
                cells.append(f"{v['value']:>10.3f} {v['unit']:<4}{r}"[:18].rjust(18))
        print(f"{name:<28}" + "".join(cells))
    for name, e in bench.items():
        for l, v in e.items():
            if "failed" in v:
                print(f"  {name} ({l}) failed: {v['failed'][:150]}")
print(f"\n{mode}: {count['pass']} passed, {count['fail']} failed, {count['skip']} skipped in {secs} s; JSON: {out}")
sys.exit(1 if count["fail"] else 0)
EOF
