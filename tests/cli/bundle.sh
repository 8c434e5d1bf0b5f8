#!/usr/bin/env bash
# bundle.sh LAYERJIT WORKDIR: `layerjit bundle` of the built-in decode graph for sm_90a, then
# `--verify`: exit 0 on the written file, 1 naming the damage on a copy with one flipped byte, a cut
# or an appended byte; 2 on a malformed command line. A second bundle of the same graph is written
# from the cache alone (no NVRTC call) and is the same file but for its creation time.
set -euo pipefail
lj="$1"; work="$2"
rm -rf "$work"; mkdir -p "$work"
export LAYERJIT_CACHE_DIR="$work/cache"
out=$("$lj" bundle --graph llama3_8b_decode --arch sm_90a --bind B=1,C=4096 -o "$work/d.ljb" 2>"$work/cold.err")
echo "$out"
grep -Eq "^layerjit bundle: wrote $work/d.ljb: 1 plan\(s\), 7 kernels, 14 payloads \([0-9.]+ [KM]iB\) for 1 arch\(s\); 0 from the cache, 7 NVRTC compiles" <<<"$out"
test "$(grep -Ec '^  \[[0-9]/7\] lj_llama3_8b_decode_g[0-9]_[a-z_]+ compiled' "$work/cold.err")" -eq 7
ls -a "$work" | grep -q '^\.tmp-' && { echo "a temp file was left"; exit 1; }
v=$("$lj" bundle --verify "$work/d.ljb")
echo "$v"
grep -q "@llama3_8b_decode for sm_90a at B=1,C=4096: 7 kernels" <<<"$v"
grep -q "group 2 lj_llama3_8b_decode_g2_matmul 'gemv mt=1 u=4 warps=8' (default)" <<<"$v"
grep -q "sound (every checksum matches; this layerjit can load it)" <<<"$v"
warm=$("$lj" bundle --quiet --graph llama3_8b_decode --arch sm_90a --bind B=1,C=4096 -o "$work/d2.ljb")
grep -q "7 from the cache, 0 NVRTC compiles" <<<"$warm"
test "$(stat -c %s "$work/d.ljb")" -eq "$(stat -c %s "$work/d2.ljb")"
# Damage: one flipped bit near the end (a payload), a cut, an appended byte.
size=$(stat -c %s "$work/d.ljb")
cp "$work/d.ljb" "$work/flip.ljb"
printf '\x55' | dd of="$work/flip.ljb" bs=1 seek=$((size - 1000)) conv=notrunc status=none
head -c $((size - 7)) "$work/d.ljb" > "$work/cut.ljb"
{ cat "$work/d.ljb"; printf 'x'; } > "$work/long.ljb"
for f in flip cut long; do
  set +e
  err=$("$lj" bundle --verify "$work/$f.ljb" 2>&1 >/dev/null)
  rc=$?
  set -e
  echo "$f: rc=$rc: $err"
  test "$rc" -eq 1
  case $f in
    flip) grep -q "does not match its checksum: the file is corrupt" <<<"$err" ;;
    cut) grep -q "truncated" <<<"$err" ;;
    long) grep -q "1 byte(s) after the last payload" <<<"$err" ;;
  esac
done
set +e
"$lj" bundle --arch sm_90a >/dev/null 2>&1; rc_no_out=$?
"$lj" bundle -o "$work/x.ljb" >/dev/null 2>&1; rc_no_arch=$?
"$lj" bundle --arch sm_90a,,sm_80 -o "$work/x.ljb" >/dev/null 2>&1; rc_bad_list=$?
"$lj" bundle --arch sm_90a,sm_90a -o "$work/x.ljb" >/dev/null 2>&1; rc_twice=$?
set -e
test "$rc_no_out" -eq 2 && test "$rc_no_arch" -eq 2 && test "$rc_bad_list" -eq 2 && test "$rc_twice" -eq 2
test ! -e "$work/x.ljb"
echo "bundle: ok"
