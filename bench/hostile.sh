#!/usr/bin/env bash
# Hostile input (issue 23): CPU seconds and peak memory of `ncclguard lint`/`fix` on objects with
# 100k keys (JSON, YAML), a pod with 10,000 containers and a 516-byte YAML alias bomb (10^9
# values); then the webhook's time per review for 100k nodeSelector keys and 10,000 containers, and its memory
# when 1, 2 and 4 reviews of ~7 MB of empty lists arrive at once (answer codes, peak and after).
# NCCLGUARD=path picks the binary (default: this checkout's build). Medians of RUNS (default 3).
# Loopback only; every command is bounded by `timeout`, each CLI run to 4 GiB of address space.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
# shellcheck source=bench/hostile_lib.sh
source "$root/bench/hostile_lib.sh"
binary=${NCCLGUARD:-${NCCLGUARD_BUILD_DIR:-$root/build}/cli/ncclguard}
runs=${RUNS:-3}
work=$(mktemp -d)
server_pid=""
cleanup() {
  if [[ -n $server_pid ]]; then kill "$server_pid" 2>/dev/null || true; wait "$server_pid" 2>/dev/null || true; fi
  rm -rf "$work"
}
trap cleanup EXIT
python3 "$root/bench/hostile/inputs.py" "$work"

median() { sort -n | awk '{v[NR]=$1} END {print v[int((NR+1)/2)]}'; }

# cli NAME ARGS...: "NAME: CPU s, peak RSS MB, exit code" (median CPU of RUNS).
cli() {
  local name=$1 cpu peak code
  shift
  for _ in $(seq "$runs"); do
    code=0
    # At most 4 GiB of address space: without the expansion bound the alias bomb takes all the
    # machine's memory (23 GB, then the OOM killer, on the 24 GB test machine).
    (ulimit -v 4194304 && exec /usr/bin/time -f "%U %S %M" -o "$work/time" timeout 300 \
      "$binary" "$@") >/dev/null 2>&1 || code=$?
    read -r user sys rss < <(tail -1 "$work/time")
    echo "$(echo "$user + $sys" | bc) $rss $code"
  done >"$work/rows"
  cpu=$(cut -d' ' -f1 "$work/rows" | median)
  peak=$(cut -d' ' -f2 "$work/rows" | median)
  code=$(cut -d' ' -f3 "$work/rows" | tail -1)
  printf '  %-34s %8.2f s CPU  %6d MB peak  exit %s\n' "$name" "$cpu" "$((peak / 1024))" "$code"
}

echo "ncclguard lint/fix ($binary), median of $runs:"
cli "lint, 100k labels (JSON, 1.8 MB)" lint "$work/keys.json"
cli "lint, 100k labels (YAML, 1.7 MB)" lint "$work/keys.yaml"
cli "fix, 10,000 containers (1.7 MB)" fix "$work/containers.json"
cli "lint, alias bomb (516 bytes)" lint "$work/bomb.yaml"

loopback_certificate
port=18944
"$binary" webhook --listen "127.0.0.1:$port" --tls-cert-file "$work/tls.crt" \
  --tls-key-file "$work/tls.key" --threads 4 2>"$work/webhook.log" &
server_pid=$!
for _ in $(seq 100); do
  curl -sf --cacert "$work/tls.crt" "https://127.0.0.1:$port/healthz" >/dev/null 2>&1 && break
  sleep 0.1
done
post() {  # path file -> "code seconds"
  curl -s -o /dev/null -w '%{http_code} %{time_total}\n' --max-time 300 --cacert "$work/tls.crt" \
    -H 'Content-Type: application/json' -H 'Expect:' --data-binary "@$2" "https://127.0.0.1:$port$1" || echo "000 300"
}
rss() { awk -v k="$1:" '$1 == k {print int($2 / 1024)}' "/proc/$server_pid/status"; }

echo "ncclguard webhook, 4 threads, median of $runs:"
for case in "validate keys-review.json 100k nodeSelector keys" \
  "validate containers-review.json 10,000 containers" \
  "mutate containers-review.json 10,000 containers"; do
  read -r endpoint file what <<<"$case"
  for _ in $(seq "$runs"); do post "/$endpoint" "$work/$file"; done >"$work/rows"
  printf '  /%-8s %-26s %7.2f s per review  HTTP %s\n' "$endpoint" "$what" \
    "$(cut -d' ' -f2 "$work/rows" | median)" "$(cut -d' ' -f1 "$work/rows" | tail -1)"
done
echo "  memory: $(rss VmRSS) MB before the empty-lists reviews (~7 MB each)"
for at_once in 1 2 4; do
  codes=$(post_together "$at_once" /validate "$work/lists-review.json")
  printf '  %d at once: HTTP %s; peak %s MB since start, %s MB after\n' "$at_once" "$codes" \
    "$(rss VmHWM)" "$(rss VmRSS)"
done
