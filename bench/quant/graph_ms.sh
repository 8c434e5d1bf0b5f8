# Sourced by the bench/quant scripts and bench/ab.sh: graph_ms LABEL LAYERJIT ARGS... runs `LAYERJIT bench ARGS...`,
# prints its whole report, and sets GRAPH_MS to the fused plan's ms per call as one CUDA graph (empty
# and returns 1 when the call failed, after saying so on stderr).
graph_ms() {
  local label="$1" lj="$2"
  shift 2
  echo "== $label: $lj $*"
  local out rc
  out="$("$lj" "$@" 2>&1)"
  rc=$?
  echo "$out"
  GRAPH_MS=""
  if [[ $rc -ne 0 ]]; then
    echo "$label failed (exit $rc)" >&2
    return 1
  fi
  GRAPH_MS="$(awk -F'|' '/\| fused, one CUDA graph \|/ { gsub(/ /, "", $6); print $6 }' <<<"$out")"
}
