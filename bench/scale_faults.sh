#!/usr/bin/env bash
# Faults at scale (issue 29). On a fresh control plane (scripts/controlplane.sh; no scheduler nor
# kwok: a released Job's pods do not matter here), NODES validated p5.48xlarge nodes and, in the
# opted-in namespace "held", 64 p5e.48xlarge nodes of which PASSING pass and JOBS gated Indexed
# Jobs needing 16-64 of them (about half wait: ~2,000 of the default 4,000). Two controllers run
# with --leader-elect=true, both through a TCP proxy (bench/scale_fault_proxy.py) in front of the
# API server. Then, one after the other, each followed by EXTRA new jobs and a check:
#   1. kube-apiserver restarted (controlplane.sh stop-apiserver, 5 s, start-apiserver);
#   2. the leader killed (SIGKILL by pid): the other takes the Lease over;
#   3. 10% of the long-lived connections (the watches) cut every 2 s for 30 s, while 8 more
#      nodes pass (PASSING+8): more jobs must be released, none needing more.
# The check (bench/scale/scale_bench.cpp verify): every job has exactly one Service, each is
# released iff its nodes pass, no ncclguard Event twice for the same job, reason and note.
# Prints PASS/FAIL lines; exit 1 on any FAIL.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${NCCLGUARD_BUILD_DIR:-$root/build}
nodes=${NODES:-1000}
jobs=${JOBS:-4000}
extra=${EXTRA:-200}
passing=${PASSING:-40}
ncclguard=${NCCLGUARD_BIN:-$build/cli/ncclguard}
driver=${BENCH_DRIVER:-$build/bench/scale/ncclguard_scale_bench}
[[ -n ${NCCLGUARD_SKIP_BUILD:-} ]] || "$root/scripts/build.sh" ncclguard ncclguard_scale_bench >/dev/null

work=$(mktemp -d)
proxy_pid="" pids=()
export NCCLGUARD_CONTROLPLANE_DIR=$work/cp
cleanup() {
  # Every step, whatever the one before returned: under errexit a `wait` answering a killed
  # child's status would end the trap here and leave the rest running.
  set +e
  local pid
  for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null && wait "$pid" 2>/dev/null; done
  [[ -n $proxy_pid ]] && kill "$proxy_pid" 2>/dev/null && wait "$proxy_pid" 2>/dev/null
  "$root/scripts/controlplane.sh" stop >/dev/null 2>&1 || true
  if [[ -n ${KEEP_WORK:-} ]]; then echo "scale_faults: work dir kept: $work" >&2; else rm -rf "$work"; fi
}
trap cleanup EXIT

# shellcheck source=scale_lib.sh
source "$root/bench/scale_lib.sh"
kubeconfig="" controller_kubeconfig="" kubectl=""
start_scale_cluster "$work" nokwok
"$driver" setup "$kubeconfig" "$nodes" 1 >/dev/null
"$driver" hold "$kubeconfig" held "$jobs" "$passing" >/dev/null

# The proxy, and the controllers' kubeconfig pointing at it.
apiserver_port=$(sed -n 's/^APISERVER_URL=.*://p' "$NCCLGUARD_CONTROLPLANE_DIR/controlplane.env")
python3 "$root/bench/scale_fault_proxy.py" "$apiserver_port" "$work/proxy.port" "$work/cuts.log" &
proxy_pid=$!
for _ in $(seq 50); do [[ -s $work/proxy.port ]] && break; sleep 0.1; done
sed "s#https://127.0.0.1:$apiserver_port#https://127.0.0.1:$(cat "$work/proxy.port")#" \
  "$controller_kubeconfig" >"$work/proxied.kubeconfig"

declare -A metrics_port=() name_of=()
start_controller() {
  local port; port=$(free_port)
  "$ncclguard" controller --kubeconfig "$work/proxied.kubeconfig" --leader-elect=true \
    --lease-namespace default --health-listen 0 --metrics-listen "127.0.0.1:$port" \
    --log-level warn ${CONTROLLER_ARGS:-} 2>>"$work/controller-$1.log" &
  pids+=("$!")
  metrics_port[$!]=$port
  name_of[$!]=$1
}
start_controller a
start_controller b

