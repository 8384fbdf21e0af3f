#!/usr/bin/env bash
# Times `ncclguard probe --once` (every check except the --bandwidth test) on this machine, RUNS
# times (default 11); prints each run and the median in seconds. The target is <= 3 s per node.
# Usage: bench/probe_bench.sh [BUILD_DIR] [extra probe flags, e.g. --host-root DIR]
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$root/build}
shift || true
binary=$build/cli/ncclguard
runs=${NCCLGUARD_BENCH_RUNS:-11}
[ -x "$binary" ] || { echo "probe_bench: build first: $binary not found" >&2; exit 2; }

times=()
for run in $(seq 1 "$runs"); do
  start=$(date +%s%N)
  rc=0
  "$binary" probe --once -o json "$@" >/dev/null || rc=$?
  end=$(date +%s%N)
  # 0 and 1 are reports (pass / a check failed); 2 means the probe did not run.
  [ "$rc" -le 1 ] || { echo "probe_bench: ncclguard probe exited $rc" >&2; exit 1; }
  t=$(awk -v ns=$((end - start)) 'BEGIN { printf "%.3f", ns / 1e9 }')
  times+=("$t")
  echo "run $run: ${t} s" >&2
done
median=$(printf '%s\n' "${times[@]}" | sort -n | awk '{ a[NR] = $1 } END { print a[int((NR + 1) / 2)] }')
echo "ncclguard probe --once (14 checks, no bandwidth test), median of $runs runs: ${median} s"
