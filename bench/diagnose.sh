#!/usr/bin/env bash
# Throughput and peak RSS of `ncclguard diagnose` on a synthetic NCCL training log: the init
# lines of a 16-rank EFA run (NCCL 2.23, aws-ofi-nccl), then PyTorch step lines with NCCL INFO
# and warning lines mixed in, repeated to SIZE_MB (default 1024). RUNS runs (default 5); prints
# each run's MB/s and peak RSS (GNU time), then the medians.
# Usage: bench/diagnose.sh [BUILD_DIR]   (NCCLGUARD_BENCH_LOG_MB, NCCLGUARD_BENCH_RUNS)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$root/build}
binary=$build/cli/ncclguard
size_mb=${NCCLGUARD_BENCH_LOG_MB:-1024}
runs=${NCCLGUARD_BENCH_RUNS:-5}
[ -x "$binary" ] || { echo "diagnose.sh: build first: $binary not found" >&2; exit 2; }
[ -x /usr/bin/time ] || { echo "diagnose.sh: needs GNU time (/usr/bin/time)" >&2; exit 2; }

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
log=$work/train.log
python3 - "$root/tests/fixtures/logs/efa-nccl2.23-ofi1.13.log" "$log" "$size_mb" <<'PY'
import sys
init, out, size_mb = open(sys.argv[1]).read(), sys.argv[2], int(sys.argv[3])
lines = []
for step in range(2000):
    rank = step % 16
    lines.append(f"[rank{rank}]: step {step} loss {2.5 - step / 10000:.4f} lr 3.0e-04 "
                 f"throughput 2210 samples/s grad_norm 0.98 mem 61.2GiB\n")
    if step % 10 == 0:
        lines.append(f"worker-{rank // 8}:{100 + rank}:{200 + rank} [{rank % 8}] NCCL INFO "
                     f"comm 0x55d0c8 rank {rank} nranks 16 cudaDev {rank % 8} busId 101c0 - Init COMPLETE\n")
    if step % 50 == 0:
        lines.append("[W reducer.cpp:1360] Warning: find_unused_parameters=True was specified "
                     "in DDP constructor, but did not find any unused parameters\n")
block = "".join(lines).encode()
target = size_mb * 1024 * 1024
with open(out, "wb") as f:
    f.write(init.encode())
    written = len(init)
    while written < target:
        chunk = block[: target - written]
        f.write(chunk)
        written += len(chunk)
PY
bytes=$(stat -c %s "$log")

rates=() rss=()
for run in $(seq 1 "$runs"); do
  start=$(date +%s%N)
  /usr/bin/time -f '%M' -o "$work/rss" "$binary" diagnose -o json "$log" >"$work/out.json" || true
  end=$(date +%s%N)
  rate=$(python3 -c "print(f'{$bytes / 1048576 / (($end - $start) / 1e9):.1f}')")
  rates+=("$rate")
  rss+=("$(cat "$work/rss")")
  echo "run $run: ${rate} MB/s, peak RSS $(cat "$work/rss") KiB"
done
median() { printf '%s\n' "$@" | sort -n | awk '{a[NR]=$1} END {print a[int((NR + 1) / 2)]}'; }
echo "log: $((bytes / 1048576)) MiB; findings: $(python3 -c "import json; print(len(json.load(open('$work/out.json'))))")"
echo "median: $(median "${rates[@]}") MB/s, peak RSS $(median "${rss[@]}") KiB"
