#!/usr/bin/env bash
# help_all.sh LAYERJIT: every command's --help (and -h) exits 0 and has the same shape: its usage
# line, its text, and the option list the parser was given, --help among them.
set -uo pipefail
lj=$1
commands=$("$lj" --help | awk '/^commands:/ { on = 1; next } on && /^  [a-z]/ { print $1 } on && /^$/ { exit }')
[ -n "$commands" ] || { echo "no commands listed by layerjit --help"; exit 1; }
for c in $commands; do
  for h in --help -h; do
    out=$("$lj" "$c" "$h" 2>&1) || { echo "layerjit $c $h exited $?"; exit 1; }
    grep -q "^usage: layerjit $c" <<<"$out" || { echo "layerjit $c $h: no 'usage: layerjit $c' line"; echo "$out"; exit 1; }
    grep -q "^options:" <<<"$out" || { echo "layerjit $c $h: no options list"; echo "$out"; exit 1; }
    grep -q "^  -h,--help" <<<"$out" || { echo "layerjit $c $h: --help is not in its options list"; exit 1; }
  done
done
echo "help ok for: $(echo $commands)"
