#!/usr/bin/env bash
# Checks of the C++ runtime API (include/tvm/runtime/*.h) beyond its CTest programs and its
# Python test (both run from test.sh): TVM's own deployment example,
# apps/howto_deploy/cpp_deploy.cc, compiled unchanged against include/ (C++14 and C++17) and
# run on the libraries it expects, made without TVM by examples/howto_deploy_libs.rs.
# The example is TVM's code, not this project's: it is read from TVM_SOURCE_DIR (a TVM
# checkout) or TVM_GIT_DIR (a git clone of TVM, tag v0.8.0); without either the check is
# skipped with a message.
set -euo pipefail
cd "$(dirname "$0")/.."
command -v c++ >/dev/null 2>&1 || { apt-get update -qq && apt-get install -y -qq g++ >/dev/null; }

out=build/howto_deploy
mkdir -p "$out"
if [ -n "${TVM_SOURCE_DIR:-}" ] && [ -f "$TVM_SOURCE_DIR/apps/howto_deploy/cpp_deploy.cc" ]; then
  cp "$TVM_SOURCE_DIR/apps/howto_deploy/cpp_deploy.cc" "$out/cpp_deploy.cc"
elif [ -n "${TVM_GIT_DIR:-}" ] &&
  git -C "$TVM_GIT_DIR" show refs/tags/v0.8.0:apps/howto_deploy/cpp_deploy.cc >"$out/cpp_deploy.cc" 2>/dev/null; then
  :
else
  echo "SKIP: TVM's apps/howto_deploy/cpp_deploy.cc not available (set TVM_SOURCE_DIR or TVM_GIT_DIR)"
  exit 0
fi

cargo build --release --quiet
cargo run --release --quiet --example howto_deploy_libs -- "$out" >/dev/null
for std in c++14 c++17; do
  echo "== TVM's cpp_deploy.cc, unchanged, -std=$std"
  c++ -std=$std -O2 -Wall -Werror -Iinclude "$out/cpp_deploy.cc" "$out/lib/test_addone_sys.o" \
    -o "$out/cpp_deploy" -Ltarget/release -ltvm_runtime -ldl -pthread
  log=$(cd "$out" && LD_LIBRARY_PATH="$OLDPWD/target/release" ./cpp_deploy 2>&1)
  echo "$log"
  test "$(grep -c "Finish verification" <<<"$log")" = 2
  grep -q "Running graph executor" <<<"$log"
done
