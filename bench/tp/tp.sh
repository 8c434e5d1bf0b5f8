#!/usr/bin/env bash
# Tensor parallelism (issue 36): the built-in Llama-3-8B layer at tp = 1 and tp = N (default 2) on this
# machine's GPUs, decode B = 1 and B = 32 over a cache of 4096 and prefill T = 4096. Each case is one
# `layerjit bench --tp N` call: both layers built by the same runtime (exec::TpExecutable, NCCL between
# the ranks), each rank's run one CUDA graph with its NCCL calls, timed in 5 interleaved rounds of 10
# on rank 0's stream, and the tp = N all_reduces alone. Prints each call's report, then one table.
# `layerjit run --tp N` (the GPU check) compares the outputs.
#
#   bench/tp/tp.sh LAYERJIT [N]
set -uo pipefail
lj="${1:?usage: $0 LAYERJIT [N]}"
tp="${2:-2}"
export NCCL_NVLS_ENABLE=0  # NVLink multicast stays off on the lent machines (device KINDS.md)
cases=("decode|B=1,C=4096" "decode|B=32,C=4096" "prefill|T=4096")
status=0
rows=()
for c in "${cases[@]}"; do
  graph="llama3_8b_${c%%|*}"
  echo "== $graph ${c#*|}: $lj bench --tp $tp --graph $graph --bind ${c#*|}"
  out="$("$lj" bench --tp "$tp" --graph "$graph" --bind "${c#*|}" 2>&1)"
  rc=$?
  echo "$out"
  if [[ $rc -ne 0 ]]; then
    echo "tp.sh: $graph ${c#*|} failed (exit $rc)" >&2
    status=1
    rows+=("| ${c%%|*} ${c#*|} | failed | | | |")
    continue
  fi
  one="$(awk '/^  tp = 1: / { print $4 }' <<<"$out")"
  many="$(awk -v n="$tp" '$0 ~ "^  tp = " n ": " { print $4 }' <<<"$out")"
  reduce="$(awk '/all_reduces alone:/ { print $6 }' <<<"$out")"
  ratio="$(awk -v a="$many" -v b="$one" 'BEGIN { if (b > 0) printf "%.2fx", a / b; else print "-" }')"
  rows+=("| ${c%%|*} ${c#*|} | $one | $many | $ratio | $reduce |")
done
echo
echo "| case | tp = 1 ms | tp = $tp ms | tp = $tp / tp = 1 | all_reduces alone ms |"
echo "|------|-----------|------------|------------------|----------------------|"
printf '%s\n' "${rows[@]}"
exit $status
