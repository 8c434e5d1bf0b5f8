#!/usr/bin/env bash
# A whole 32-layer Llama-3-8B-shaped model (random weights, written by make_hf_model to a temporary
# directory, about 15 GB, removed after) generating 64 tokens after a 128-token prompt with `layerjit
# generate` at tp = 1 and tp = N (default 2) in the same call of this script: time per output token
# (the median decode step, each one CUDA-graph replay per GPU) and the prefill. Issue 36.
#
#   bench/tp/model.sh LAYERJIT MAKE_HF_MODEL [N]
set -uo pipefail
lj="${1:?usage: $0 LAYERJIT MAKE_HF_MODEL [N]}"
mk="${2:?usage: $0 LAYERJIT MAKE_HF_MODEL [N]}"
tp="${3:-2}"
export NCCL_NVLS_ENABLE=0  # NVLink multicast stays off on the lent machines (device KINDS.md)
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
"$mk" "$dir/l8b" llama --8b --layers 32 --shards 4 || { echo "model.sh: make_hf_model failed" >&2; exit 1; }
ids=$(seq -s, 1000 7 1889)  # 128 token ids
status=0
declare -A step prefill
for n in 1 "$tp"; do
  args=(generate "$dir/l8b" --ids "$ids" --new 64)
  [[ "$n" != 1 ]] && args+=(--tp "$n")
  echo "== tp = $n: $lj ${args[*]}"
  out="$("$lj" "${args[@]}" 2>&1)"
  rc=$?
  echo "$out"
  if [[ $rc -ne 0 ]]; then
    echo "model.sh: tp = $n failed (exit $rc)" >&2
    status=1
    continue
  fi
  step[$n]="$(sed -n 's/^time: prefill [0-9.]* ms, decode \([0-9.]*\) ms per step.*/\1/p' <<<"$out")"
  prefill[$n]="$(sed -n 's/^time: prefill \([0-9.]*\) ms.*/\1/p' <<<"$out")"
done
echo
echo "| model | tp | prefill T=128 ms | ms per output token | vs tp = 1 |"
echo "|-------|----|------------------|---------------------|-----------|"
for n in 1 "$tp"; do
  ratio="$(awk -v a="${step[1]:-0}" -v b="${step[$n]:-0}" 'BEGIN { if (a > 0 && b > 0) printf "%.2fx", a / b; else print "-" }')"
  echo "| Llama-3-8B shapes, 32 layers | $n | ${prefill[$n]:-failed} | ${step[$n]:-failed} | $ratio |"
done
exit $status
