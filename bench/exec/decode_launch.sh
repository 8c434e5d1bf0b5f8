#!/usr/bin/env bash
# The decode layers under each launch variant, timed as one CUDA graph by `layerjit run` (which also
# checks fused against unfused): programmatic dependent launch off, and on with the GEMV's L2
# prefetch of its first 4 KiB per W row (the built-in headers), 2 KiB, or none (headers changed
# through LAYERJIT_DEVICE_HEADERS, so one build measures all). Variants are interleaved and the
# B = 1 cases repeated, so the spread between rounds shows beside the differences.
#
#   bench/exec/decode_launch.sh LAYERJIT [ROUNDS]
#
# Prints one line per run, then a table: graph ms per case and variant, one column per round.
set -uo pipefail
lj="${1:?usage: $0 LAYERJIT [ROUNDS]}"
rounds="${2:-2}"
src="$(cd "$(dirname "$0")/../.." && pwd)"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
types="$src/codegen/templates/layerjit/types.cuh"
mkdir -p "$tmp/pf2k/layerjit" "$tmp/pf0/layerjit"
# The prefetch helper's condition, capped at 2 KiB, or never true.
sed 's/if ((lj_i64)lane \* 128 < bytes)/if ((lj_i64)lane * 128 < (bytes < 2048 ? bytes : 2048))/' "$types" >"$tmp/pf2k/layerjit/types.cuh"
sed 's/if ((lj_i64)lane \* 128 < bytes)/if (false \&\& bytes)/' "$types" >"$tmp/pf0/layerjit/types.cuh"
for v in pf2k pf0; do
  if cmp -s "$types" "$tmp/$v/layerjit/types.cuh"; then echo "decode_launch: the $v edit matched nothing in $types" >&2; exit 1; fi
done

declare -A ms
run_case() {  # run_case CASE VARIANT ROUND ARGS...
  local case="$1" variant="$2" round="$3"; shift 3
  local env=(LAYERJIT_PDL=1)
  case "$variant" in
    off) env=(LAYERJIT_PDL=0) ;;
    pf2k) env+=(LAYERJIT_DEVICE_HEADERS="$tmp/pf2k") ;;
    pf0) env+=(LAYERJIT_DEVICE_HEADERS="$tmp/pf0") ;;
  esac
  local out t0=$SECONDS
  out=$(env "${env[@]}" "$lj" run "$@" 2>&1)
  local rc=$? line
  line=$(grep -o "fused as a CUDA graph [0-9.]* ms" <<<"$out" | grep -o "[0-9.]*" | head -1)
  local verdict
  verdict=$(tail -1 <<<"$out")
  echo "$case $variant round $round: graph ${line:-?} ms, $verdict (exit $rc, $((SECONDS - t0)) s)"
  [[ $rc -eq 0 ]] || { echo "$out" | tail -20; status=1; }
  ms["$case|$variant"]+=" ${line:-?}"
}
status=0
bf16=(--graph llama3_8b_decode)
fp8=("$src/examples/llama3_8b_fp8.lj" --graph llama3_8b_fp8_decode)
for r in $(seq 1 "$rounds"); do
  for v in off pf4k pf2k pf0; do run_case "bf16 B=1" "$v" "$r" "${bf16[@]}" --bind B=1,C=4096; done
  for v in off pf4k; do run_case "fp8 B=1" "$v" "$r" "${fp8[@]}" --bind B=1,C=4096; done
done
for v in off pf4k; do run_case "bf16 B=32" "$v" 1 "${bf16[@]}" --bind B=32,C=4096; done

echo
echo "| case | launch | CUDA graph ms (per round) |"
echo "|---|---|---|"
for c in "bf16 B=1" "fp8 B=1" "bf16 B=32"; do
  for v in off pf4k pf2k pf0; do
    [[ -n "${ms["$c|$v"]:-}" ]] && echo "| $c | $v |${ms["$c|$v"]} |"
  done
done
exit $status
