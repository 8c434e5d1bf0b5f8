#!/usr/bin/env bash
# expect.sh CODE REGEX CMD...: runs CMD, passes if it exits with CODE and its combined output matches
# the extended regex REGEX (grep -E). Used for CLI behaviour tests.
set -uo pipefail
want_code="$1"; pattern="$2"; shift 2
out="$("$@" 2>&1)"
code=$?
if [ "$code" != "$want_code" ]; then
  printf 'expected exit code %s, got %s from: %s\n--- output ---\n%s\n' "$want_code" "$code" "$*" "$out"
  exit 1
fi
if ! printf '%s' "$out" | grep -Eq -- "$pattern"; then
  printf 'output of %s does not match /%s/\n--- output ---\n%s\n' "$*" "$pattern" "$out"
  exit 1
fi
exit 0
