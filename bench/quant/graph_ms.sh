# Sourced by the bench/quant scripts and bench/ab.sh: graph_ms LABEL LAYERJIT ARGS... runs `LAYERJIT bench ARGS...`,
# prints its whole report, and sets GRAPH_MS to the fused plan's ms per call as one CUDA graph and
# ALONE_MS to the sum of its kernels' times each launched alone (both empty and returns 1 when the
# call failed, after saying so on stderr; ALONE_MS empty too where the report has no such line).
# The two differ by more than the launches between kernels: a one-kernel graph ran 4-12 % above the
# same kernel alone on an H100 (docs/perf.md; `layerjit bench` times the kernels alone first and
# the graph last, after more time under the power cap). Compare graph with graph and alone with
# alone, never one with the other.
graph_ms() {
  local label="$1" lj="$2"
  shift 2
  echo "== $label: $lj $*"
  local out rc
  out="$("$lj" "$@" 2>&1)"
  rc=$?
  echo "$out"
  GRAPH_MS="" ALONE_MS=""
  if [[ $rc -ne 0 ]]; then
    echo "$label failed (exit $rc)" >&2
    return 1
  fi
  GRAPH_MS="$(awk -F'|' '/\| fused, one CUDA graph \|/ { gsub(/ /, "", $6); print $6 }' <<<"$out")"
  ALONE_MS="$(sed -n 's/^sum of the kernels alone: \([0-9.]*\) ms.*/\1/p' <<<"$out")"
}
