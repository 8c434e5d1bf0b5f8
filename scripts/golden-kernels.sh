#!/usr/bin/env bash
# The golden kernel set: every kernel `layerjit compile` emits for the built-in Llama-3-8B layer and
# every examples/*.lj graph, at prefill and decode sizes, for sm_80, sm_90 and sm_90a, as SHA-256 of
# its CUDA C++ source and of its PTX (without the line table), compared with
# tests/golden/kernels.sha256. Generated kernels
# are deterministic, so a refactor of the compiler must leave this list unchanged; a change that
# means to change kernels updates it in the same commit and names every kernel it changes. (Every
# tuner candidate's source, the configs a tuning DB can hold, is the set's other half:
# tests/golden/candidates.txt, checked by tests/tune/test_golden_candidates.cpp.)
#
#   scripts/golden-kernels.sh LAYERJIT              check (exit 1 and the differing files if any)
#   scripts/golden-kernels.sh LAYERJIT --update     rewrite tests/golden/kernels.sha256
#   scripts/golden-kernels.sh LAYERJIT --keep DIR   also keep every emitted file under DIR (for diffs)
#
# The PTX is NVRTC's: a new CUDA toolkit changes its hashes (its header names the release) and is
# an --update of its own, with the sources' hashes unchanged. It comes from `compile --ptx-only`
# (no ptxas: the same text as the cubin compile's, in about half the time here).
set -euo pipefail
lj="${1:?usage: $0 LAYERJIT [--update | --keep DIR]}"
shift
mode=check
keep=""
while [[ $# -gt 0 ]]; do
  case "$1" in
    --update) mode=update ;;
    --keep) keep="$2"; shift ;;
    *) echo "golden-kernels: unknown argument $1" >&2; exit 2 ;;
  esac
  shift
done
src="$(cd "$(dirname "$0")/.." && pwd)"
golden="$src/tests/golden/kernels.sha256"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT

# name|file (- for the built-in layer)|graph|bindings
cases=(
  "builtin_prefill_t4096|-|llama3_8b_prefill|T=4096"
  "builtin_decode_b1|-|llama3_8b_decode|B=1,C=4096"
  "builtin_decode_b32|-|llama3_8b_decode|B=32,C=4096"
  "decoder_lj_prefill_t4096|examples/llama3_8b_decoder.lj|llama3_8b_prefill|T=4096"
  "decoder_lj_decode_b1|examples/llama3_8b_decoder.lj|llama3_8b_decode|B=1,C=4096"
  "fp8_prefill_t4096|examples/llama3_8b_fp8.lj|llama3_8b_fp8_prefill|T=4096"
  "fp8_decode_b1|examples/llama3_8b_fp8.lj|llama3_8b_fp8_decode|B=1,C=4096"
  "int4_prefill_t4096|examples/llama3_8b_int4.lj|llama3_8b_int4_prefill|T=4096"
  "int4_decode_b1|examples/llama3_8b_int4.lj|llama3_8b_int4_decode|B=1,C=4096"
  "w8a8_prefill_t4096|examples/llama3_8b_w8a8.lj|llama3_8b_w8a8_prefill|T=4096"
  "w8a8_decode_b1|examples/llama3_8b_w8a8.lj|llama3_8b_w8a8_decode|B=1,C=4096"
  "w8a8_decode_b32|examples/llama3_8b_w8a8.lj|llama3_8b_w8a8_decode|B=32,C=4096"
  "fp8_projection_t4096|examples/fp8_projection.lj|fp8_projection|T=4096"
  "fp8_projection_t1|examples/fp8_projection.lj|fp8_projection|T=1"
  "swiglu_t4096|examples/swiglu_mlp.lj|mlp|T=4096"
  "swiglu_t1|examples/swiglu_mlp.lj|mlp|T=1"
)
out="$tmp/out"
for c in "${cases[@]}"; do
  IFS='|' read -r name file graph bind <<<"$c"
  input=()
  [[ "$file" == "-" ]] || input=("$src/$file")
  for arch in sm_80 sm_90 sm_90a; do
    # A cache of its own: every kernel is compiled here, none read from the user's cache.
    if ! LAYERJIT_CACHE_DIR="$tmp/cache" "$lj" compile "${input[@]}" --graph "$graph" --bind "$bind" --arch "$arch" --ptx-only \
         --emit "$out/$name/$arch" >"$tmp/log" 2>&1; then
      echo "golden-kernels: layerjit compile failed for $name ($arch):" >&2
      cat "$tmp/log" >&2
      exit 1
    fi
  done
done
# PTX without its line table (.loc, .file): -lineinfo maps instructions to source lines, device
# headers included, so a comment added to a header would otherwise change every kernel's PTX.
(cd "$out" && find . -type f -name '*.ptx' -exec sed -i -E '/^[[:space:]]*\.(loc|file)[[:space:]]/d' {} +)
(cd "$out" && find . -type f \( -name '*.cu' -o -name '*.ptx' \) | LC_ALL=C sort | xargs sha256sum) >"$tmp/now.sha256"
[[ -n "$keep" ]] && { mkdir -p "$keep"; cp -r "$out/." "$keep/"; }
count=$(wc -l <"$tmp/now.sha256")
if [[ $mode == update ]]; then
  mkdir -p "$(dirname "$golden")"
  cp "$tmp/now.sha256" "$golden"
  echo "golden-kernels: wrote $count hashes to $golden"
  exit 0
fi
if [[ ! -f "$golden" ]]; then
  echo "golden-kernels: no golden set at $golden (run with --update to create it)" >&2
  exit 1
fi
if cmp -s "$golden" "$tmp/now.sha256"; then
  echo "golden-kernels: all $count files match $golden"
  exit 0
fi
echo "golden-kernels: generated kernels differ from $golden (- golden, + now):" >&2
diff <(awk '{print $2, $1}' "$golden") <(awk '{print $2, $1}' "$tmp/now.sha256") | grep '^[<>]' | sed 's/^</-/; s/^>/+/' >&2 || true
echo "golden-kernels: an intended change updates the set with --update and names each kernel it changes" >&2
exit 1
