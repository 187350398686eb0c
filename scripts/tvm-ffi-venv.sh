#!/usr/bin/env bash
# Makes (or refreshes) a venv with apache-tvm-ffi 0.1.15.post2 whose libtvm_ffi.so is this
# library: the venv's tvm_ffi/lib/libtvm_ffi.so becomes a link to a folder holding ours as
# libtvm_ffi.so beside the wheel's libtvm_ffi_testing.so (which uses only the C ABI).
#   scripts/tvm-ffi-venv.sh VENV_DIR [LIB]
# LIB defaults to target/release/ffi/libtvm_ffi.so (soname libtvm_ffi.so, with the C++ API),
# which scripts/libtvm-ffi.sh makes again when target/release/libtvm_runtime.a is newer.
# Prints the venv's python. TVM_FFI_REFERENCE=1 leaves the wheel's own library in place.
set -euo pipefail
cd "$(dirname "$0")/.."
venv="${1:?usage: tvm-ffi-venv.sh VENV_DIR [LIB]}"
if [ -z "${2:-}" ] && { [ ! -f target/release/ffi/libtvm_ffi.so ] ||
    [ target/release/libtvm_runtime.a -nt target/release/ffi/libtvm_ffi.so ]; }; then
  scripts/libtvm-ffi.sh >/dev/null
fi
lib="$(realpath "${2:-target/release/ffi/libtvm_ffi.so}")"
if [ ! -x "$venv/bin/python" ]; then
  python3 -m venv "$venv" >&2
fi
if ! "$venv/bin/python" -c "import importlib.metadata as m; assert m.version('apache-tvm-ffi') == '0.1.15.post2'" 2>/dev/null; then
  "$venv/bin/pip" install -q "apache-tvm-ffi==0.1.15.post2" numpy pytest ninja >&2
fi
pkg="$("$venv/bin/python" -c "import importlib.util as u, os; print(os.path.dirname(u.find_spec('tvm_ffi').origin))")"
libdir="$pkg/lib"
keep="$venv/tvm-ffi-wheel-lib"
if [ ! -d "$keep" ]; then
  mkdir -p "$keep"
  cp -p "$libdir/libtvm_ffi.so" "$libdir/libtvm_ffi_testing.so" "$keep/"
fi
if [ "${TVM_FFI_REFERENCE:-0}" = 1 ]; then
  rm -f "$libdir/libtvm_ffi.so"
  cp -p "$keep/libtvm_ffi.so" "$libdir/libtvm_ffi.so"
else
  ours="$venv/tvm-ffi-ours"
  mkdir -p "$ours"
  cp -p "$keep/libtvm_ffi_testing.so" "$ours/"
  ln -sfn "$lib" "$ours/libtvm_ffi.so"
  rm -f "$libdir/libtvm_ffi.so"
  ln -s "$ours/libtvm_ffi.so" "$libdir/libtvm_ffi.so"
fi
echo "$venv/bin/python"
