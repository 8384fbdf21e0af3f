#!/usr/bin/env bash
# How the informer stores a cached pod (kube/packed_json.h) against the MessagePack it replaced:
# bytes per pod and the milliseconds to pack and to unpack PODS of them (a pass over the pod cache
# at the issue's size). RUNS runs (default 5), then the medians.
#   bench/cache_codec.sh [BUILD_DIR]   (RUNS, PODS=100000)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-${NCCLGUARD_BUILD_DIR:-$root/build}}
runs=${RUNS:-5}
pods=${PODS:-100000}
cmake --build "$build" --target ncclguard_cache_codec_bench >/dev/null
# shellcheck source=medians.sh
source "$root/bench/medians.sh"
run_medians "$runs" "$build/bench/scale/ncclguard_cache_codec_bench" "$pods"
