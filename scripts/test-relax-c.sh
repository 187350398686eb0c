#!/usr/bin/env bash
# The C example examples/relax_vm.c (tvm-ffi C ABI only) on TVM v0.27 Relax exports: compiles it
# with -Wall -Werror -std=c11, runs it on every model of the fixtures' manifest.json, once
# single-threaded and once with --threads 4, then on bad inputs that must fail cleanly (a non-zero
# status below 128, that is no crash, and an "error:" message).
#
#   scripts/test-relax-c.sh            against include/ and target/release (cargo build --release)
#   scripts/test-relax-c.sh PREFIX     against an installed prefix (PREFIX/include, PREFIX/lib)
#
# Environment:
#   FIXTURES_V027        the fixtures (default: ../shared/fixtures-v0.27 next to the repository,
#                        then /work/shared/fixtures-v0.27). Absent: the test is skipped (exit 0),
#                        except with CI=true, where that is a failure.
#   TVM_RUNTIME_LIB_DIR  where libtvm_runtime.so is without PREFIX (default: target/release)
#   SANITIZE=1           build the example with -fsanitize=address,undefined and run every case
#                        under ASan/LSan/UBSan (a leak fails the run)
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$PWD

fx=${FIXTURES_V027:-}
if [ -z "$fx" ]; then
  for d in "$repo/../shared/fixtures-v0.27" /work/shared/fixtures-v0.27; do
    if [ -f "$d/manifest.json" ]; then fx=$d; break; fi
  done
fi
if [ -z "$fx" ] || [ ! -f "$fx/manifest.json" ]; then
  msg="test-relax-c: no TVM v0.27 fixtures (set FIXTURES_V027, or put them at ../shared/fixtures-v0.27)"
  if [ "${CI:-}" = true ]; then echo "$msg: failing under CI=true" >&2; exit 1; fi
  echo "$msg: skipped"
  exit 0
fi
fx=$(cd "$fx" && pwd)

if [ $# -ge 1 ]; then
  prefix=$(cd "$1" && pwd)
  inc="$prefix/include"
  libdir="$prefix/lib"
else
  inc="$repo/include"
  libdir=${TVM_RUNTIME_LIB_DIR:-$repo/target/release}
fi
if [ ! -f "$libdir/libtvm_runtime.so" ]; then
  echo "test-relax-c: $libdir/libtvm_runtime.so not found (cargo build --release first)" >&2
  exit 1
fi
libdir=$(cd "$libdir" && pwd)

out="$repo/build/relax-c"
mkdir -p "$out"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

flags=(-Wall -Werror -std=c11)
if [ "${SANITIZE:-0}" = 1 ]; then
  flags+=(-g -O1 -fno-omit-frame-pointer -fsanitize=address,undefined -fno-sanitize-recover=undefined)
  export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1}
fi
exe="$out/relax_vm"
echo "== cc ${flags[*]} examples/relax_vm.c ($inc, $libdir)"
cc "${flags[@]}" -I"$inc" examples/relax_vm.c -o "$exe" \
  -L"$libdir" -Wl,-rpath,"$libdir" -ltvm_runtime -lpthread -lm
export LD_LIBRARY_PATH="$libdir${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"

# One line per model: name, file, function, rtol, atol, number of inputs, number of outputs.
models=$(python3 - "$fx/manifest.json" <<'PY'
import json, sys
m = json.load(open(sys.argv[1]))
for name, e in m["models"].items():
    print("\t".join([name, e["file"], e["function"], repr(float(e["rtol"])), repr(float(e["atol"])),
                     str(len(e["inputs"])), str(len(e["outputs"]))]))
PY
)
[ -n "$models" ] || { echo "test-relax-c: no models in $fx/manifest.json" >&2; exit 1; }

fail=0
count=0
while IFS=$'\t' read -r name file func rtol atol nin nout; do
  args=("$fx/$file" "$func" --rtol "$rtol" --atol "$atol")
  for ((k = 0; k < nin; k++)); do args+=(--in "$fx/$name.in.$k.npy"); done
  for ((k = 0; k < nout; k++)); do args+=(--expect "$fx/$name.out.$k.npy"); done
  for mode in single threads; do
    extra=()
    [ "$mode" = threads ] && extra=(--threads 4 --repeat 8)
    echo "== $name ($mode): relax_vm $file $func, $nin input(s), $nout output(s)"
    if "$exe" "${args[@]}" "${extra[@]}"; then count=$((count + 1)); else
      echo "FAIL: $name ($mode)" >&2
      fail=1
    fi
  done
done <<< "$models"

