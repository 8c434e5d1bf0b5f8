#!/usr/bin/env bash
# compile_cache.sh LAYERJIT WORKDIR: `layerjit compile` twice into a fresh cache. The first run
# compiles every kernel, the second loads every one from the cache, and both write the same cubins.
set -euo pipefail
lj="$1"; work="$2"
rm -rf "$work"; mkdir -p "$work"
export LAYERJIT_CACHE_DIR="$work/cache"
cold=$("$lj" compile --arch sm_90a --emit "$work/cold")
echo "$cold"
echo "$cold" | grep -Eq '^18 kernels for sm_90a in [0-9.]+ s \(0 from the cache, 18 compiled\)' || { echo "cold run did not compile everything"; exit 1; }
warm=$("$lj" compile --arch sm_90a --emit "$work/warm")
echo "$warm"
echo "$warm" | grep -Eq '^18 kernels for sm_90a in [0-9.]+ s \(18 from the cache, 0 compiled\)' || { echo "warm run missed the cache"; exit 1; }
for f in "$work"/cold/*.cubin; do cmp "$f" "$work/warm/$(basename "$f")"; done
grep -q '"cache": "hit"' "$work/warm/manifest.json"
test -s "$work/cold/lj_llama3_8b_prefill_g7_elementwise.cu"
# --ptx always runs NVRTC and writes the PTX.
ptx=$("$lj" compile --arch sm_90a --ptx --graph llama3_8b_decode --emit "$work/ptx")
echo "$ptx" | grep -Eq '\(0 from the cache, 9 compiled\)' || { echo "--ptx did not compile"; exit 1; }
grep -q 'ld.global' "$work/ptx/lj_llama3_8b_decode_g7_elementwise.ptx"
"$lj" cache stats
