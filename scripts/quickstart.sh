#!/usr/bin/env bash
# One command from a fresh clone: install dependencies, build, and run the main job — verify and
# print the built-in Llama-3-8B decoder layer.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
cmake --preset default >/dev/null
cmake --build --preset default
build/tools/layerjit check
build/tools/layerjit check examples/llama3_8b_decoder.lj
build/tools/layerjit print --bind T=7
