#!/usr/bin/env bash
# Builds the `fuzz` preset (clang++-14, libFuzzer + ASan + UBSan) and runs its two targets for a
# bounded number of inputs each, seeded with examples/*.lj and tests/errors/*.lj: parser_fuzz (the
# text parser and printer) and plan_fuzz (past the parser: bind the symbols, check sizes, fold norms,
# plan fused and unfused, print the plans). Exits non-zero on any finding (crash, sanitizer report,
# leak, timeout); the reproducer is kept in build-fuzz/fuzz-findings/ as crash-*/leak-*/timeout-* and
# the run's log is printed. Replay one with
#   build-fuzz/tests/fuzz/parser_fuzz build-fuzz/fuzz-findings/crash-...   (or plan_fuzz)
#
#   scripts/fuzz.sh                       # parser: -runs=100000, plan: -runs=200000; at most 240 + 120 s
#   scripts/fuzz.sh -runs=1000000         # extra arguments go to libFuzzer (both targets) and override the defaults
#   FUZZ_JOBS=2 scripts/fuzz.sh           # build parallelism (default: number of cores)
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"

cmake --preset fuzz >/dev/null
cmake --build --preset fuzz --target parser_fuzz plan_fuzz -j "${FUZZ_JOBS:-$(nproc)}"

work="$(mktemp -d "${TMPDIR:-/tmp}/layerjit-fuzz.XXXXXX")"
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/seeds"
cp examples/*.lj "$work/seeds/"
for f in tests/errors/*.lj; do cp "$f" "$work/seeds/errors_$(basename "$f")"; done
findings="$root/build-fuzz/fuzz-findings"
mkdir -p "$findings"

# fuzz NAME RUNS SECONDS ARGS...: one target over a fresh copy of the seeds.
fuzz() {
  local name="$1" runs="$2" seconds="$3"
  shift 3
  local fuzzer="$root/build-fuzz/tests/fuzz/$name"
  rm -rf "$work/corpus" && cp -r "$work/seeds" "$work/corpus"
  # Defaults first: libFuzzer takes the last occurrence of a flag, so the caller's arguments win.
  # -max_len covers the largest seed (the example file); -timeout flags any input that hangs.
  local args=(-artifact_prefix="$findings/" -runs="$runs" -max_total_time="$seconds" -max_len=8192 -timeout=10
              -rss_limit_mb=2048 -dict="$root/tests/fuzz/parser.dict" -print_final_stats=1 "$@")
  echo "fuzz: $fuzzer ${args[*]} (corpus: $(ls "$work/corpus" | wc -l) seeds)"
  local start status elapsed inputs
  start=$(date +%s)
  set +e
  "$fuzzer" "${args[@]}" "$work/corpus" 2>&1 | tee "$work/$name.log" | grep -E '^(#[0-9]+[[:space:]]+(INITED|DONE|pulse)|==|SUMMARY|stat::number_of_executed_units|Done )'
  status=${PIPESTATUS[0]}
  set -e
  elapsed=$(( $(date +%s) - start ))
  if [[ $status -ne 0 ]]; then
    echo "fuzz: $name FAILED after ${elapsed}s (exit $status); full log follows" >&2
    cat "$work/$name.log" >&2
    exit 1
  fi
  inputs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$work/$name.log" | grep -o '[0-9]*$' || echo "?")
  echo "fuzz: $name OK, ${inputs} inputs in ${elapsed}s, no findings"
}

fuzz parser_fuzz 100000 240 "$@"
fuzz plan_fuzz 200000 120 "$@"
