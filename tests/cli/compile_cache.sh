#!/usr/bin/env bash
# compile_cache.sh LAYERJIT WORKDIR: `layerjit compile` twice into a fresh cache. The first run
# compiles every kernel (20 NVRTC compiles of both graphs in one batch, in worker processes: the CLI
# finds layerjit-compile-worker beside it); the second reads every cubin and PTX from the cache and makes
# no NVRTC call. Both runs write .cu, .ptx and .cubin for every kernel, byte-identical. A third run
# in-process (LAYERJIT_COMPILE_WORKER=off) into a fresh cache writes the same bytes; a --ptx-only run
# the same .cu and .ptx and no .cubin.
set -euo pipefail
lj="$1"; work="$2"
rm -rf "$work"; mkdir -p "$work"
export LAYERJIT_CACHE_DIR="$work/cache"
cold=$("$lj" compile --arch sm_90a --emit "$work/cold" 2>"$work/cold.err")
cat "$work/cold.err"
# A progress line per compiled kernel as each finishes, [k/N]: both graphs' 20 kernels compile as
# one batch, the biggest translation units (GEMMs, attention) first, so one of them finishes first.
test "$(grep -Ec '^  \[[0-9]+/20\] lj_llama3_8b_(prefill|decode)_g[0-9]+_[a-z_]+ compiled \([0-9.]+ s\)$' "$work/cold.err")" -eq 20
test "$(grep -c ' \[20/20\] ' "$work/cold.err")" -eq 1
grep -Eq '^  \[1/20\] lj_llama3_8b_[a-z]+_g[0-9]+_(matmul|attention) ' "$work/cold.err"
echo "$cold"
grep -Eq '^20 kernels for sm_90a in [0-9.]+ s \(0 from the cache, 20 compiled; 20 NVRTC compiles\)' <<<"$cold" || { echo "cold run did not compile everything at once"; exit 1; }
warm=$("$lj" compile --arch sm_90a --emit "$work/warm" 2>"$work/warm.err")
test ! -s "$work/warm.err"  # nothing compiled, nothing to report
echo "$warm"
grep -Eq '^20 kernels for sm_90a in [0-9.]+ s \(20 from the cache, 0 compiled; 0 NVRTC compiles\)' <<<"$warm" || { echo "warm run missed the cache"; exit 1; }
grep -q '"cache": "hit"' "$work/warm/manifest.json"
# The bf16 layer's tensor maps (its Hopper GEMMs' x and W, the attention's q, k, v) all swizzle 128
# bytes; the manifest names each map's swizzle (4-bit codes: none).
grep -q '"swizzle": "128B"' "$work/cold/manifest.json"
if grep -q '"swizzle": "\(none\|32B\|64B\)"' "$work/cold/manifest.json"; then echo "a bf16 map not swizzled 128 bytes"; exit 1; fi
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
LAYERJIT_CACHE_DIR="$work/cache2" LAYERJIT_COMPILE_WORKER=off "$lj" compile --quiet --arch sm_90a --emit "$work/inproc" >/dev/null 2>"$work/quiet.err"
test ! -s "$work/quiet.err"  # --quiet: the summary line only
for k in $kernels; do
  for ext in cu ptx cubin; do cmp "$work/cold/$k.$ext" "$work/inproc/$k.$ext"; done
done
# --ptx-only: NVRTC stops at the PTX (compute_90a), whose text is the cubin compile's; no .cubin.
ptx=$(LAYERJIT_CACHE_DIR="$work/cache3" "$lj" compile --quiet --ptx-only --arch sm_90a --emit "$work/ptxonly" 2>/dev/null)
grep -Eq '^20 kernels for compute_90a in [0-9.]+ s \(0 from the cache, 20 compiled; 20 NVRTC compiles\)' <<<"$ptx" || { echo "--ptx-only: $ptx"; exit 1; }
for k in $kernels; do
  cmp "$work/cold/$k.ptx" "$work/ptxonly/$k.ptx"
  cmp "$work/cold/$k.cu" "$work/ptxonly/$k.cu"
  test ! -e "$work/ptxonly/$k.cubin"
done
grep -q 'ld.global' "$work/warm/lj_llama3_8b_prefill_g7_row_reduce.ptx"
grep -q '^\.target sm_90a' "$work/warm/lj_llama3_8b_prefill_g7_row_reduce.ptx"
# --ptx is gone: compile always writes the PTX.
if "$lj" compile --ptx --emit "$work/ptx" 2>"$work/ptx.err"; then echo "--ptx was accepted"; exit 1; fi
grep -q "unknown option '--ptx'" "$work/ptx.err"
"$lj" cache stats
