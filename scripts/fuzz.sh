#!/usr/bin/env bash
# The libFuzzer harnesses of fuzz/ (docs/fuzzing.md), built with clang and the sanitizers into
# ${NCCLGUARD_FUZZ_BUILD_DIR:-build-fuzz}, apart from the normal gcc build.
#   scripts/fuzz.sh --list              the targets, one a line
#   scripts/fuzz.sh TARGET SECONDS      builds TARGET and fuzzes it; exits 1 on a finding
#   scripts/fuzz.sh --ci [SECONDS]      every target over its committed corpus, then SECONDS
#                                       (default 3) of fresh fuzzing each; exits 1 on a finding
#   scripts/fuzz.sh --build             only builds every target (scripts/test.sh runs it at low
#                                       priority beside the tests, before fuzz_regression's turn)
# Committed seeds and every past finding live in fuzz/corpus/TARGET/ and are only read; what a
# run discovers goes to BUILD/fuzz-corpus/TARGET/, findings to BUILD/fuzz-findings/TARGET/.
# Exits 77 where clang or libFuzzer is missing (scripts/bootstrap.sh installs them).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${NCCLGUARD_FUZZ_BUILD_DIR:-$root/build-fuzz}
targets=(webhook_review manifest_fix kubeconfig watch_stream policy probe_parsers log_matchers
  json_reader image_pin)

usage() {
  echo "usage: $0 --list | TARGET SECONDS | --ci [SECONDS]" >&2
  exit 2
}

known() {
  local t
  for t in "${targets[@]}"; do [[ $t == "$1" ]] && return 0; done
  return 1
}

compiler() {
  local c
  for c in clang++-14 clang++; do
    if command -v "$c" >/dev/null 2>&1; then
      echo "$c"
      return 0
    fi
  done
  return 1
}

build_targets() {
  local cxx
  if ! cxx=$(compiler) || ! echo 'int main(){}' |
    "$cxx" -x c++ -fsanitize=fuzzer-no-link,address -o /dev/null - 2>/dev/null; then
    echo "fuzz.sh: clang with libFuzzer not found (apt-get install clang-14 libclang-rt-14-dev)" >&2
    exit 77
  fi
  local launcher=()
  if command -v ccache >/dev/null 2>&1; then
    launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
    export CCACHE_BASEDIR=$root CCACHE_NOHASHDIR=1
  fi
  local cuda_include
  cuda_include=$("$root/scripts/cuda-headers.sh")
  # One build at a time in this folder: a second waits, then finds the targets up to date.
  mkdir -p "$build"
  exec 8>"$build/.fuzz-build.lock"
  flock 8
  cmake -S "$root" -B "$build" -G Ninja -DCMAKE_CXX_COMPILER="$cxx" -DNCCLGUARD_FUZZ=ON \
    -DCMAKE_BUILD_TYPE=RelWithDebInfo -DNCCLGUARD_CUDA_INCLUDE_DIR="$cuda_include" \
    -DNCCLGUARD_WERROR=ON "${launcher[@]}" >/dev/null
  local args=()
  for t in "$@"; do args+=(--target "fuzz_$t"); done
  cmake --build "$build" --parallel "$(nproc)" "${args[@]}" >&2
  exec 8>&-
}

# run TARGET SECONDS [EXTRA...]: fuzzes for SECONDS after running every committed input once.
run() {
  local target=$1 seconds=$2
  shift 2
  local seeds=$root/fuzz/corpus/$target work=$build/fuzz-corpus/$target
  local findings=$build/fuzz-findings/$target
  mkdir -p "$work" "$findings"
  local args=(-max_total_time="$seconds" -error_exitcode=1 -timeout_exitcode=1 -timeout=10
    -rss_limit_mb=2048 -max_len=65536 -print_final_stats=1 -artifact_prefix="$findings/" "$@")
  [[ -f $root/fuzz/dict/$target.dict ]] && args+=(-dict="$root/fuzz/dict/$target.dict")
  if ! ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 \
    "$build/fuzz/fuzz_$target" "${args[@]}" "$work" "$seeds"; then
    echo "fuzz.sh: $target: FINDING, inputs in $findings (add each to fuzz/corpus/$target/" \
      "and a unit test)" >&2
    return 1
  fi
}

case "${1:-}" in
  --list)
    printf '%s\n' "${targets[@]}"
    ;;
  --build)
    build_targets "${targets[@]}"
    ;;
  --ci)
    seconds=${2:-3}
    build_targets "${targets[@]}"
    rm -rf "$build/fuzz-corpus" # what earlier long runs found is theirs; CI starts from the commit
    failed=()
    for t in "${targets[@]}"; do
      # CI's fresh part is reproducible: a fixed seed and a fixed number of runs (the time is
      # only a bound), so a red CI means a regression, not a lucky draw; long runs explore.
      echo "== fuzz $t: committed corpus, then $((seconds * 1000)) fresh runs (seed 1)" >&2
      run "$t" "$((seconds * 10))" -seed=1 -runs="$((seconds * 1000))" || failed+=("$t")
    done
    if ((${#failed[@]})); then
      echo "fuzz.sh: findings in: ${failed[*]}" >&2
      exit 1
    fi
    ;;
  "" | -*) usage ;;
  *)
    [[ $# == 2 && $2 =~ ^[0-9]+$ ]] || usage
    known "$1" || { echo "fuzz.sh: unknown target '$1' (see --list)" >&2; exit 2; }
    build_targets "$1"
    run "$1" "$2"
    ;;
esac
