#!/usr/bin/env bash
# The dependency line, checked on the sources: each folder may include headers only from the folders
# below it (docs/architecture.md, "Dependencies point one way"; the CMake link lines say the same).
# The public headers (include/layerjit/) declare both ops' and the compiler's types: runtime/ and
# cache/, which sit beside the compiler, not above it, may use only the ops-level ones (types,
# errors, attributes, op kinds, the kernel ABI, the host tensor), and those must not include the
# graph. Exit 1 naming every include that points the wrong way. Run by ctest (layers:includes).
set -euo pipefail
src="$(cd "$(dirname "$0")/.." && pwd)"
cd "$src"

ops_public='layerjit/(types|error|check|attrs|op_kind|kernel_abi|host_tensor)\.h|layerjit/op_kinds\.def|layerjit/random\.cuh'
# folder: the project include prefixes its files may use (besides their own folder)
declare -A allowed=(
  [ops]="layerjit/"
  [compiler]="layerjit/|ops/"
  [codegen]="layerjit/|ops/|compiler/"
  [runtime]="$ops_public"
  [cache]="$ops_public"
  [jit]="layerjit/|ops/|compiler/|codegen/|runtime/|cache/"
  [tune]="layerjit/|ops/|compiler/|codegen/|runtime/|cache/|jit/"
  [exec]="layerjit/|ops/|compiler/|codegen/|runtime/|cache/|jit/"
  [models]="layerjit/|ops/|compiler/|codegen/|runtime/|cache/|jit/|exec/"
  [api]="layerjit/|ops/|compiler/|codegen/|runtime/|cache/|jit/|exec/|models/"
  [python]="layerjit/"
)
bad=0
project='^(layerjit|ops|compiler|codegen|runtime|cache|jit|tune|exec|models|api|python|tools|examples|bench|tests)/'
for dir in "${!allowed[@]}"; do
  # "included-header file" per include, then only project headers from outside the folder that its
  # allowed prefixes do not cover: a few greps per folder (a subprocess per include took ~20 s).
  while read -r inc file; do
    echo "check-layers: $file includes \"$inc\": $dir/ may include only ${allowed[$dir]}" >&2
    bad=1
  done < <(grep -rn --include='*.h' --include='*.cpp' --include='*.cuh' '#include "' "$dir" \
             | sed -E 's/^([^:]+):[0-9]+:.*#include "([^"]+)".*/\2 \1/' \
             | grep -v "^$dir/" | grep -E "$project" | grep -Ev "^(${allowed[$dir]})" || true)
done
# The ops-level public headers must not reach up into the compiler's.
while IFS= read -r hit; do
  echo "check-layers: $hit: an ops header includes a compiler header" >&2
  bad=1
done < <(grep -En '#include "layerjit/(graph|builder|passes|llama|text)\.h"' \
           include/layerjit/{types,error,attrs,op_kind,kernel_abi,host_tensor}.h 2>/dev/null || true)
# The installed API (layerjit.h and what it includes) is self-contained: no internal header, no
# check.h (it needs fmt), no cuda.h.
while IFS= read -r hit; do
  echo "check-layers: $hit: a public header includes a header that is not installed" >&2
  bad=1
done < <(grep -En '#include ("layerjit/check\.h"|"(ops|compiler|codegen|runtime|cache|jit|exec|api)/|<cuda|<fmt/)' include/layerjit/*.h \
           | grep -v '^include/layerjit/check\.h:' || true)
[[ $bad -eq 0 ]] && echo "check-layers: every include points down the dependency line"
exit $bad
