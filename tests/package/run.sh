#!/usr/bin/env bash
# tests/package: install BUILD into a fresh prefix, check what was installed, then build and run the
# consumer project against it with CMake's find_package and with pkg-config.
# Usage: run.sh BUILD CONSUMER_SRC WORK VERSION CXX GENERATOR
set -euo pipefail
build=$1 src=$2 work=$3 version=$4 cxx=$5 generator=$6
rm -rf "$work" && mkdir -p "$work"
prefix=$work/prefix
cmake --install "$build" --prefix "$prefix" >"$work/install.log"

fail() { echo "package: FAILED: $*" >&2; exit 1; }
for f in include/layerjit/layerjit.h include/layerjit/model.h include/layerjit/op_kinds.def lib/liblayerjit.so bin/layerjit \
         bin/layerjit-compile-worker lib/cmake/layerjit/layerjitConfig.cmake lib/cmake/layerjit/layerjitConfigVersion.cmake \
         lib/pkgconfig/layerjit.pc; do
  [ -e "$prefix/$f" ] || fail "$f was not installed"
done
[ ! -e "$prefix/include/layerjit/check.h" ] || fail "the internal check.h was installed"
# The public headers include only each other and the standard library: no cuda.h, no fmt, no source tree.
if grep -h '#include "' "$prefix"/include/layerjit/*.h | grep -v '#include "layerjit/'; then fail "a public header includes a non-public one"; fi
if grep -h '#include <' "$prefix"/include/layerjit/*.h | grep -E 'cuda|fmt/|nlohmann|xxhash'; then fail "a public header includes a dependency"; fi
# The exported target carries none of the build's private flags or paths.
targets=$(cat "$prefix"/lib/cmake/layerjit/layerjitTargets*.cmake)
root=$(cd "$src/../../.." && pwd)
for bad in XXH_INLINE_ALL -Wall -Werror "$root"; do
  if grep -qF -- "$bad" <<<"$targets"; then fail "the exported target carries '$bad'"; fi
done
[ "$("$prefix/bin/layerjit" --version | head -1)" = "layerjit $version" ] || fail "layerjit --version is not $version"
# The library exports layerjit's symbols only (fmt, nlohmann-json stay inside).
if nm -DC --defined-only "$prefix/lib/liblayerjit.so" | awk '{ $1 = ""; $2 = ""; print }' | grep -vE '^ *(lj::|typeinfo for lj::|typeinfo name for lj::|vtable for lj::)' | grep -q .; then
  fail "liblayerjit.so exports symbols outside lj::"
fi

# find_package, an out-of-tree project. A version the package does not satisfy is refused.
cmake -S "$src" -B "$work/cmake-build" -G "$generator" -DCMAKE_CXX_COMPILER="$cxx" -DCMAKE_PREFIX_PATH="$prefix" >"$work/configure.log"
cmake --build "$work/cmake-build" >"$work/build.log"
"$work/cmake-build/consumer"
# layerjit/model.h: a tiny Hugging Face model written by the build's test tool.
"$build/tests/models/make_hf_model" "$work/model" llama >/dev/null
"$work/cmake-build/consumer" "$work/model"
mkdir -p "$work/too-new"
printf 'cmake_minimum_required(VERSION 3.25)\nproject(p LANGUAGES CXX)\nfind_package(layerjit 0.3 CONFIG REQUIRED)\n' >"$work/too-new/CMakeLists.txt"
if cmake -S "$work/too-new" -B "$work/too-new/build" -DCMAKE_PREFIX_PATH="$prefix" >"$work/too-new.log" 2>&1; then
  fail "find_package(layerjit 0.3) accepted version $version"
fi

# pkg-config, no CMake.
export PKG_CONFIG_PATH=$prefix/lib/pkgconfig
[ "$(pkg-config --modversion layerjit)" = "$version" ] || fail "pkg-config --modversion"
# shellcheck disable=SC2046
"$cxx" -o "$work/consumer-pc" "$src/main.cpp" $(pkg-config --cflags --libs layerjit) -Wl,-rpath,"$prefix/lib"
"$work/consumer-pc" >/dev/null
echo "package: ok (installed into $prefix; consumer built with find_package and with pkg-config)"
