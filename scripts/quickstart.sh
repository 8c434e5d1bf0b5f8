#!/usr/bin/env bash
# One command from a fresh clone: install dependencies, build, and run the main job — verify the
# built-in Llama-3-8B decoder layer, show its decode plan, compile every kernel of both graphs for
# sm_90a (NVRTC, no GPU needed; the cubins go into the kernel cache, so a later run starts warm) and,
# where a CUDA driver sees a GPU, run the decode step on it, fused against unfused.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
cmake --preset default >/dev/null
cmake --build --preset default
lj=build/tools/layerjit
$lj check
$lj check examples/llama3_8b_decoder.lj
$lj plan --graph llama3_8b_decode --bind B=1,C=4096
emit=$(mktemp -d)
trap 'rm -rf "$emit"' EXIT
$lj compile --arch sm_90a --bind T=4096,B=1,C=4096 --emit "$emit" --quiet
if $lj devices >/dev/null 2>&1; then
  $lj run --graph llama3_8b_decode --bind B=1,C=4096
else
  echo "quickstart: no GPU here (layerjit devices: $($lj devices 2>&1 | head -1)); the kernels compiled, nothing run"
fi
