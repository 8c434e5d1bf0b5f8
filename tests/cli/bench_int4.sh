#!/usr/bin/env bash
# bench_int4.sh WORK: bench/quant/int4.sh on a stand-in build (a script printing a `layerjit bench`
# report's "sum of the kernels alone" line and CUDA graph row, different figures for the 4-bit and
# the bf16 graphs): each projection's row has bf16 over 4-bit graph against graph and alone against
# alone, never across; a failed call's row says so and makes the exit status 1.
set -uo pipefail
work=$1
int4=$(cd "$(dirname "$0")/../.." && pwd)/bench/quant/int4.sh
rm -rf "$work" && mkdir -p "$work"
fail() { echo "bench_int4: FAILED: $*"; exit 1; }
cat >"$work/layerjit" <<'EOS'
#!/usr/bin/env bash
# 4-bit: graph 0.40, alone 0.30; bf16: graph 0.36, alone 0.33; down's 4-bit call fails.
case "$*" in *"--graph q4_down "*) echo "error: no CUDA driver" >&2; exit 1;; esac
case "$*" in *"--graph q4_"*"--packed-weights"*) g=0.40 a=0.30;; *"--graph bf16_"*) g=0.36 a=0.33;; *) echo "unexpected: $*" >&2; exit 2;; esac
echo "sum of the kernels alone: $a ms; in order (an event between neighbours): 0.5 ms"
echo "| fused | 1 | 1 | 64.0 MiB | 0.5 | 1.00x | 10.0 % |"
echo "| fused, one CUDA graph | 1 | 1 graph | 64.0 MiB | $g | 1.00x | 10.0 % |"
EOS
chmod +x "$work/layerjit"
out=$("$int4" "$work/layerjit" 16 2>&1)
rc=$?
[ $rc -eq 1 ] || fail "a failed call did not exit 1 (exit $rc): $out"
grep -q '^| 16 | qkv | 0.40 | 0.36 | 0.90x | 0.30 | 0.33 | 1.10x |$' <<<"$out" || fail "qkv's row: $out"
grep -q '^| 16 | gate_up | 0.40 | 0.36 | 0.90x | 0.30 | 0.33 | 1.10x |$' <<<"$out" || fail "gate_up's row: $out"
grep -q '^| 16 | down | failed | 0.36 | - | - | 0.33 | - |$' <<<"$out" || fail "the failed call's row: $out"
[ "$(grep -c '^== int4.sh: ' <<<"$out")" -eq 8 ] || fail "not 8 calls: $out"
echo "bench_int4: ok"
