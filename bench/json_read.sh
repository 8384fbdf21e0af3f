#!/usr/bin/env bash
# What core::ReadJson costs: microseconds to read the webhook's 4.2 KB AdmissionReview and
# milliseconds to read a list of 1,000 pods (about 2.4 MB, as the informers decode it), with
# nlohmann's own parser on the same bytes beside them. RUNS runs (default 5), then the medians.
#   bench/json_read.sh [BUILD_DIR]
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-${NCCLGUARD_BUILD_DIR:-$root/build}}
runs=${RUNS:-5}
cmake --build "$build" --target ncclguard_json_read_bench >/dev/null
# shellcheck source=medians.sh
source "$root/bench/medians.sh"
run_medians "$runs" "$build/bench/json/ncclguard_json_read_bench" \
  "$root/bench/webhook/worker-pod-review.json"
