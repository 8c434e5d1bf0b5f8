#!/usr/bin/env bash
# compile_cache.sh LAYERJIT WORKDIR: `layerjit compile` twice into a fresh cache. The first run
# compiles every kernel; the second loads every cubin from the cache and makes only the PTX, which
# the cache does not hold. Both runs write .cu, .ptx and .cubin for every kernel, byte-identical.
set -euo pipefail
lj="$1"; work="$2"
rm -rf "$work"; mkdir -p "$work"
export LAYERJIT_CACHE_DIR="$work/cache"
cold=$("$lj" compile --arch sm_90a --emit "$work/cold")
echo "$cold"
grep -Eq '^20 kernels for sm_90a in [0-9.]+ s \(0 from the cache, 20 compiled; PTX-only compiles for 0\)' <<<"$cold" || { echo "cold run did not compile everything at once"; exit 1; }
warm=$("$lj" compile --arch sm_90a --emit "$work/warm")
echo "$warm"
grep -Eq '^20 kernels for sm_90a in [0-9.]+ s \(20 from the cache, 0 compiled; PTX-only compiles for 20\)' <<<"$warm" || { echo "warm run missed the cache"; exit 1; }
grep -q '"cache": "hit"' "$work/warm/manifest.json"
# Every kernel of the manifest has its three files, in both runs, with the same bytes.
kernels=$(grep -o '"kernel": "[^"]*"' "$work/cold/manifest.json" | cut -d'"' -f4)
test "$(echo "$kernels" | wc -l)" -eq 20
for k in $kernels; do
  for ext in cu ptx cubin; do
    test -s "$work/cold/$k.$ext" || { echo "missing $k.$ext"; exit 1; }
    cmp "$work/cold/$k.$ext" "$work/warm/$k.$ext"
  done
  grep -q "\"$k.ptx\"" "$work/cold/manifest.json"
done
grep -q 'ld.global' "$work/warm/lj_llama3_8b_prefill_g7_row_reduce.ptx"
grep -q '^\.target sm_90a' "$work/warm/lj_llama3_8b_prefill_g7_row_reduce.ptx"
# --ptx is gone: compile always writes the PTX.
if "$lj" compile --ptx --emit "$work/ptx" 2>"$work/ptx.err"; then echo "--ptx was accepted"; exit 1; fi
grep -q "unknown option '--ptx'" "$work/ptx.err"
"$lj" cache stats
