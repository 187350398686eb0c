#!/usr/bin/env bash
# Makes libtvm_ffi.so, the tvm-ffi ABI's library: the runtime of libtvm_runtime.a (the same
# build as libtvm_runtime.so) linked with soname libtvm_ffi.so, exporting the same C API and,
# where a C++ compiler and apache-tvm-ffi 0.1.15's headers are at hand, its C++ API
# (cxx/*.cc compiled against those headers).
#   scripts/libtvm-ffi.sh [PROFILE_DIR [OUT_DIR]]   (defaults: target/release, PROFILE_DIR/ffi)
# Headers: scripts/tvm-ffi-headers.sh (TVM_RT_CXX_API=0: no C++ API; =1: fail without it).
# Prints the library's path.
set -euo pipefail
cd "$(dirname "$0")/.."
dir="$(realpath "${1:-target/release}")"
out="${2:-$dir/ffi}"
lib="$dir/libtvm_runtime.so"
archive="$dir/libtvm_runtime.a"
for f in "$lib" "$archive"; do
  [ -f "$f" ] || { echo "libtvm-ffi.sh: $f is missing (cargo build first)" >&2; exit 1; }
done
mkdir -p "$out"

want_cxx="${TVM_RT_CXX_API:-auto}"
inc=""
[ "$want_cxx" = 0 ] || inc="$(scripts/tvm-ffi-headers.sh || true)"
# Up to date: newer than every input, made with the same C++ choice and headers.
stamp="$out/.libtvm_ffi.inputs"
inputs="headers=$inc c++=$(command -v c++ || true)"
if { [ "$want_cxx" != 1 ] || [ -n "$inc" ]; } && [ -f "$out/libtvm_ffi.so" ] && [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$inputs" ] \
  && [ -z "$(find "$lib" "$archive" cxx scripts/libtvm-ffi.sh -newer "$out/libtvm_ffi.so" -print -quit)" ]; then
  echo "$out/libtvm_ffi.so"
  exit 0
fi
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

cxx_obj=""
if [ "$want_cxx" != 0 ]; then
  if [ -n "$inc" ] && command -v c++ >/dev/null 2>&1; then
    for src in cxx/*.cc; do
      c++ -std=c++17 -O2 -fPIC -Wall -I "$inc" -c "$src" -o "$work/$(basename "$src" .cc).o"
    done
    # One relocatable object: its exports are listed below.
    ld -r -o "$work/cxx.o" "$work"/*.o
    cxx_obj="$work/cxx.o"
  elif [ "$want_cxx" = 1 ]; then
    echo "libtvm-ffi.sh: no C++ compiler or no tvm-ffi 0.1.15 headers (set TVM_FFI_INCLUDE_DIR)" >&2
    exit 1
  else
    echo "libtvm-ffi.sh: building without the C++ API (no C++ compiler or tvm-ffi headers)" >&2
  fi
fi

# The exports: the C API of libtvm_runtime.so, and the C++ API's functions in tvm::ffi with
# the vtables and type info of ModuleObj and Error (what the wheel's library exports).
{
  echo "{ global:"
  nm -D --defined-only "$lib" | awk '$2 ~ /^[TDBRV]$/ {print "  " $3 ";"}'
  if [ -n "$cxx_obj" ]; then
    nm -g --defined-only "$cxx_obj" | awk '$2 == "T" && $3 ~ /^_ZN[K]?3tvm3ffi/ {print "  " $3 ";"}'
    for s in _ZTVN3tvm3ffi9ModuleObjE _ZTIN3tvm3ffi9ModuleObjE _ZTSN3tvm3ffi9ModuleObjE \
             _ZTVN3tvm3ffi5ErrorE _ZTIN3tvm3ffi5ErrorE _ZTSN3tvm3ffi5ErrorE; do
      echo "  $s;"
    done
  fi
  echo "local: *; };"
} >"$work/exports.map"

# The runtime's own objects whole (they hold the exports), the rest of the archive (the
# standard library and compiler builtins) as needed: a builtin's hidden copy of a symbol the
# runtime exports (__gnu_f2h_ieee) must not be linked in beside it.
mkdir -p "$work/objs"
(cd "$work/objs" && ar t "$archive" | grep '^tvm_runtime\.' | xargs ar x "$archive")
# What rustc links a staticlib with (its native-static-libs), and libstdc++ for the C++ layer.
libs=(-lgcc_s -lutil -lrt -lpthread -lm -ldl -lc)
linker=cc
[ -n "$cxx_obj" ] && linker=c++
$linker -shared -o "$work/libtvm_ffi.so" -Wl,-soname,libtvm_ffi.so -Wl,--version-script="$work/exports.map" \
  -Wl,--gc-sections -Wl,-z,relro,-z,now -s \
  ${cxx_obj:+"$cxx_obj"} "$work"/objs/*.o "$archive" "${libs[@]}"
mv -f "$work/libtvm_ffi.so" "$out/libtvm_ffi.so"
printf '%s' "$inputs" >"$stamp"
echo "$out/libtvm_ffi.so"
