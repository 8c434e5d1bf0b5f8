#!/usr/bin/env bash
# The 4-bit projections against bf16 ones of the same shape: each Llama-3-8B projection
# (bench/quant/int4_projections.lj) at M = 1, 16, 32 and 4096 rows, 4-bit (the tensor-core GEMV up
# to 16 rows, the GEMMs on codes above: at 4096 on sm_90a W dequantized into wgmma's registers)
# and bf16 (layerjit's default kernels), each timed by `layerjit bench` (one CUDA graph, median of
# 5 interleaved rounds of 7, in the process that also measures the device's ceilings; and the
# kernel alone, timed earlier in the same process) on random inputs. Prints each call's full
# report, then one table: ms per call and bf16's ms over the 4-bit one (above 1: the 4-bit kernel
# is faster), graph against graph and alone against alone (graph_ms.sh: never one against the
# other). The goals (issue 34): >= 2.8x at M = 1, >= 2.5x at M = 16, >= 0.9x at M = 4096.
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
declare -A ms alone
status=0
for m in "${rows[@]}"; do
  for s in "${shapes[@]}"; do
    for kind in q4 bf16; do
      # --packed-weights: the 4-bit graphs read the codes at every row count (the GEMMs above 16).
      extra=()
      [[ $kind == q4 ]] && extra=(--packed-weights)
      graph_ms "int4.sh: ${kind}_$s T=$m" "$lj" bench "$file" --graph "${kind}_$s" --bind "T=$m" "${extra[@]}" || status=1
      ms["$kind|$s|$m"]="$GRAPH_MS" alone["$kind|$s|$m"]="$ALONE_MS"
    done
  done
done
echo
# bf16's ms over the 4-bit one's, or "-" where either is missing.
ratio() { [[ -n "$1" && -n "$2" ]] && awk -v a="$2" -v b="$1" 'BEGIN { printf "%.2fx", a / b }' || echo "-"; }
echo "| M | projection | 4-bit ms (graph) | bf16 ms (graph) | bf16 / 4-bit | 4-bit ms (alone) | bf16 ms (alone) | bf16 / 4-bit |"
echo "|---|------------|------------------|-----------------|--------------|------------------|-----------------|--------------|"
for m in "${rows[@]}"; do
  for s in "${shapes[@]}"; do
    q="${ms["q4|$s|$m"]:-}" b="${ms["bf16|$s|$m"]:-}" qa="${alone["q4|$s|$m"]:-}" ba="${alone["bf16|$s|$m"]:-}"
    echo "| $m | $s | ${q:-failed} | ${b:-failed} | $(ratio "$q" "$b") | ${qa:--} | ${ba:--} | $(ratio "$qa" "$ba") |"
  done
done
exit $status
