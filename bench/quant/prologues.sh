#!/usr/bin/env bash
# The FP8 and W8A8 decode layers (B = 1, C = 4096) with the per-row quantize kernels and with the
# activation-quantize prologues (`--quantize-prologues`: each GEMV CTA quantizes the row itself),
# each plan after `layerjit tune` has checked every GEMV candidate against the default's output and
# timed it (the bulk-fed `gemv mma bulk=S` among them on sm_90: its ring of bulk copies is what
# should hide a prologue under the weights' stream; docs/gemm.md). The winners go to a tuning DB of
# this script's own (a temporary LAYERJIT_CACHE_DIR), so other benchmarks keep the defaults. Prints
# the tuners' candidate lists and the layers' reports, then one table: ms per call as one CUDA graph.
#
#   bench/quant/prologues.sh LAYERJIT
set -uo pipefail
lj="${1:?usage: $0 LAYERJIT}"
src="$(cd "$(dirname "$0")/../.." && pwd)"
. "$src/bench/quant/graph_ms.sh"
LAYERJIT_CACHE_DIR="$(mktemp -d)"
export LAYERJIT_CACHE_DIR
trap 'rm -rf "$LAYERJIT_CACHE_DIR"' EXIT

layers=("fp8|$src/examples/llama3_8b_fp8.lj|llama3_8b_fp8_decode" "w8a8|$src/examples/llama3_8b_w8a8.lj|llama3_8b_w8a8_decode")
plans=("row kernels|" "prologues|--quantize-prologues")
declare -A ms
status=0
for l in "${layers[@]}"; do
  IFS='|' read -r name file graph <<<"$l"
  for p in "${plans[@]}"; do
    flag="${p#*|}"
    echo "== prologues.sh: tune $name ${p%%|*}"
    # shellcheck disable=SC2086  # (flag: none or one word)
    "$lj" tune "$file" --graph "$graph" --bind B=1,C=4096 --no-cublaslt --all --budget 30 --quiet $flag || status=1
    # shellcheck disable=SC2086
    graph_ms "prologues.sh: $name ${p%%|*}" "$lj" bench "$file" --graph "$graph" --bind B=1,C=4096 $flag || status=1
    ms["$name|${p%%|*}"]="$GRAPH_MS"
  done
done
echo
echo "| decode B=1, C=4096, tuned | row kernels (ms) | prologues (ms) |"
echo "|---------------------------|------------------|----------------|"
for l in "${layers[@]}"; do
  name="${l%%|*}"
  echo "| $name | ${ms["$name|row kernels"]:-failed} | ${ms["$name|prologues"]:-failed} |"
done
exit $status
