#!/usr/bin/env bash
# Prints the include folder of apache-tvm-ffi 0.1.15's headers (a build-time dependency of the
# C++ API in libtvm_ffi.so, never copied into the repository): TVM_FFI_INCLUDE_DIR, else
# `tvm-ffi-config --includedir`, else the include folder of the apache-tvm-ffi 0.1.15.post2
# wheel, fetched once from PyPI into ${XDG_CACHE_HOME:-~/.cache}/tvm-rt. Fails (status 1)
# when none is at hand.
set -euo pipefail
has() { [ -f "$1/tvm/ffi/extra/module.h" ] && [ -f "$1/dlpack/dlpack.h" ]; }
if [ -n "${TVM_FFI_INCLUDE_DIR:-}" ]; then
  has "$TVM_FFI_INCLUDE_DIR" || { echo "tvm-ffi-headers: no tvm-ffi headers in TVM_FFI_INCLUDE_DIR=$TVM_FFI_INCLUDE_DIR" >&2; exit 1; }
  echo "$TVM_FFI_INCLUDE_DIR"; exit 0
fi
if command -v tvm-ffi-config >/dev/null 2>&1; then
  d="$(tvm-ffi-config --includedir 2>/dev/null || true)"
  if [ -n "$d" ] && has "$d" && tvm-ffi-config --version 2>/dev/null | grep -q '^0\.1\.15'; then echo "$d"; exit 0; fi
fi
cache="${XDG_CACHE_HOME:-$HOME/.cache}/tvm-rt/apache_tvm_ffi-0.1.15.post2"
if ! has "$cache/tvm_ffi/include"; then
  tmp="$(mktemp -d)"
  trap 'rm -rf "$tmp"' EXIT
  python3 -m pip download -q --no-deps --only-binary=:all: -d "$tmp" "apache-tvm-ffi==0.1.15.post2" >&2 || {
    echo "tvm-ffi-headers: cannot fetch the apache-tvm-ffi 0.1.15.post2 wheel (set TVM_FFI_INCLUDE_DIR)" >&2; exit 1; }
  mkdir -p "$cache"
  python3 - "$(ls "$tmp"/*.whl | head -1)" "$cache" <<'PY'
import sys, zipfile
z = zipfile.ZipFile(sys.argv[1])
for n in z.namelist():
    if n.startswith("tvm_ffi/include/"):
        z.extract(n, sys.argv[2])
PY
fi
has "$cache/tvm_ffi/include" || { echo "tvm-ffi-headers: the wheel has no headers" >&2; exit 1; }
echo "$cache/tvm_ffi/include"
