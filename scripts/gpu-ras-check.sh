#!/usr/bin/env bash
# The GPU check of issue 49, on a machine with NVIDIA GPUs (the device machine; nothing in CI
# runs it). Each step prints what it saw and keeps it under OUT:
#   1. `ncclguard probe --once` on the real GPUs: NVML and CUDA (gpu-count, ECC, row remapping,
#      NVLink, P2P and its bandwidth where there are two GPUs), text and JSON
#   2. a real NCCL communicator over every GPU (tests/gpu/nccl_ras_check.cpp, NCCL and the CUDA
#      runtime from the PyPI wheels python3 has), its RAS read by `ncclguard ras` twice, in JSON
#      where NCCL has it (2.28.7 and later) and in text, and the text saved for `diagnose`
#   3. where the NCCL wheel ships `ncclras`: its `-v` report, and `ncclguard diagnose` of it
# Usage: scripts/gpu-ras-check.sh [BUILD_DIR]; OUT (default ./gpu-ras-out) holds the outputs.
# Exit 0 when every step ran and RAS was read healthy, else 1.
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$root/build}
out=${OUT:-$PWD/gpu-ras-out}
mkdir -p "$out"
ncclguard=$build/cli/ncclguard
program=$build/tests/gpu/ncclguard-nccl-ras-check
failed=0
step() { printf '\n== %s\n' "$*"; }
bad() { printf 'FAIL: %s\n' "$*"; failed=1; }

step "the machine"
nvidia-smi -L 2>&1 | tee "$out/nvidia-smi.txt"
"$ncclguard" --version || { echo "gpu-ras-check: $ncclguard does not run here"; exit 1; }

step "1. ncclguard probe --once on the real GPUs"
checks=(--check gpu-count --check gpu-p2p --check gpu-row-remap --check gpu-ecc
        --check nvlink-status --check driver-version --check nccl-version)
"$ncclguard" probe --once --bandwidth --check-timeout 120 "${checks[@]}" | tee "$out/probe.txt"
"$ncclguard" probe --once --bandwidth --check-timeout 120 -o json "${checks[@]}" >"$out/probe.json"
[[ -s $out/probe.json ]] || bad "probe --once -o json wrote nothing"

step "2. a real NCCL communicator and its RAS"
libs=$(python3 -c 'import nvidia, os; print(" ".join(nvidia.__path__))' 2>/dev/null)
nccl_lib=$(find $libs -name 'libnccl.so*' 2>/dev/null | head -n1)
cudart_lib=$(find $libs -name 'libcudart.so*' 2>/dev/null | head -n1)
ncclras_bin=$(find $libs -name ncclras -type f 2>/dev/null | head -n1)
echo "NCCL: ${nccl_lib:-none}; CUDA runtime: ${cudart_lib:-none}; ncclras: ${ncclras_bin:-none}"
[[ -n $nccl_lib && -n $cudart_lib ]] || { bad "no NCCL or CUDA runtime wheel under python3's nvidia package"; exit 1; }
NCCLGUARD_NCCL=$nccl_lib NCCLGUARD_CUDART=$cudart_lib NCCL_RAS_ENABLE=1 \
  "$program" --run 5 --hold 60 >"$out/program.txt" 2>&1 &
job=$!
trap 'kill "$job" 2>/dev/null; wait "$job" 2>/dev/null' EXIT
for _ in $(seq 60); do grep -q '^allreduces=' "$out/program.txt" && break; sleep 1; done
cat "$out/program.txt"
grep -q '^allreduces=' "$out/program.txt" || bad "the NCCL program did not get through its AllReduces"
"$ncclguard" ras --count 2 --every 2s -o json | tee "$out/ras.json" || bad "ncclguard ras (JSON where NCCL has it)"
"$ncclguard" ras --text | tee "$out/ras-text.txt" || bad "ncclguard ras --text"
"$ncclguard" ras --raw --text >"$out/ras-report.txt" || bad "ncclguard ras --raw"
"$ncclguard" ras --raw >"$out/ras-report.json" || bad "ncclguard ras --raw (JSON)"
"$ncclguard" diagnose "$out/ras-report.txt" "$out/ras-report.json" | tee "$out/diagnose.txt"
[[ ${PIPESTATUS[0]} == 0 ]] || bad "diagnose found something in a healthy job's RAS reports"

step "3. ncclras, where the wheel ships it"
if [[ -n $ncclras_bin ]]; then
  "$ncclras_bin" -v | tee "$out/ncclras.txt"
  "$ncclguard" diagnose "$out/ncclras.txt" | tee -a "$out/diagnose.txt"
  [[ ${PIPESTATUS[0]} == 0 ]] || bad "diagnose of ncclras -v found something"
else
  echo "no ncclras in the NCCL wheel: ncclguard's client is the only reader here"
fi
printf '\ngpu-ras-check: %s (outputs in %s)\n' "$([[ $failed == 0 ]] && echo "all steps passed" || echo "a step failed")" "$out"
exit "$failed"
