#!/usr/bin/env bash
# Configures and builds ncclguard (Release-with-debug-info, Ninja, warnings are errors) into
# ${NCCLGUARD_BUILD_DIR:-build}.
# Arguments name targets (e.g. `ncclguard`); none builds everything, tests included.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${NCCLGUARD_BUILD_DIR:-$root/build}
cuda_include=$("$root/scripts/cuda-headers.sh")
launcher=()
# ccache, when installed, makes rebuilds and fresh clones cheap; paths are hashed relative to the
# checkout so clones in different folders share the cache.
if command -v ccache >/dev/null 2>&1; then
  launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
  export CCACHE_BASEDIR=$root CCACHE_NOHASHDIR=1
fi
# Warnings are errors here (and so in scripts/test.sh and CI), not in a plain cmake build.
cmake -S "$root" -B "$build" -G Ninja -DNCCLGUARD_CUDA_INCLUDE_DIR="$cuda_include" \
  -DNCCLGUARD_WERROR=ON "${launcher[@]}" >/dev/null
targets=()
for t in "$@"; do targets+=(--target "$t"); done
cmake --build "$build" --parallel "$(nproc)" "${targets[@]}"
