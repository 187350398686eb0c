#!/usr/bin/env bash
# The library under both of its names, and the C++ API of libtvm_ffi.so (issue 33):
#  1. libtvm_runtime.so (soname libtvm_runtime.so, an auxiliary filter of libtvm_ffi.so) and
#     libtvm_ffi.so (soname libtvm_ffi.so, made by scripts/libtvm-ffi.sh): sonames, and the C++
#     symbols of apache-tvm-ffi 0.1.15's wheel library, every one;
#  2. a program linked as -ltvm_ffi runs where only libtvm_ffi.so is (examples/relax_vm.c on a
#     v0.27 export), one linked as -ltvm_runtime where only libtvm_runtime.so is
#     (examples/hello.c), and a process that loads both names holds one runtime, in either order
#     (tests/cxx/two_names.c);
#  3. C++ against tvm-ffi 0.1.15's headers: tests/cxx/cxx_api_test.cc, and
#     examples/cpp/relax_load_from_file.cc (Module::LoadFromFile) on every v0.27 export with
#     TVM's outputs, plain and under ASan + UBSan.
#   scripts/test-ffi-lib.sh     (after cargo build --release)
# Without the v0.27 fixtures the export runs are skipped with a message (a failure under CI=true).
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$PWD
rel="$repo/target/release"
out="$repo/build/ffi-lib"
rm -rf "$out"
mkdir -p "$out"

echo "== libtvm_ffi.so (scripts/libtvm-ffi.sh)"
ffi="$(TVM_RT_CXX_API=1 scripts/libtvm-ffi.sh "$rel")"
ffidir="$(dirname "$ffi")"
inc="$(scripts/tvm-ffi-headers.sh)"
runtime="$rel/libtvm_runtime.so"

soname() { readelf -d "$1" | sed -n 's/.*Library soname: \[\(.*\)\]/\1/p'; }
test "$(soname "$runtime")" = libtvm_runtime.so
test "$(soname "$ffi")" = libtvm_ffi.so
readelf -d "$runtime" | grep -q 'Auxiliary library: \[libtvm_ffi.so\]'
# The same C API under both names.
diff <(nm -D --defined-only "$runtime" | awk '$3 !~ /^_Z/ {print $3}' | sort) \
     <(nm -D --defined-only "$ffi" | awk '$3 !~ /^_Z/ {print $3}' | sort)
# The C++ API: what apache-tvm-ffi 0.1.15.post2's libtvm_ffi.so exports in tvm::ffi (functions,
# and the vtables / type info of ModuleObj and Error).
cat >"$out/want-cxx.txt" <<'EOF'
tvm::ffi::DeepCopy(tvm::ffi::Any const&)
tvm::ffi::FromJSONGraph(tvm::ffi::Any const&)
tvm::ffi::Module::LoadFromFile(tvm::ffi::String const&)
tvm::ffi::Module::VisitContextSymbols(tvm::ffi::TypedFunction<void (tvm::ffi::String, void*)> const&)
tvm::ffi::ModuleObj::ClearImports()
tvm::ffi::ModuleObj::GetFunction(tvm::ffi::String const&, bool)
tvm::ffi::ModuleObj::GetFunctionDoc(tvm::ffi::String const&, bool)
tvm::ffi::ModuleObj::GetFunctionMetadata(tvm::ffi::String const&, bool)
tvm::ffi::ModuleObj::ImplementsFunction(tvm::ffi::String const&, bool)
tvm::ffi::ModuleObj::ImportModule(tvm::ffi::Module const&)
tvm::ffi::RecursiveEq(tvm::ffi::Any const&, tvm::ffi::Any const&)
tvm::ffi::RecursiveGe(tvm::ffi::Any const&, tvm::ffi::Any const&)
tvm::ffi::RecursiveGt(tvm::ffi::Any const&, tvm::ffi::Any const&)
tvm::ffi::RecursiveHash(tvm::ffi::Any const&)
tvm::ffi::RecursiveLe(tvm::ffi::Any const&, tvm::ffi::Any const&)
tvm::ffi::RecursiveLt(tvm::ffi::Any const&, tvm::ffi::Any const&)
tvm::ffi::ReprPrint(tvm::ffi::Any const&)
tvm::ffi::StructuralEqual::Equal(tvm::ffi::Any const&, tvm::ffi::Any const&, bool, bool)
tvm::ffi::StructuralEqual::GetFirstMismatch(tvm::ffi::Any const&, tvm::ffi::Any const&, bool, bool)
tvm::ffi::StructuralHash::Hash(tvm::ffi::Any const&, bool, bool)
tvm::ffi::ToJSONGraph(tvm::ffi::Any const&, tvm::ffi::Any const&)
tvm::ffi::VisitErrorContext::FindAccessPaths(tvm::ffi::ObjectRef const&, tvm::ffi::VisitErrorContext const&, bool)
tvm::ffi::json::Parse(tvm::ffi::String const&, tvm::ffi::String*)
tvm::ffi::json::Stringify(tvm::ffi::Any const&, tvm::ffi::Optional<int, void> const&)
typeinfo for tvm::ffi::Error
typeinfo for tvm::ffi::ModuleObj
typeinfo name for tvm::ffi::Error
typeinfo name for tvm::ffi::ModuleObj
vtable for tvm::ffi::Error
vtable for tvm::ffi::ModuleObj
EOF
diff "$out/want-cxx.txt" <(nm -D --defined-only "$ffi" | awk '$3 ~ /^_Z/ {print $3}' | c++filt | LC_ALL=C sort)
echo "sonames, the C API under both names and $(wc -l <"$out/want-cxx.txt") C++ symbols: ok"

