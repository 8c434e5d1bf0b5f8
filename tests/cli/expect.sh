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
# A here-string, not a pipe: grep -q stops reading at the first match, and with pipefail the writer's
# SIGPIPE on a long output would turn a match into a failure now and then.
if ! grep -Eq -- "$pattern" <<<"$out"; then
  printf 'output of %s does not match /%s/\n--- output ---\n%s\n' "$*" "$pattern" "$out"
  exit 1
fi
exit 0