# A replica that exited (it lost the Lease: it exits so that its restart starts fresh) is started
# again, as its Deployment would.
restart_exited() {
  local pid name
  for pid in "${pids[@]}"; do
    [[ -n ${name_of[$pid]:-} ]] || continue
    kill -0 "$pid" 2>/dev/null && continue
    wait "$pid" 2>/dev/null || true
    name=${name_of[$pid]}
    unset "name_of[$pid]"
    echo "controller $name (pid $pid) exited ($(tail -n 1 "$work/controller-$name.log")); started again"
    start_controller "$name"
  done
}

leader() {
  local pid
  for pid in "${pids[@]}"; do
    kill -0 "$pid" 2>/dev/null || continue
    # awk reads it all (`grep -q` would exit early, fail curl's write and so the pipeline).
    scrape "${metrics_port[$pid]}" 2>/dev/null |
      awk '/^ncclguard_leader_election_master_status/ {v = $2} END {exit !(v == 1)}' &&
      { printf '%s' "$pid"; return 0; }
  done
  return 1
}

failed=0
# check <what> <passing nodes>: verify until it passes (a fault's effects settle), at most 300 s.
check() {
  local what="$1" passing_now="$2" begin=$SECONDS out
  while :; do
    if out=$("$driver" verify "$kubeconfig" held "$passing_now" 2>&1); then
      printf '%s\n' "$out" | sed "s/^/[$what, settled in $((SECONDS - begin)) s] /"
      return 0
    fi
    if ((SECONDS - begin > 300)); then
      printf '%s\n' "$out" | sed "s/^/[$what, after 300 s] /"
      failed=1
      return 0
    fi
    sleep 5
  done
}

total=$jobs
check "start: $jobs jobs, $passing of 64 nodes pass" "$passing"
held_now=$(awk -v p="$passing" 'BEGIN {n = 0; for (j = 0; j < '"$jobs"'; ++j) if (16 + (j * 37) % 49 > p) ++n; print n}')
echo "jobs held: $held_now of $jobs"

"$root/scripts/controlplane.sh" stop-apiserver >/dev/null 2>&1
sleep 5
"$root/scripts/controlplane.sh" start-apiserver >/dev/null 2>&1
total=$((total + extra))
"$driver" hold "$kubeconfig" held "$total" "$passing" >/dev/null
restart_exited
check "kube-apiserver restarted, $extra jobs more" "$passing"

begin=$SECONDS
until old_leader=$(leader); do
  if ((SECONDS - begin >= 60)); then
    echo "FAIL no controller leads within 60 s"
    "$kubectl" --kubeconfig "$kubeconfig" get lease -n default ncclguard-controller -o jsonpath='{.spec}{"\n"}' || true
    for pid in "${!name_of[@]}"; do
      echo "controller ${name_of[$pid]} (pid $pid): $(scrape "${metrics_port[$pid]}" | grep '^ncclguard_leader_election_master_status')"
    done
    exit 1
  fi
  sleep 0.5
done
kill -KILL "$old_leader"
wait "$old_leader" 2>/dev/null || true
unset "name_of[$old_leader]"
total=$((total + extra))
"$driver" hold "$kubeconfig" held "$total" "$passing" >/dev/null
begin=$SECONDS
until new_leader=$(leader); do
  ((SECONDS - begin < 60)) || { echo "FAIL no new leader within 60 s"; failed=1; break; }
  sleep 0.5
done
[[ -n ${new_leader:-} ]] && echo "PASS leader change: pid $old_leader killed, pid $new_leader leads after $((SECONDS - begin)) s"
check "leader killed, $extra jobs more" "$passing"

passing=$((passing + 8))
total=$((total + extra))
(for _ in $(seq 15); do kill -USR1 "$proxy_pid"; sleep 2; done) &
cutter=$!
"$driver" hold "$kubeconfig" held "$total" "$passing" >/dev/null
wait "$cutter"
echo "connections cut: $(awk '{s += $3} END {print s + 0}' "$work/cuts.log") in 15 rounds of 10%"
restart_exited
check "10% of watches cut every 2 s for 30 s, $passing nodes pass, $extra jobs more" "$passing"
exit "$failed"