fx=""
for d in "$repo/../shared/fixtures-v0.27" /work/shared/fixtures-v0.27; do
  if [ -f "$d/manifest.json" ]; then fx=$(cd "$d" && pwd); break; fi
done
if [ -z "$fx" ]; then
  msg="test-ffi-lib: no TVM v0.27 fixtures at ../shared/fixtures-v0.27"
  if [ "${CI:-}" = true ]; then echo "$msg: failing under CI=true" >&2; exit 1; fi
  echo "$msg: the export runs are skipped"
fi

echo "== one name each: linked as -ltvm_ffi, run beside libtvm_ffi.so only; as -ltvm_runtime, beside libtvm_runtime.so only"
mkdir -p "$out/only-ffi" "$out/only-runtime"
cp "$ffi" "$out/only-ffi/"
cp "$runtime" "$out/only-runtime/"
cc -Wall -Werror -std=c11 -I include examples/relax_vm.c -o "$out/only-ffi/relax_vm" -L "$out/only-ffi" -ltvm_ffi
readelf -d "$out/only-ffi/relax_vm" | grep -q 'Shared library: \[libtvm_ffi.so\]'
cc -Wall -Werror -I include examples/hello.c -o "$out/only-runtime/hello" -L "$out/only-runtime" -ltvm_runtime
readelf -d "$out/only-runtime/hello" | grep -q 'Shared library: \[libtvm_runtime.so\]'
LD_LIBRARY_PATH="$out/only-runtime" "$out/only-runtime/hello" >/dev/null
if [ -n "$fx" ]; then
  LD_LIBRARY_PATH="$out/only-ffi" "$out/only-ffi/relax_vm" "$fx/mlp.so" forward \
    $(for i in 0 1 2 3 4; do echo --in "$fx/mlp.in.$i.npy"; done) --expect "$fx/mlp.out.0.npy"
fi

echo "== both names in one process (as TVM's Python loads them, and the other way round)"
cc -Wall -Werror -std=c11 -I include tests/cxx/two_names.c -o "$out/two_names" -ldl
mkdir -p "$out/a" "$out/b" "$out/both"
cp "$ffi" "$out/a/"
cp "$runtime" "$out/b/"
cp "$ffi" "$runtime" "$out/both/"
"$out/two_names" "$out/a/libtvm_ffi.so" "$out/b/libtvm_runtime.so"
"$out/two_names" "$out/both/libtvm_runtime.so" "$out/both/libtvm_ffi.so"
"$out/two_names" "$out/both/libtvm_ffi.so" "$out/both/libtvm_runtime.so"

for flavour in plain asan; do
  flags=(-std=c++17 -O1 -g -Wall -Werror -I "$inc")
  env=()
  if [ "$flavour" = asan ]; then
    flags+=(-fno-omit-frame-pointer -fsanitize=address,undefined -fno-sanitize-recover=undefined)
    env=(ASAN_OPTIONS=detect_leaks=1)
  fi
  echo "== C++ against tvm-ffi 0.1.15's headers ($flavour)"
  c++ "${flags[@]}" tests/cxx/cxx_api_test.cc -o "$out/cxx_api_test-$flavour" -L "$ffidir" -ltvm_ffi -Wl,-rpath,"$ffidir"
  c++ "${flags[@]}" examples/cpp/relax_load_from_file.cc -o "$out/relax_load_from_file-$flavour" -L "$ffidir" -ltvm_ffi -Wl,-rpath,"$ffidir"
  if [ -n "$fx" ]; then
    env "${env[@]}" "$out/cxx_api_test-$flavour" "$fx/mlp.so"
    python3 - "$fx" <<'PY' >"$out/cases.txt"
import json, sys
fx = sys.argv[1]
m = json.load(open(f"{fx}/manifest.json"))["models"]
for name, spec in m.items():
    args = [f"{fx}/{spec['file']}", spec["function"]]
    args += sum((["--in", f"{fx}/{name}.in.{i}.npy"] for i in range(len(spec["inputs"]))), [])
    args += sum((["--expect", f"{fx}/{name}.out.{i}.npy"] for i in range(len(spec["outputs"]))), [])
    args += ["--rtol", str(spec.get("rtol", 1e-5)), "--atol", str(spec.get("atol", 1e-5))]
    print(" ".join(args))
PY
    while read -r line; do
      # shellcheck disable=SC2086
      env "${env[@]}" "$out/relax_load_from_file-$flavour" $line
    done <"$out/cases.txt"
  else
    env "${env[@]}" "$out/cxx_api_test-$flavour"
  fi
  # Bad input: a clear error and status 1, no crash.
  set +e
  env "${env[@]}" "$out/relax_load_from_file-$flavour" /nonexistent.so main 2>"$out/err.txt"
  rc=$?
  set -e
  test "$rc" = 1 && grep -q "^error:" "$out/err.txt"
done
echo "test-ffi-lib: ok"
