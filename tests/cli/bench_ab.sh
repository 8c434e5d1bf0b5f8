#!/usr/bin/env bash
# bench_ab.sh WORK: bench/ab.sh on two stand-in builds (scripts that print a `layerjit bench`
# report's CUDA graph row, and record the cache and worker each was given): the rounds alternate
# A, B; each build gets its own cache and the compile worker beside it; the medians and B / A are
# right; a build whose call fails, or prints no CUDA graph row, makes the exit status 1.
set -uo pipefail
work=$1
ab=$(cd "$(dirname "$0")/../.." && pwd)/bench/ab.sh
rm -rf "$work" && mkdir -p "$work/a" "$work/b" "$work/c" "$work/d" "$work/e"
fail() { echo "bench_ab: FAILED: $*"; exit 1; }
stand_in() {  # stand_in DIR MS...: a layerjit printing the next of MS per call (MS:ALONE also the
  # sum of the kernels alone), logging its env
  local dir=$1; shift
  printf '%s\n' "$@" >"$dir/times"
  cat >"$dir/layerjit" <<EOS
#!/usr/bin/env bash
n=\$(wc -l <"$dir/calls" 2>/dev/null || echo 0)
echo "\$* | \${LAYERJIT_CACHE_DIR:-none} | \${LAYERJIT_COMPILE_WORKER:-none}" >>"$dir/calls"
line=\$(sed -n "\$((n + 1))p" "$dir/times")
ms=\${line%%:*} alone=\${line#*:}
[ "\$ms" = fail ] && { echo "error: no CUDA driver" >&2; exit 77; }
[ "\$alone" = "\$line" ] || echo "sum of the kernels alone: \$alone ms; in order (an event between neighbours): 9.0 ms"
echo "| fused | 8 | 8 | 1.0 GiB | 9.9 | 1.05x | 11.9 % |"
[ "\$ms" = none ] || echo "| fused, one CUDA graph | 8 | 1 graph | 1.0 GiB | \$ms | 1.06x | 12.0 % |"
EOS
  chmod +x "$dir/layerjit"
}
stand_in "$work/a" 3.0 3.2 3.1
stand_in "$work/b" 2.9 3.0 3.1
touch "$work/b/layerjit-compile-worker" && chmod +x "$work/b/layerjit-compile-worker"
out=$(TMPDIR="$work" "$ab" --rounds 3 "$work/a/layerjit" "$work/b/layerjit" -- x.lj --bind T=7) || fail "exit $?: $out"
grep -q '^| 1 | 3.0 | 2.9 |$' <<<"$out" || fail "round 1 row: $out"
grep -q '^| 3 | 3.1 | 3.1 |$' <<<"$out" || fail "round 3 row: $out"
grep -q '^| median | 3.1 | 3.0 |$' <<<"$out" || fail "medians: $out"
grep -q '^B / A: 0.9677 (-3.23 %)$' <<<"$out" || fail "ratio: $out"
[ "$(grep -c '^== [AB] round' <<<"$out")" -eq 6 ] || fail "not 6 calls: $out"
! grep -q 'alone' <<<"$out" || fail "a table of the kernels alone without their figures: $out"
[ "$(grep '^== ' <<<"$out" | sed -n 2p)" = "== B round 1: $work/b/layerjit bench x.lj --bind T=7" ] || fail "B does not follow A: $out"
# Every call passed the arguments through, "bench" first; A without a worker, B with its own.
[ "$(grep -c '^bench x.lj --bind T=7 | ' "$work/a/calls")" -eq 3 ] || fail "A's calls: $(cat "$work/a/calls")"
grep -q '| none$' "$work/a/calls" || fail "A was given a worker: $(cat "$work/a/calls")"
grep -q "| $work/b/layerjit-compile-worker\$" "$work/b/calls" || fail "B's worker: $(cat "$work/b/calls")"
a_cache=$(awk -F' [|] ' 'NR == 1 { print $2 }' "$work/a/calls") b_cache=$(awk -F' [|] ' 'NR == 1 { print $2 }' "$work/b/calls")
[ -n "$a_cache" ] && [ "$a_cache" != "$b_cache" ] || fail "one cache for both: $a_cache"
[ ! -e "$a_cache" ] && [ ! -e "$b_cache" ] || fail "caches left behind"
# Reports with the kernels' sum alone: a second table of those, its own medians and ratio.
stand_in "$work/d" 3.0:2.8 3.2:2.7
stand_in "$work/e" 3.3:2.9 3.1:2.95
out=$(TMPDIR="$work" "$ab" "$work/d/layerjit" "$work/e/layerjit" -- x.lj) || fail "exit $?: $out"
grep -q '^B / A: 1.0323 (+3.23 %)$' <<<"$out" || fail "graph ratio with alone lines: $out"
grep -q '^| 2 | 2.7 | 2.95 |$' <<<"$out" || fail "alone round 2 row: $out"
grep -q '^| median | 2.75 | 2.925 |$' <<<"$out" || fail "alone medians: $out"
grep -q '^B / A alone: 1.0636 (+6.36 %)$' <<<"$out" || fail "alone ratio: $out"
# A failed call, or a report without the CUDA graph row: exit 1, the table says so.
stand_in "$work/c" 3.0 fail
rm -f "$work/a/calls"
out=$(TMPDIR="$work" "$ab" "$work/a/layerjit" "$work/c/layerjit" -- x.lj 2>&1)
[ $? -eq 1 ] || fail "a failed call did not exit 1: $out"
grep -q '^| 2 | 3.2 | failed |$' <<<"$out" || fail "failed row: $out"
grep -q '^| median | 3.1 | 3.0 |$' <<<"$out" || fail "medians of two, or of what did not fail: $out"
stand_in "$work/c" none
out=$(TMPDIR="$work" "$ab" --rounds 1 "$work/a/layerjit" "$work/c/layerjit" -- x.lj 2>&1)
[ $? -eq 1 ] || fail "a report without the graph row did not exit 1: $out"
out=$("$ab" "$work/a/layerjit" 2>&1)
[ $? -eq 2 ] || fail "bad usage did not exit 2: $out"
echo "bench_ab: ok"
