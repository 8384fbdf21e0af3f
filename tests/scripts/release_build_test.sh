#!/usr/bin/env bash
# A plain Release build, as `cmake -S . -B out -DCMAKE_BUILD_TYPE=Release` makes it (-O3,
# NCCLGUARD_WERROR at its default, off), configures and compiles TARGET... without a warning.
# GCC warns at -O3 of what scripts/build.sh's -O2 does not see (-Wrestrict in inlined
# std::string code in core/json_access.cpp, once); -Werror is added here, through
# CMAKE_CXX_FLAGS and not the option, so that a warning fails the test and its object is
# compiled again, and the warning shown again, on the next run.
#
#   release_build_test.sh BUILD_DIR CXX_COMPILER GENERATOR CUDA_INCLUDE_DIR [LAUNCHER] -- TARGET...
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
build=$1 cxx=$2 generator=$3 cuda_include=$4
shift 4
launcher=()
if [[ $1 != -- ]]; then
  launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER="$1")
  shift
fi
shift
targets=()
for t in "$@"; do targets+=(--target "$t"); done

cmake -S "$root" -B "$build" -G "$generator" -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_CXX_COMPILER="$cxx" -DCMAKE_CXX_FLAGS=-Werror \
  -DNCCLGUARD_CUDA_INCLUDE_DIR="$cuda_include" "${launcher[@]}" >/dev/null
if ! grep -qx 'NCCLGUARD_WERROR:BOOL=OFF' "$build/CMakeCache.txt"; then
  echo "release_build: NCCLGUARD_WERROR is not off by default in a plain build" >&2
  exit 1
fi
cmake --build "$build" --parallel "$(nproc)" "${targets[@]}"
