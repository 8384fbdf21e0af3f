#!/usr/bin/env bash
# What one round of the probe's checks between nodes (probes/peer_round.h) costs a node at 2, 16
# and 64 nodes in the group: N probes in one process on addresses of 127.0.2.0/24, over real
# sockets and libfabric's tcp provider, the NodeValidations in memory. CPU per node, bytes read
# from and written to the API, tests, wall time: ROUNDS rounds each (default 3), then the medians.
#   bench/peer_round.sh [BUILD_DIR]
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-${NCCLGUARD_BUILD_DIR:-$root/build}}
cmake --build "$build" --target ncclguard_peer_round_bench >/dev/null
"$build/bench/peer/ncclguard_peer_round_bench" "${ROUNDS:-3}"
