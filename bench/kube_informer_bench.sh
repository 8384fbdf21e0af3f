#!/usr/bin/env bash
# Memory of a kube/ informer caching 10,000 projected training pods (all namespaces, with a
# job index), against the real kube-apiserver of tests/controlplane. Prints each run and the
# median of the informer's RSS growth.
#   bench/kube_informer_bench.sh [runs=3] [pods=10000]
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${NCCLGUARD_BUILD_DIR:-$root/build}
runs=${1:-3}
pods=${2:-10000}
cmake --build "$build" --target kube_informer_memory_bench >/dev/null
results=()
for ((i = 1; i <= runs; i++)); do
  line=$("$build/tests/controlplane/kube_informer_memory_bench" "$pods" 2>/dev/null)
  echo "run $i: $line"
  results+=("$(sed -n 's/.*informer_mib=\([0-9.]*\).*/\1/p' <<<"$line")")
done
median=$(printf '%s\n' "${results[@]}" | sort -n | sed -n "$(((runs + 1) / 2))p")
echo "median informer RSS growth for $pods pods: $median MiB"
