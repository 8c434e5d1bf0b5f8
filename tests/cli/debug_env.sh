#!/usr/bin/env bash
# debug_env.sh LAYERJIT WORK: the debug and cache variables on one small compile (examples/swiglu_mlp.lj,
# 2 kernels, sm_80): LAYERJIT_LOG=compile,cache lines cold and warm, LAYERJIT_CACHE=off compiles
# again, LAYERJIT_CACHE=readonly reads but stores nothing, LAYERJIT_DUMP_DIR writes every stage's files.
set -uo pipefail
lj=$1 work=$2
src=$(cd "$(dirname "$0")/../.." && pwd)/examples/swiglu_mlp.lj
rm -rf "$work" && mkdir -p "$work"
fail() { echo "debug_env: FAILED: $*"; exit 1; }
compile() {  # compile OUT_NAME [VAR=VALUE...]: stderr into $work/OUT_NAME.err
  local name=$1; shift
  env LAYERJIT_CACHE_DIR="$work/cache" LAYERJIT_COMPILE_WORKER=off "$@" \
    "$lj" compile "$src" --bind T=5 --arch sm_80 --quiet --emit "$work/$name" >"$work/$name.out" 2>"$work/$name.err" ||
    fail "layerjit compile ($name) exited $?: $(cat "$work/$name.err")"
}
count() { grep -c -- "$1" "$work/$2.err"; }

compile cold LAYERJIT_LOG=compile,cache
[ "$(count '^layerjit compile: lj_mlp_g[01]_matmul for sm_80: [0-9.]* s$' cold)" -eq 2 ] || fail "cold: not 2 compile lines: $(cat "$work/cold.err")"
[ "$(count '^layerjit cache: miss [0-9a-f]\{32\} lj_mlp_g' cold)" -ge 2 ] || fail "cold: no cache misses logged"
[ "$(count '^layerjit cache: stored [0-9a-f]\{32\} lj_mlp_g' cold)" -ge 2 ] || fail "cold: no stores logged"
# The cache records what ptxas reported for each kernel it compiled.
key=$(sed -n 's/^layerjit cache: stored \([0-9a-f]\{32\}\) lj_mlp_g0_matmul (sm_80)$/\1/p' "$work/cold.err")
[ -n "$key" ] || fail "no stored key for lj_mlp_g0_matmul"
show=$(LAYERJIT_CACHE_DIR="$work/cache" "$lj" cache show "$key") || fail "cache show $key: $show"
grep -Eq '^registers +[0-9]+$' <<<"$show" || fail "cache show does not give the registers: $show"
grep -Eq '^spills +0 bytes$' <<<"$show" || fail "cache show does not give the spills: $show"
compile warm LAYERJIT_LOG=all
[ "$(count '^layerjit compile:' warm)" -eq 0 ] || fail "warm: NVRTC ran: $(cat "$work/warm.err")"
[ "$(count '^layerjit cache: hit  [0-9a-f]\{32\} lj_mlp_g' warm)" -ge 2 ] || fail "warm: no cache hits logged: $(cat "$work/warm.err")"
# No LAYERJIT_LOG: nothing logged.
compile quiet
[ ! -s "$work/quiet.err" ] || fail "without LAYERJIT_LOG something was logged: $(cat "$work/quiet.err")"

compile off LAYERJIT_CACHE=off LAYERJIT_LOG=compile
[ "$(count '^layerjit compile:' off)" -eq 2 ] || fail "LAYERJIT_CACHE=off did not compile both kernels: $(cat "$work/off.err")"
grep -q "(0 from the cache, 2 compiled" "$work/off.out" || fail "LAYERJIT_CACHE=off: $(cat "$work/off.out")"

entries() { find "$1" -name '*.json' 2>/dev/null | wc -l; }
before=$(entries "$work/cache")
env LAYERJIT_CACHE_DIR="$work/ro-cache" LAYERJIT_CACHE=readonly LAYERJIT_LOG=cache LAYERJIT_COMPILE_WORKER=off \
  "$lj" compile "$src" --bind T=5 --arch sm_80 --quiet --emit "$work/ro" >"$work/ro.out" 2>"$work/ro.err" || fail "readonly compile: $(cat "$work/ro.err")"
grep -q "not stored .*LAYERJIT_CACHE=readonly" "$work/ro.err" || fail "readonly: no 'not stored' line: $(cat "$work/ro.err")"
[ "$(entries "$work/ro-cache")" -eq 0 ] || fail "LAYERJIT_CACHE=readonly wrote cache entries"
compile ro-warm LAYERJIT_CACHE=readonly LAYERJIT_LOG=compile
[ "$(count '^layerjit compile:' ro-warm)" -eq 0 ] || fail "readonly did not read the filled cache"
[ "$(entries "$work/cache")" -eq "$before" ] || fail "readonly changed the cache"

compile dumped LAYERJIT_DUMP_DIR="$work/dump"
for f in ir/swiglu_mlp.lj fusion/mlp.txt source/lj_mlp_g0_matmul.cu source/lj_mlp_g1_matmul.cu ptx/lj_mlp_g0_matmul.ptx ptx/lj_mlp_g1_matmul.ptx; do
  [ -s "$work/dump/$f" ] || fail "LAYERJIT_DUMP_DIR: $f missing or empty ($(cd "$work/dump" && find . -type f | sort | tr '\n' ' '))"
done
grep -q "extern \"C\" __global__" "$work/dump/source/lj_mlp_g0_matmul.cu" || fail "the dumped source is not the kernel"
cmp -s "$work/dump/ptx/lj_mlp_g0_matmul.ptx" "$work/dumped/lj_mlp_g0_matmul.ptx" || fail "the dumped PTX is not what compile wrote"
[ -z "$(find "$work/dump" -name '.*.tmp')" ] || fail "temporary files left in the dump directory"
grep -q "LAYERJIT_DUMP" "$work/dumped.err" && fail "LAYERJIT_DUMP_DIR also printed to stderr"
LAYERJIT_DUMP_DIR="$work/dump2" LAYERJIT_DUMP=source LAYERJIT_CACHE_DIR="$work/cache" \
  "$lj" compile "$src" --bind T=5 --arch sm_80 --quiet --emit "$work/dumped2" >/dev/null 2>&1 || fail "LAYERJIT_DUMP=source compile"
[ -d "$work/dump2/source" ] && [ ! -d "$work/dump2/ptx" ] || fail "LAYERJIT_DUMP=source with a directory wrote other stages"
echo "debug_env: ok"
