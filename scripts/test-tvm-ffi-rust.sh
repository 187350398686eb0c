#!/usr/bin/env bash
# The tvm-ffi Rust crate's own tests (issue 33): the tvm-ffi package from crates.io, by default
# 0.1.15-post2 (the crate of apache-tvm-ffi 0.1.15.post2: 367 tests of tests/, unit and doc
# tests, static initialisation, Rust-defined classes, reflection; TVM_FFI_CRATE=0.1.15 picks the
# older package, 311), built as its build.rs builds it, against the library that
# `tvm-ffi-config --libdir` names, in a venv whose apache-tvm-ffi 0.1.15.post2 has this
# library's libtvm_ffi.so (scripts/libtvm-ffi.sh) copied in the place of its own, beside the
# wheel's libtvm_ffi_testing.so. No library path is set by hand: the test binaries record
# libtvm_ffi.so and find it where the crate's build script says. Every test must pass, and
# as many as on the wheel's own library.
#   scripts/test-tvm-ffi-rust.sh        TVM_FFI_REFERENCE=1: the wheel's own library
# The crate's build goes to ${XDG_CACHE_HOME:-~/.cache}/tvm-rt/tvm-ffi-rust-target.
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$PWD
work="$repo/build/tvm-ffi-rust"
mkdir -p "$work/fetch/src"
crate_version=${TVM_FFI_CRATE:-0.1.15-post2}
# Its test count (tests/, the unit tests and the doc tests) on the wheel's own library:
# 367 for 0.1.15-post2, 311 for 0.1.15.
case "$crate_version" in 0.1.15-post2) floor=367 ;; 0.1.15) floor=311 ;; *) floor=1 ;; esac
cat >"$work/fetch/Cargo.toml" <<EOF
[package]
name = "tvm-ffi-fetch"
version = "0.0.0"
edition = "2021"
publish = false

[dependencies]
tvm-ffi = "=$crate_version"

[workspace]
EOF
: >"$work/fetch/src/lib.rs"
(cd "$work/fetch" && cargo fetch --quiet)
src=$(cd "$work/fetch" && cargo metadata --format-version 1 --quiet |
  python3 -c "import json, sys; m = json.load(sys.stdin); print(next(p['manifest_path'] for p in m['packages'] if p['name'] == 'tvm-ffi'))")
rm -rf "$work/crate"
cp -r "$(dirname "$src")" "$work/crate"
# A workspace of its own (not a member of this repository's).
printf '\n[workspace]\n' >>"$work/crate/Cargo.toml"

venv="$work/venv"
[ -x "$venv/bin/python" ] || python3 -m venv "$venv"
"$venv/bin/python" -c "import importlib.metadata as m; assert m.version('apache-tvm-ffi') == '0.1.15.post2'" 2>/dev/null ||
  "$venv/bin/pip" install -q "apache-tvm-ffi==0.1.15.post2"
libdir=$("$venv/bin/tvm-ffi-config" --libdir)
[ -f "$libdir/libtvm_ffi.wheel.so" ] || cp "$libdir/libtvm_ffi.so" "$libdir/libtvm_ffi.wheel.so"
if [ "${TVM_FFI_REFERENCE:-0}" = 1 ]; then
  cp "$libdir/libtvm_ffi.wheel.so" "$libdir/libtvm_ffi.so"
else
  cp "$(scripts/libtvm-ffi.sh)" "$libdir/libtvm_ffi.so"
fi
readelf -d "$libdir/libtvm_ffi.so" | grep -q 'Library soname: \[libtvm_ffi.so\]'

target="${XDG_CACHE_HOME:-$HOME/.cache}/tvm-rt/tvm-ffi-rust-target"
set +e
(cd "$work/crate" && PATH="$venv/bin:$PATH" CARGO_TARGET_DIR="$target" cargo test --no-fail-fast 2>&1) >"$work/out.txt"
rc=$?
set -e
passed=$(grep -o '^test result: [a-zA-Z]*\. [0-9]* passed' "$work/out.txt" | awk '{s += $4} END {print s + 0}')
failed=$(grep -o '; [0-9]* failed' "$work/out.txt" | awk '{s += $2} END {print s + 0}')
grep -E '^test .* FAILED$|^error' "$work/out.txt" | head -20 || true
echo "tvm-ffi $crate_version crate: $passed passed, $failed failed (cargo test exit status $rc)"
if [ "$rc" != 0 ] || [ "$failed" != 0 ] || [ "$passed" -lt "$floor" ]; then
  tail -30 "$work/out.txt" >&2
  echo "FAIL: the tvm-ffi crate's tests" >&2
  exit 1
fi
