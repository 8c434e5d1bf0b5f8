#!/usr/bin/env bash
# Builds the `fuzz` preset (clang++-14, libFuzzer + ASan + UBSan) and runs parser_fuzz for a bounded
# number of inputs, seeded with examples/*.lj and tests/errors/*.lj. Exits non-zero on any finding
# (crash, sanitizer report, leak, timeout); the reproducer is kept in build-fuzz/fuzz-findings/ as
# crash-*/leak-*/timeout-* and the run's log is printed. Replay one with
#   build-fuzz/tests/fuzz/parser_fuzz build-fuzz/fuzz-findings/crash-...
#
#   scripts/fuzz.sh                       # -runs=100000, at most 240 s of fuzzing
#   scripts/fuzz.sh -runs=1000000         # extra arguments go to libFuzzer and override the defaults
#   FUZZ_JOBS=2 scripts/fuzz.sh           # build parallelism (default: number of cores)
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"

cmake --preset fuzz >/dev/null
cmake --build --preset fuzz --target parser_fuzz -j "${FUZZ_JOBS:-$(nproc)}"
fuzzer="$root/build-fuzz/tests/fuzz/parser_fuzz"

work="$(mktemp -d "${TMPDIR:-/tmp}/layerjit-fuzz.XXXXXX")"
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/corpus"
cp examples/*.lj "$work/corpus/"
for f in tests/errors/*.lj; do cp "$f" "$work/corpus/errors_$(basename "$f")"; done

# Defaults first: libFuzzer takes the last occurrence of a flag, so the caller's arguments win.
# -max_len covers the largest seed (the example file); -timeout flags any input that hangs.
findings="$root/build-fuzz/fuzz-findings"
mkdir -p "$findings"
args=(-artifact_prefix="$findings/" -runs=100000 -max_total_time=240 -max_len=8192 -timeout=10 -rss_limit_mb=2048
      -dict="$root/tests/fuzz/parser.dict" -print_final_stats=1 "$@")

echo "fuzz: $fuzzer ${args[*]} (corpus: $(ls "$work/corpus" | wc -l) seeds)"
start=$(date +%s)
set +e
"$fuzzer" "${args[@]}" "$work/corpus" 2>&1 | tee "$work/fuzz.log" | grep -E '^(#[0-9]+[[:space:]]+(INITED|DONE|pulse)|==|SUMMARY|stat::number_of_executed_units|Done )'
status=${PIPESTATUS[0]}
set -e
elapsed=$(( $(date +%s) - start ))

if [[ $status -ne 0 ]]; then
  echo "fuzz: FAILED after ${elapsed}s (exit $status); full log follows" >&2
  cat "$work/fuzz.log" >&2
  exit 1
fi
runs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$work/fuzz.log" | grep -o '[0-9]*$' || echo "?")
echo "fuzz: OK, ${runs} inputs in ${elapsed}s, no findings"
