# shellcheck shell=bash
# Sourced by the benchmarks whose binary prints one "key=value ..." line a run:
#   run_medians RUNS COMMAND...   runs COMMAND RUNS times, prints each line ("run N: ...") and
#                                 then the median of every numeric key but `checksum`.
run_medians() {
  local runs=$1 i line
  shift
  local -a lines=()
  for ((i = 1; i <= runs; i++)); do
    line=$("$@")
    echo "run $i: $line"
    lines+=("$line")
  done
  printf '%s\n' "${lines[@]}" | python3 -c '
import statistics, sys
runs = [dict(f.split("=") for f in line.split()) for line in sys.stdin if line.strip()]
print("median of", len(runs), "runs:", " ".join(
    f"{key}={statistics.median(float(r[key]) for r in runs):g}" for key in runs[0]
    if key != "checksum"))
'
}
