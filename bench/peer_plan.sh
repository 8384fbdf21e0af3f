#!/usr/bin/env bash
# The peer checks' plan and culprit search (core/peer_plan.h) simulated from 16 to 5,000 nodes
# with 0.2%, 1% and 5% of the nodes bad (half dead, half dropping new inbound connections):
# tests and writes a round, rounds until every bad node is named, healthy nodes named, and the
# CPU time of a round's plan and verdict. SEEDS seeds each (default 5), then the medians.
#   bench/peer_plan.sh [BUILD_DIR]
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-${NCCLGUARD_BUILD_DIR:-$root/build}}
cmake --build "$build" --target ncclguard_peer_plan_bench >/dev/null
"$build/bench/peer/ncclguard_peer_plan_bench" "${SEEDS:-5}"
