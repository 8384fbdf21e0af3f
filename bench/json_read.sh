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
lines=()
for ((i = 1; i <= runs; i++)); do
  line=$("$build/bench/json/ncclguard_json_read_bench" "$root/bench/webhook/worker-pod-review.json")
  echo "run $i: $line"
  lines+=("$line")
done
printf '%s\n' "${lines[@]}" | python3 -c '
import statistics, sys
runs = [dict(f.split("=") for f in line.split()) for line in sys.stdin if line.strip()]
print("median of", len(runs), "runs:", " ".join(
    f"{key}={statistics.median(float(r[key]) for r in runs):g}" for key in runs[0]))
'
