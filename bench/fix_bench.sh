#!/usr/bin/env bash
# Times `ncclguard fix` over N generated manifests (default 1,000 files, one PyTorchJob each,
# variations of examples/pytorchjob-broken.yaml), RUNS times (default 5); prints each run and
# the median in seconds.  Usage: bench/fix_bench.sh [BUILD_DIR]
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$root/build}
binary=$build/cli/ncclguard
count=${NCCLGUARD_BENCH_MANIFESTS:-1000}
runs=${NCCLGUARD_BENCH_RUNS:-5}
[ -x "$binary" ] || { echo "fix_bench: build first: $binary not found" >&2; exit 2; }

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
python3 - "$root/examples/pytorchjob-broken.yaml" "$work" "$count" <<'PY'
import sys
template, out, count = open(sys.argv[1]).read(), sys.argv[2], int(sys.argv[3])
types = ["p5.48xlarge", "p4d.24xlarge", "p5en.48xlarge", "p5e.48xlarge"]
for i in range(count):
    text = template.replace("llama-pretrain", f"job-{i:04d}")
    text = text.replace("p5.48xlarge", types[i % len(types)])
    text = text.replace("replicas: 1\n      restartPolicy: OnFailure\n      template:\n        spec:\n          nodeSelector", "replicas: %d\n      restartPolicy: OnFailure\n      template:\n        spec:\n          nodeSelector" % (1 + i % 8), 1)
    open(f"{out}/job-{i:04d}.yaml", "w").write(text)
PY

times=()
for run in $(seq 1 "$runs"); do
  start=$(date +%s%N)
  "$binary" fix "$work"/*.yaml >"$work/out.txt"
  end=$(date +%s%N)
  t=$(awk -v ns=$((end - start)) 'BEGIN { printf "%.3f", ns / 1e9 }')
  times+=("$t")
  echo "run $run: ${t} s" >&2
done
docs=$(grep -c '^kind: PyTorchJob' "$work/out.txt")
median=$(printf '%s\n' "${times[@]}" | sort -n | awk '{ a[NR] = $1 } END { print a[int((NR + 1) / 2)] }')
echo "ncclguard fix: $count manifests ($docs fixed documents), median of $runs runs: ${median} s"
