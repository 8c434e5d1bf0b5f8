#!/usr/bin/env bash
# The 4-bit projections against bf16 ones of the same shape: each Llama-3-8B projection
# (bench/quant/int4_projections.lj) at M = 1, 16, 32 and 4096 rows, 4-bit (the tensor-core GEMV up
# to 16 rows, the GEMMs dequantizing W's tiles into shared memory above) and bf16 (layerjit's
# default kernels), each timed by `layerjit bench` (one CUDA graph, median of 5 interleaved rounds
# of 7, in the process that also measures the device's ceilings) on random inputs. Prints each
# call's full report, then one table: ms per call and bf16's ms over the 4-bit one (above 1: the
# 4-bit kernel is faster). The goals (issue 34): >= 2.8x at M = 1, >= 2.5x at M = 16, >= 0.9x at
# M = 4096.
#
#   bench/quant/int4.sh LAYERJIT [M ...]
set -uo pipefail
lj="${1:?usage: $0 LAYERJIT [M ...]}"
shift
src="$(cd "$(dirname "$0")/../.." && pwd)"
file="$src/bench/quant/int4_projections.lj"
. "$src/bench/quant/graph_ms.sh"
rows=("$@")
[[ ${#rows[@]} -gt 0 ]] || rows=(1 16 32 4096)
shapes=(qkv o gate_up down)
declare -A ms
status=0
for m in "${rows[@]}"; do
  for s in "${shapes[@]}"; do
    for kind in q4 bf16; do
      # --packed-weights: the 4-bit graphs read the codes at every row count (the GEMMs above 16).
      extra=()
      [[ $kind == q4 ]] && extra=(--packed-weights)
      graph_ms "int4.sh: ${kind}_$s T=$m" "$lj" bench "$file" --graph "${kind}_$s" --bind "T=$m" "${extra[@]}" || status=1
      ms["$kind|$s|$m"]="$GRAPH_MS"
    done
  done
done
echo
echo "| M | projection | 4-bit ms | bf16 ms | bf16 / 4-bit |"
echo "|---|------------|----------|---------|--------------|"
for m in "${rows[@]}"; do
  for s in "${shapes[@]}"; do
    q="${ms["q4|$s|$m"]:-}" b="${ms["bf16|$s|$m"]:-}"
    ratio="-"
    [[ -n "$q" && -n "$b" ]] && ratio="$(awk -v a="$b" -v b="$q" 'BEGIN { printf "%.2fx", a / b }')"
    echo "| $m | $s | ${q:-failed} | ${b:-failed} | $ratio |"
  done
done
exit $status
