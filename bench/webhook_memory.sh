#!/usr/bin/env bash
# The webhook under its container's memory limit (issue 29). The chart runs the webhook in the
# controller's process, so the reviews in flight share the container's limit (256Mi) with the
# controller's caches, which hold up to 150 MB at 5,000 nodes and 100k pods (BENCHMARKS.md, "The
# controller at cluster size"). This runs `ncclguard webhook` alone in a memory cgroup of what
# the caches leave (LIMIT_MIB, default 112: 256 MiB less 144), with $CONTAINER_MEMORY_LIMIT set to
# that limit as the chart sets it from the downward API, then sends 1, 2 and 4 reviews of ~7 MB
# of empty lists at once and an ordinary review after them. It prints the answers, the process's
# peak RSS, the cgroup's peak and whether the kernel's OOM killer ended the process.
#
#   NCCLGUARD=path         the binary (default: this checkout's build)
#   NCCLGUARD_BEFORE=path  another build, run first the same way (one without the headroom check
#                          ignores $CONTAINER_MEMORY_LIMIT)
#
# Root: a memory cgroup (v1 or v2) below this shell's own, removed at the end. Loopback only.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
# shellcheck source=bench/hostile_lib.sh
source "$root/bench/hostile_lib.sh"
binary=${NCCLGUARD:-${NCCLGUARD_BUILD_DIR:-$root/build}/cli/ncclguard}
limit_mib=${LIMIT_MIB:-112}
limit_bytes=$((limit_mib << 20))
[[ $EUID == 0 ]] || { echo "webhook_memory: needs root (a memory cgroup)" >&2; exit 2; }

work=$(mktemp -d)
server_pid="" cgroup=""
stop_server() {
  if [[ -n $server_pid ]]; then
    kill "$server_pid" 2>/dev/null || true
    wait "$server_pid" 2>/dev/null || true
    server_pid=""
  fi
  if [[ -n $cgroup ]]; then
    rmdir "$cgroup" 2>/dev/null || echo "webhook_memory: could not remove $cgroup" >&2
    cgroup=""
  fi
}
trap 'stop_server; rm -rf "$work"' EXIT
python3 "$root/bench/hostile/inputs.py" "$work"
loopback_certificate

# make_cgroup: a memory cgroup below this shell's own, with the limit and no swap.
if [[ -f /sys/fs/cgroup/cgroup.controllers ]]; then
  version=2
  parent=/sys/fs/cgroup$(awk -F: '$1 == "0" {print $3}' /proc/self/cgroup)
else
  version=1
  parent=/sys/fs/cgroup/memory$(awk -F: '$2 == "memory" {print $3}' /proc/self/cgroup)
fi
if ((version == 2)) && ! grep -qw memory "$parent/cgroup.subtree_control" 2>/dev/null; then
  # cgroup v2 lets a group hand its controllers to children only while it holds no process
  # itself; this shell's group does. Not rearranged here.
  echo "webhook_memory: the memory controller is not enabled for children of $parent" >&2
  exit 2
fi
make_cgroup() {
  cgroup=$parent/ncclguard-bench-$$-$1
  mkdir "$cgroup"
  if ((version == 2)); then
    echo "$limit_bytes" >"$cgroup/memory.max"
    echo 0 >"$cgroup/memory.swap.max" 2>/dev/null || true
  else
    echo "$limit_bytes" >"$cgroup/memory.limit_in_bytes"
    # Memory and swap together, where the kernel accounts swap: the limit cannot be swapped past.
    if [[ -w $cgroup/memory.memsw.limit_in_bytes ]]; then
      echo "$limit_bytes" >"$cgroup/memory.memsw.limit_in_bytes"
    fi
  fi
}
cgroup_peak_mib() {
  local file=$cgroup/memory.max_usage_in_bytes
  ((version == 2)) && file=$cgroup/memory.peak
  [[ -r $file ]] && echo $(($(cat "$file") >> 20)) || echo "?"
}
oom_kills() {
  if ((version == 2)); then
    awk '$1 == "oom_kill" {print $2}' "$cgroup/memory.events"
  else
    awk '$1 == "oom_kill" {print $2}' "$cgroup/memory.oom_control"
  fi
}

port=18945
post() { # path file -> "code"
  curl -s -o /dev/null -w '%{http_code}\n' --max-time 120 --cacert "$work/tls.crt" \
    -H 'Content-Type: application/json' -H 'Expect:' --data-binary "@$2" \
    "https://127.0.0.1:$port$1" || true
}

run() { # name binary
  local name=$1 bin=$2 at_once codes peak=0 hwm
  make_cgroup "$name"
  # shellcheck disable=SC2016 # expanded by the inner shell
  bash -c 'echo $$ >"$1/cgroup.procs" && shift && exec "$@"' _ "$cgroup" \
    env CONTAINER_MEMORY_LIMIT="$limit_bytes" "$bin" webhook --listen "127.0.0.1:$port" \
    --tls-cert-file "$work/tls.crt" --tls-key-file "$work/tls.key" --threads 4 \
    2>"$work/webhook-$name.log" &
  server_pid=$!
  local up=""
  for _ in $(seq 100); do
    curl -sf --cacert "$work/tls.crt" "https://127.0.0.1:$port/healthz" >/dev/null 2>&1 && up=1 && break
    sleep 0.1
  done
  [[ -n $up ]] || { echo "webhook_memory: $name did not start:" >&2; cat "$work/webhook-$name.log" >&2; exit 1; }
  echo "$name ($bin), in a ${limit_mib} MiB memory cgroup (v$version):"
  for at_once in 1 2 4; do
    codes=$(post_together "$at_once" /validate "$work/lists-review.json")
    hwm=$(awk '$1 == "VmHWM:" {print int($2 / 1024)}' "/proc/$server_pid/status" 2>/dev/null || true)
    printf '  %d at once: HTTP %s; process peak RSS %s MB\n' "$at_once" "$codes" "${hwm:-gone}"
  done
  printf '  then an ordinary review: HTTP %s\n' "$(post /mutate "$root/bench/webhook/worker-pod-review.json")"
  peak=$(cgroup_peak_mib)
  if kill -0 "$server_pid" 2>/dev/null; then
    echo "  process alive; cgroup peak ${peak} MiB of ${limit_mib}; OOM kills $(oom_kills)"
  else
    echo "  process ENDED; cgroup peak ${peak} MiB of ${limit_mib}; OOM kills $(oom_kills)"
  fi
  grep -h "less than half their memory\|whole memory budget" "$work/webhook-$name.log" | cut -c1-200 | sed 's/^/  log: /' || true
  stop_server
}

[[ -n ${NCCLGUARD_BEFORE:-} ]] && run before "$NCCLGUARD_BEFORE"
run after "$binary"
