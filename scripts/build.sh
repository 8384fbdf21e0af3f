#!/usr/bin/env bash
# Configures and builds ncclguard (Release-with-debug-info, Ninja) into ${NCCLGUARD_BUILD_DIR:-build}.
# Arguments name targets (e.g. `ncclguard`); none builds everything, tests included.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${NCCLGUARD_BUILD_DIR:-$root/build}
cuda_include=$("$root/scripts/cuda-headers.sh")
cmake -S "$root" -B "$build" -G Ninja -DNCCLGUARD_CUDA_INCLUDE_DIR="$cuda_include" >/dev/null
targets=()
for t in "$@"; do targets+=(--target "$t"); done
cmake --build "$build" --parallel "$(nproc)" "${targets[@]}"
