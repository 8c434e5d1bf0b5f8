#!/usr/bin/env bash
# The Llama-3-8B layers under each launch variant, timed as one CUDA graph by `layerjit run` (which
# also checks fused against unfused): programmatic dependent launch off (LAYERJIT_PDL=0, the
# default), on for the kernels that mark themselves early (LaunchRule::early, LAYERJIT_PDL=1) and
# on for every kernel (LAYERJIT_PDL=all), each also with lj_pdl_begin's two instructions in the other order ("swap",
# below). Variants are interleaved and the B = 1 cases repeated, so the spread between
# rounds shows beside the differences.
#
#   bench/exec/decode_launch.sh LAYERJIT [ROUNDS]      (LAYERJIT_LAUNCH_VARIANTS="off on" picks variants)
#
# Prints one line per run, then a table: graph ms per case and variant, one column per round.
set -uo pipefail
lj="${1:?usage: $0 LAYERJIT [ROUNDS]}"
rounds="${2:-2}"
src="$(cd "$(dirname "$0")/../.." && pwd)"

# "swap": the same launches with lj_pdl_begin's two instructions in the other order (the built-in
# order waits first and then lets the next kernel launch, so at most one kernel waits ahead of the
# running one; the other order lets every early kernel after it become resident at once). Through
# LAYERJIT_DEVICE_HEADERS, so one build measures both.
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
types="$src/codegen/templates/layerjit/types.cuh"
mkdir -p "$tmp/swap/layerjit"
# The first of the two griddepcontrol lines is held back and printed after the second.
awk '/griddepcontrol\.(wait|launch_dependents);/ && !done { if (held == "") { held = $0; next } print; print held; done = 1; next }
     { print }' "$types" >"$tmp/swap/layerjit/types.cuh"
if cmp -s "$types" "$tmp/swap/layerjit/types.cuh"; then echo "decode_launch: the swap edit changed nothing in $types" >&2; exit 1; fi

declare -A ms
status=0
run_case() {  # run_case CASE VARIANT ROUND ARGS...
  local case="$1" variant="$2" round="$3"; shift 3
  local pdl=1
  local headers=()
  case "$variant" in
    off) pdl=0 ;;
    all) pdl=all ;;
    swap) headers=(LAYERJIT_DEVICE_HEADERS="$tmp/swap") ;;
    swap-all) pdl=all; headers=(LAYERJIT_DEVICE_HEADERS="$tmp/swap") ;;
  esac
  local out t0=$SECONDS
  out=$(env LAYERJIT_PDL=$pdl "${headers[@]}" "$lj" run "$@" 2>&1)
  local rc=$? t verdict
  t=$(grep -o "fused as a CUDA graph [0-9.]* ms" <<<"$out" | grep -o "[0-9.]*" | head -1)
  verdict=$(tail -1 <<<"$out")
  echo "$case $variant round $round: graph ${t:-?} ms, $verdict (exit $rc, $((SECONDS - t0)) s)"
  [[ $rc -eq 0 ]] || { echo "$out" | tail -20; status=1; }
  ms["$case|$variant"]+=" ${t:-?}"
}
bf16=(--graph llama3_8b_decode)
fp8=("$src/examples/llama3_8b_fp8.lj" --graph llama3_8b_fp8_decode)
variants=(${LAYERJIT_LAUNCH_VARIANTS:-off on all swap swap-all})
for r in $(seq 1 "$rounds"); do
  for v in "${variants[@]}"; do run_case "bf16 B=1" "$v" "$r" "${bf16[@]}" --bind B=1,C=4096; done
  for v in "${variants[@]}"; do run_case "fp8 B=1" "$v" "$r" "${fp8[@]}" --bind B=1,C=4096; done
done
for v in "${variants[@]}"; do run_case "bf16 B=32" "$v" 1 "${bf16[@]}" --bind B=32,C=4096; done
for v in "${variants[@]}"; do run_case "bf16 T=4096" "$v" 1 --graph llama3_8b_prefill --bind T=4096; done

echo
echo "| case | launch | CUDA graph ms (per round) |"
echo "|---|---|---|"
for c in "bf16 B=1" "fp8 B=1" "bf16 B=32" "bf16 T=4096"; do
  for v in "${variants[@]}"; do
    [[ -n "${ms["$c|$v"]:-}" ]] && echo "| $c | $v |${ms["$c|$v"]} |"
  done
done
exit $status
