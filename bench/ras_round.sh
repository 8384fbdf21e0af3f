#!/usr/bin/env bash
# What reading NCCL's RAS of its node's jobs costs the probe (probes/ras_watch.h): RasWatcher
# rounds over 1, 10 and 100 reader pods, each pod's RAS a real ncclguard-ras-standin on 127.0.0.1
# with a job of 16 or 256 ranks (healthy, or one straggling rank), the pods listed by a fake
# directory, their network namespaces found in a fake /proc; then 100 pods of which 10 never
# answer (2 s timeout). Wall and CPU time per round, queries answered, report and status.ras
# bytes, RSS: ROUNDS rounds a row (default 5), then the medians. Root: each query enters its
# pod's network namespace (exit 77 otherwise).
#   bench/ras_round.sh [BUILD_DIR]
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-${NCCLGUARD_BUILD_DIR:-$root/build}}
cmake --build "$build" --target ncclguard_ras_round_bench ncclguard-ras-standin >/dev/null
"$build/bench/ras/ncclguard_ras_round_bench" "$build/tests/ras_standin/ncclguard-ras-standin" \
  "${ROUNDS:-5}"