# The bad cases use the first model with inputs (mlp_bound when present).
pick=$(grep -P '^mlp_bound\t' <<< "$models" || true)
[ -n "$pick" ] || pick=$(awk -F'\t' '$6 > 0' <<< "$models" | head -n 1)
IFS=$'\t' read -r name file func rtol atol nin nout <<< "$pick"
ins=()
for ((k = 0; k < nin; k++)); do ins+=(--in "$fx/$name.in.$k.npy"); done
exps=()
for ((k = 0; k < nout; k++)); do exps+=(--expect "$fx/$name.out.$k.npy"); done

# A truncated copy of the model, and .npy files derived from input 0 and output 0: the same
# shape with another dtype, another shape with the same dtype, a truncated file, and output 0
# with its first element changed.
size=$(wc -c < "$fx/$file")
head -c $((size / 2)) "$fx/$file" > "$tmp/truncated.so"
head -c 100 "$fx/$name.in.0.npy" > "$tmp/truncated.npy"
python3 - "$fx/$name.in.0.npy" "$fx/$name.out.0.npy" "$tmp" <<'PY'
import ast, struct, sys
def load(path):
    b = open(path, "rb").read()
    assert b[:6] == b"\x93NUMPY" and b[6] == 1, path
    n = struct.unpack("<H", b[8:10])[0]
    return ast.literal_eval(b[10:10 + n].decode("latin1")), b[10 + n:]
def save(path, descr, shape, data):
    h = repr({"descr": descr, "fortran_order": False, "shape": tuple(shape)})
    h += " " * (63 - (10 + len(h)) % 64) + "\n"
    open(path, "wb").write(b"\x93NUMPY\x01\x00" + struct.pack("<H", len(h)) + h.encode() + data)
hdr, data = load(sys.argv[1])
shape, descr = list(hdr["shape"]), hdr["descr"]
numel = 1
for d in shape: numel *= d
other = "<f8" if descr != "<f8" else "<f4"
save(sys.argv[3] + "/wrong_dtype.npy", other, shape, b"\0" * (numel * int(other[2:])))
wshape = [shape[0] + 1] + shape[1:] if shape else [2]
wnumel = 1
for d in wshape: wnumel *= d
save(sys.argv[3] + "/wrong_shape.npy", descr, wshape, b"\0" * (wnumel * int(descr[2:])))
hdr, data = load(sys.argv[2])
assert hdr["descr"] == "<f4", hdr
v = struct.unpack("<f", data[:4])[0] + 1.0
save(sys.argv[3] + "/wrong_expect.npy", "<f4", hdr["shape"], struct.pack("<f", v) + data[4:])
PY

# expect_failure DESCRIPTION ARGS...: a non-zero status that is not a signal, and "error:".
expect_failure() {
  local what=$1 rc=0
  shift
  "$exe" "$@" > "$tmp/out.txt" 2>&1 || rc=$?
  if [ "$rc" -eq 0 ] || [ "$rc" -ge 128 ] || ! grep -q "error:" "$tmp/out.txt" ||
    grep -q "Sanitizer" "$tmp/out.txt"; then
    echo "FAIL: bad case '$what' (status $rc):" >&2
    cat "$tmp/out.txt" >&2
    fail=1
    return
  fi
  count=$((count + 1))
  echo "== bad case ($what): status $rc: $(grep -m 1 "error:" "$tmp/out.txt")"
}
expect_failure "missing model file" "$tmp/no-such-model.so" "$func" "${ins[@]}"
expect_failure "truncated model" "$tmp/truncated.so" "$func" "${ins[@]}"
expect_failure "one input too many" "$fx/$file" "$func" "${ins[@]}" --in "$fx/$name.in.0.npy"
expect_failure "no inputs" "$fx/$file" "$func"
expect_failure "input 0 of the wrong dtype" "$fx/$file" "$func" --in "$tmp/wrong_dtype.npy" \
  "${ins[@]:2}"
expect_failure "input 0 of the wrong shape" "$fx/$file" "$func" --in "$tmp/wrong_shape.npy" \
  "${ins[@]:2}"
expect_failure "unknown function" "$fx/$file" no_such_function "${ins[@]}"
expect_failure "missing input file" "$fx/$file" "$func" --in "$tmp/no-such-input.npy"
expect_failure "truncated .npy" "$fx/$file" "$func" --in "$tmp/truncated.npy"
expect_failure "wrong expected output" "$fx/$file" "$func" "${ins[@]}" \
  --expect "$tmp/wrong_expect.npy" "${exps[@]:2}"
expect_failure "wrong expected output, 4 threads" "$fx/$file" "$func" "${ins[@]}" \
  --expect "$tmp/wrong_expect.npy" "${exps[@]:2}" --threads 4

if [ "$fail" -ne 0 ]; then
  echo "test-relax-c: FAILED" >&2
  exit 1
fi
echo "test-relax-c: all $count checks passed (fixtures $fx${SANITIZE:+, SANITIZE=$SANITIZE})"
