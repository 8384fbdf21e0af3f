#!/usr/bin/env bash
# Webhook benchmark (DESIGN.md target: >= 5,000 mutating AdmissionReviews/s and p99 <= 5 ms at
# 1,000/s over TLS keep-alive on a 2-core machine, load generator included).
# Sends the AdmissionReview of an 8-GPU p5.48xlarge PyTorchJob worker pod
# (bench/webhook/worker-pod-review.json) to `ncclguard webhook` and, beside it, to a bare
# cpprestsdk listener with the same TLS settings that returns a fixed answer, so the report
# separates the rules' cost from the HTTP/TLS layer's. Runs RUNS times (default 5) and prints
# medians. Loopback only; each load run is bounded to SECONDS (default 5).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${NCCLGUARD_BUILD_DIR:-$root/build}
runs=${RUNS:-5}
seconds=${SECONDS_PER_RUN:-5}
connections=${CONNECTIONS:-8}
threads=${THREADS:-2}
# Another ncclguard binary to measure (a copy of an earlier build, for a before/after run).
ncclguard=${NCCLGUARD_BIN:-$build/cli/ncclguard}
"$root/scripts/build.sh" ncclguard ncclguard_loadgen ncclguard_bare_listener >/dev/null

# shellcheck source=bench/webhook_lib.sh
source "$root/bench/webhook_lib.sh"
port=18943

wait_ready() {
  for _ in $(seq 100); do
    curl -sf --cacert "$work/tls.crt" "https://127.0.0.1:$port/healthz" >/dev/null 2>&1 && return 0
    # The bare listener has no /healthz; any HTTP answer means it is up.
    curl -s -o /dev/null --cacert "$work/tls.crt" "https://127.0.0.1:$port/" 2>/dev/null && return 0
    sleep 0.1
  done
  echo "server did not start" >&2
  exit 1
}

run_server() {  # name -> starts it in the background
  case $1 in
    bare) "$build/bench/webhook/ncclguard_bare_listener" "127.0.0.1:$port" "$work/tls.crt" \
            "$work/tls.key" "$threads" &;;
    ncclguard) "$ncclguard" webhook --listen "127.0.0.1:$port" \
                 --tls-cert-file "$work/tls.crt" --tls-key-file "$work/tls.key" \
                 --threads "$threads" 2>>"$work/webhook.log" &;;
  esac
  server_pid=$!
  wait_ready
}

cpu_ticks() {  # pid -> its user + system CPU time so far, in clock ticks
  python3 -c 'import sys; f = open("/proc/%s/stat" % sys.argv[1]).read().rsplit(")", 1)[1].split(); print(int(f[11]) + int(f[12]))' "$1"
}

load() {  # expect, extra args...
  local expect=$1
  shift
  "$build/bench/webhook/ncclguard_loadgen" --port "$port" --path /mutate --body "$review" \
    --ca "$work/tls.crt" --connections "$connections" --seconds "$seconds" --expect "$expect" "$@"
}

: >"$work/results"
for run in $(seq "$runs"); do
  for server in bare ncclguard; do
    expect='"allowed":true'
    [[ $server == ncclguard ]] && expect='"patchType":"JSONPatch"'
    run_server "$server"
    echo "{\"server\":\"$server\",\"run\":$run,\"result\":$(load "$expect")}" >>"$work/results"
    # At 1,000 a second the server's own CPU time per request, which the machine's other load
    # moves far less than it moves a saturation figure.
    cpu_before=$(cpu_ticks "$server_pid")
    # The load generator exits 1 when any request failed; its report counts them.
    at_rate=$(load "$expect" --rate 1000) || true
    cpu_after=$(cpu_ticks "$server_pid")
    echo "{\"server\":\"$server\",\"run\":$run,\"cpu_ticks\":$((cpu_after - cpu_before)),\"result\":$at_rate}" >>"$work/results"
    kill "$server_pid"
    wait "$server_pid" 2>/dev/null || true
    server_pid=""
  done
done

python3 - "$work/results" "$runs" "$threads" "$connections" "$seconds" <<'PY'
import json, statistics, sys
rows = [json.loads(line) for line in open(sys.argv[1])]
runs, threads, connections, seconds = sys.argv[2:]
print(f"webhook benchmark: median of {runs} runs, {seconds} s each, {connections} TLS keep-alive "
      f"connections, {threads} listener threads, nproc={__import__('os').cpu_count()}")
tick = __import__("os").sysconf("SC_CLK_TCK")
for server in ("bare", "ncclguard"):
    sat = [r["result"] for r in rows if r["server"] == server and r["result"]["mode"] == "saturation"]
    rate = [r["result"] for r in rows if r["server"] == server and r["result"]["mode"] == "rate"]
    cpu = [r["cpu_ticks"] / tick / max(1, r["result"]["requests"]) * 1e6
           for r in rows if r["server"] == server and "cpu_ticks" in r]
    med = lambda xs, k: statistics.median(x[k] for x in xs)
    errors = sum(x["errors"] for x in sat + rate)
    print(f"  {server:9s} saturation {med(sat, 'throughput'):8.0f} req/s (p50 {med(sat, 'p50_ms'):.2f} ms)"
          f" | at 1000 req/s: p50 {med(rate, 'p50_ms'):.2f} ms, p99 {med(rate, 'p99_ms'):.2f} ms,"
          f" server CPU {statistics.median(cpu):.0f} us a request | errors {errors}")
# Each run's ncclguard saturation over the bare listener's in the same run, then the median.
pairs = {}
for r in rows:
    if r["result"]["mode"] == "saturation":
        pairs.setdefault(r["run"], {})[r["server"]] = r["result"]["throughput"]
ratios = [p["ncclguard"] / p["bare"] for p in pairs.values() if p.get("bare")]
print(f"  saturation ratio ncclguard / bare, median of the runs' own: {statistics.median(ratios):.2f}"
      f" ({', '.join(f'{x:.2f}' for x in ratios)})")
PY
