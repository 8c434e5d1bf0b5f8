#!/usr/bin/env bash
# Two layerjit builds on one graph, alternated: `layerjit bench ARGS` of build A, then of build B,
# for N rounds (each build with its own kernel cache and its own compile worker, when one sits
# beside it). Prints every call's report, then one table: the fused plan's ms per call as one CUDA
# graph per build and round, each build's median, and B's median over A's (below 1: B is faster);
# then the same for the sum of the kernels alone where the reports have it.
# For a code-generation change on the GPU: one run of each is within the noise (the same build's
# prefill layer varied 0.1-1 % between runs, docs/perf.md), alternating shares clock drift alike.
#
#   bench/ab.sh [--rounds N] LAYERJIT_A LAYERJIT_B -- BENCH_ARGS...
#
# Example: bench/ab.sh old/layerjit new/layerjit -- examples/llama3_8b_decoder.lj
#          --graph llama3_8b_prefill --bind T=4096
# Exit status: 0, or 1 when a call failed or its report had no CUDA graph row.
set -uo pipefail
rounds=2
if [[ "${1:-}" == --rounds ]]; then
  rounds="${2:?--rounds needs a count}"
  shift 2
fi
if [[ $# -lt 3 || "$3" != -- ]]; then
  echo "usage: $0 [--rounds N] LAYERJIT_A LAYERJIT_B -- BENCH_ARGS..." >&2
  exit 2
fi
builds=("$1" "$2")
shift 3
. "$(cd "$(dirname "$0")" && pwd)/quant/graph_ms.sh"
declare -A ms alone
status=0
for ((r = 1; r <= rounds; r++)); do
  for i in 0 1; do
    lj="${builds[$i]}"
    name=$([[ $i == 0 ]] && echo A || echo B)
    worker="$(dirname "$lj")/layerjit-compile-worker"
    cache="${TMPDIR:-/tmp}/layerjit-ab-cache-$name-$$"
    if [[ -x "$worker" ]]; then
      LAYERJIT_COMPILE_WORKER="$worker" LAYERJIT_CACHE_DIR="$cache" graph_ms "$name round $r" "$lj" bench "$@" || status=1
    else
      LAYERJIT_CACHE_DIR="$cache" graph_ms "$name round $r" "$lj" bench "$@" || status=1
    fi
    [[ -n "$GRAPH_MS" ]] || status=1
    ms["$name|$r"]="$GRAPH_MS" alone["$name|$r"]="$ALONE_MS"
  done
done
rm -rf "${TMPDIR:-/tmp}/layerjit-ab-cache-A-$$" "${TMPDIR:-/tmp}/layerjit-ab-cache-B-$$"

median() { sort -g | awk '{ v[NR] = $1 } END { if (NR) print (NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2) }'; }
echo
echo "A: ${builds[0]}"
echo "B: ${builds[1]}"
# One table: each round's figure of both builds from the array named $1 (column "A ms ($2)"), their
# medians and B / A (the line headed $3). With $4 = optional: nothing unless both medians exist, and a
# blank line before it.
table() {
  local -n figures=$1
  local what=$2 label=$3 optional=${4:-} a b r
  a="$(for ((r = 1; r <= rounds; r++)); do echo "${figures["A|$r"]:-}"; done | grep . | median)"
  b="$(for ((r = 1; r <= rounds; r++)); do echo "${figures["B|$r"]:-}"; done | grep . | median)"
  if [[ -n "$optional" ]]; then
    [[ -n "$a" && -n "$b" ]] || return 0
    echo
  fi
  local header="| round | A ms ($what) | B ms ($what) |"
  echo "$header"
  echo "$header" | sed 's/[^|]/-/g'
  for ((r = 1; r <= rounds; r++)); do
    echo "| $r | ${figures["A|$r"]:-failed} | ${figures["B|$r"]:-failed} |"
  done
  if [[ -n "$a" && -n "$b" ]]; then
    echo "| median | $a | $b |"
    awk -v a="$a" -v b="$b" -v label="$label" 'BEGIN { printf "%s: %.4f (%+.2f %%)\n", label, b / a, (b / a - 1) * 100 }'
  fi
}
table ms "CUDA graph" "B / A"
# The sums of the kernels alone, where the reports have them (graph_ms.sh: compare like with like).
table alone "kernels alone" "B / A alone" optional
exit $status
