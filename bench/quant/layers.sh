#!/usr/bin/env bash
# The quantized Llama-3-8B layers against the bf16 one: the built-in bf16 layer, the INT4 (AWQ-style
# u4, groups of 128), FP8 and INT8 W8A8 examples, each at prefill T = 4096 and decode B = 1 and
# B = 32 over a cache of 4096, timed by `layerjit bench` (the fused plan as one CUDA graph, median of
# 5 interleaved rounds of 7, in the same process as its ceilings) on random inputs. Prints each
# call's full report, then one table: ms per call and bf16's ms over it for the same case (above 1:
# faster than the bf16 layer).
#
#   bench/quant/layers.sh LAYERJIT
set -uo pipefail
lj="${1:?usage: $0 LAYERJIT}"
src="$(cd "$(dirname "$0")/../.." && pwd)"
. "$src/bench/quant/graph_ms.sh"

# layer|file (- for the built-in layer)|graph prefix
layers=("bf16|-|llama3_8b" "int4|$src/examples/llama3_8b_int4.lj|llama3_8b_int4" "fp8|$src/examples/llama3_8b_fp8.lj|llama3_8b_fp8"
        "w8a8|$src/examples/llama3_8b_w8a8.lj|llama3_8b_w8a8")
cases=("prefill|T=4096" "decode|B=1,C=4096" "decode|B=32,C=4096")
declare -A ms
status=0
for c in "${cases[@]}"; do
  for l in "${layers[@]}"; do
    IFS='|' read -r name file prefix <<<"$l"
    graph="${prefix}_${c%%|*}"
    args=(bench --graph "$graph" --bind "${c#*|}")
    [[ "$file" != "-" ]] && args=(bench "$file" --graph "$graph" --bind "${c#*|}")
    graph_ms "layers.sh: $name $graph ${c#*|}" "$lj" "${args[@]}" || status=1
    ms["$name|$c"]="$GRAPH_MS"
  done
done
echo
echo "| case | layer | ms per call (one CUDA graph) | vs bf16 |"
echo "|------|-------|------------------------------|---------|"
for c in "${cases[@]}"; do
  base="${ms["bf16|$c"]:-}"
  for l in "${layers[@]}"; do
    name="${l%%|*}"
    t="${ms["$name|$c"]:-}"
    ratio="-"
    [[ -n "$t" && -n "$base" ]] && ratio="$(awk -v a="$base" -v b="$t" 'BEGIN { printf "%.2fx", a / b }')"
    echo "| ${c%%|*} ${c#*|} | $name | ${t:-failed} | $ratio |"
  done
done
exit $status
