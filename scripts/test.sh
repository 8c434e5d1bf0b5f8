#!/usr/bin/env bash
# The whole CPU test suite, exactly what CI runs (.ci/run calls this):
#   1. build with -Werror and run every CPU test (unit, errors, filecheck, cli) — GPU tests are
#      labelled `gpu` and excluded here; they run on a GPU machine through scripts/gpu-check.sh;
#   2. build the unit tests (target unit-tests) with ASan+UBSan and run them again (but the NVRTC
#      compile sweeps);
#   3. fuzz the text parser, and the planner past it, for a bounded number of inputs each.
# Any failure fails the script.
set -euo pipefail
cd "$(dirname "$0")/.."
jobs="${LAYERJIT_JOBS:-$(nproc)}"

scripts/setup.sh

echo "== build (warnings are errors)"
cmake --preset ci >/dev/null
cmake --build --preset ci -j "$jobs"
echo "== CPU tests"
ctest --test-dir build-ci --label-exclude gpu --output-on-failure --no-tests=error -j "$jobs"

echo "== ASan + UBSan build, unit tests"
cmake --preset asan >/dev/null
cmake --build --preset asan -j "$jobs" --target unit-tests
# The NVRTC compile sweeps ("... compiles for sm_...", "... compile for sm_..." (the layers', the
# sharded layers', the Hopper GEMM variants' spill checks), "... compile(d) without spills" (split-K,
# padded head_dims), the fp8 one's "every accepted wgmma config compiles", W8A8's "compiles with s8
# MMAs" and "compiles, K = 1008") are NVRTC's time, which the sanitizers do not instrument: the
# sanitizer build runs their emitters through the generation-only tests instead ("... is generated,
# deterministically", "... is emitted, deterministically"); the split-K and padded-head_dim
# emitters' source checks run in the first build only.
sweeps="compiles? for sm_|compiled? without spills|every accepted wgmma config compiles|compiles with s8 MMAs|compiles, K = 1008"
ctest --test-dir build-asan --label-regex unit --exclude-regex "$sweeps" --output-on-failure --no-tests=error -j "$jobs"

if [ -x scripts/fuzz.sh ]; then
  echo "== fuzzing: the parser, then the planner"
  scripts/fuzz.sh
fi
echo "== all CPU tests passed"
