#!/usr/bin/env bash
# Installs layerjit's build and test dependencies from Debian/Ubuntu packages (run as root or with
# sudo available). Idempotent: does nothing when everything is present. The CUDA toolkit (NVRTC and
# headers) is not a Debian package here; it is checked for and named if missing.
set -euo pipefail

packages=(
  cmake ninja-build g++           # build
  libfmt-dev                      # formatting (compiled into our binaries by deps/fmt_impl.cpp: no libfmt.so at run time)
  libxxhash-dev                   # XXH3-128 cache keys (inlined)
  nlohmann-json3-dev              # cache metadata files
  libcli11-dev                    # the CLI's command lines (header-only, tools/args.cpp)
  graphviz                        # `layerjit plan --format svg` and the CI check of --format dot
  catch2                          # unit tests (v2)
  llvm-14-tools                   # FileCheck for golden tests
  clang-14 libclang-rt-14-dev     # libFuzzer + sanitizers for the parser fuzz target
  python3-dev pybind11-dev        # the Python module (python/; -DLAYERJIT_PYTHON)
  python3-numpy                   # its tests hand it numpy arrays (refused: host memory)
)

missing=()
for p in "${packages[@]}"; do
  dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p")
done

if ((${#missing[@]})); then
  echo "setup: installing ${missing[*]}"
  SUDO=""
  if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
else
  echo "setup: all Debian packages present"
fi

cuda_root="${CUDAToolkit_ROOT:-/usr/local/cuda}"
if [ ! -f "$cuda_root/include/nvrtc.h" ]; then
  echo "setup: CUDA toolkit not found at $cuda_root (need NVRTC and the CUDA headers; no GPU or driver needed)." >&2
  echo "       Install NVIDIA's CUDA toolkit (12.8 or newer) or set CUDAToolkit_ROOT." >&2
  exit 1
fi
echo "setup: CUDA toolkit at $cuda_root"
