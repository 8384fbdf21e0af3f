#!/usr/bin/env bash
# Runs the GPU checks, with the peer-copy bandwidth test, on a machine with NVIDIA GPUs and
# prints the report (text, then JSON), plus the time the checks took without the bandwidth test.
# Usage: probes/gpu-check.sh [BUILD_DIR] [extra probe flags, e.g. --instance-type p5.48xlarge]
# Exit status: that of `ncclguard probe` (0 pass, 1 a check failed, 2 the probe could not run).
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$root/build}
shift || true
binary=$build/cli/ncclguard
[ -x "$binary" ] || { echo "gpu-check: build first: $binary not found" >&2; exit 2; }

checks=(--check gpu-count --check gpu-p2p --check gpu-row-remap --check gpu-ecc
        --check nvlink-status --check driver-version --check nccl-version --check pci-acs)

nvidia-smi -L 2>/dev/null || echo "gpu-check: nvidia-smi not found (the probe does not need it)"
echo
start=$(date +%s%N)
"$binary" probe --once "${checks[@]}" "$@" >/dev/null
end=$(date +%s%N)
echo "GPU checks without --bandwidth: $(awk -v ns=$((end - start)) 'BEGIN { printf "%.3f", ns / 1e9 }') s"
echo
# The bandwidth test copies 256 MiB per ordered GPU pair, three times: allow for 8 GPUs.
"$binary" probe --once --bandwidth --check-timeout 300 "${checks[@]}" "$@"
"$binary" probe --once --bandwidth --check-timeout 300 -o json "${checks[@]}" "$@"
