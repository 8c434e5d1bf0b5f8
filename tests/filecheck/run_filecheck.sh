#!/usr/bin/env bash
# A minimal lit: runs every `// RUN:` line of a test file through bash with pipefail, after
# substituting %s (the file), %layerjit and %FileCheck. The test passes if every RUN line does.
#   run_filecheck.sh FILE LAYERJIT FILECHECK
set -euo pipefail
file="$1"; layerjit="$2"; filecheck="$3"
runs=$(grep -E '^// RUN: ' "$file" | sed -e 's|^// RUN: ||') || true
if [ -z "$runs" ]; then
  echo "$file: no RUN lines" >&2
  exit 1
fi
while IFS= read -r line; do
  cmd="${line//%s/$file}"
  cmd="${cmd//%layerjit/$layerjit}"
  cmd="${cmd//%FileCheck/$filecheck}"
  echo "RUN: $cmd"
  bash -o pipefail -c "$cmd"
done <<< "$runs"
