#!/usr/bin/env bash
# Controller benchmark (issue 5 targets: <= 10 s and <= 40 MB). Per run, on a fresh control
# plane (scripts/controlplane.sh: real etcd + kube-apiserver, loopback only):
#   1. an opted-in namespace and NODES validated p5.48xlarge nodes (NodeValidation Pass);
#   2. `ncclguard controller --leader-elect=false` started and its caches synced;
#   3. JOBS gated PyTorchJobs (ncclguard.io/gate=pending, suspended, master + worker of 8 GPUs)
#      created at once by 16 client threads: time until every one has its Service and is
#      released (suspend false, gate=admitted), measured from the first create;
#   4. PODS pods of those jobs created, then the controller's RSS once it stops growing.
# Prints each run and the medians of RUNS runs (default 3). CONTROLLER_ARGS: more flags for the
# controller (e.g. `--policy-reports=false`: the background audit off).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${NCCLGUARD_BUILD_DIR:-$root/build}
runs=${RUNS:-3}
jobs=${JOBS:-1000}
pods=${PODS:-10000}
nodes=${NODES:-4}
workers=${WORKERS:-4}
qps=${QPS:-500}  # the controller's --kube-api-qps (its default)
ncclguard=${NCCLGUARD_BIN:-$build/cli/ncclguard}
driver=${BENCH_DRIVER:-$build/bench/controller/ncclguard_controller_bench}
[[ -n ${NCCLGUARD_SKIP_BUILD:-} ]] || "$root/scripts/build.sh" ncclguard ncclguard_controller_bench >/dev/null

# The PyTorchJob and JobSet CRDs are their projects' own, from the Go module cache.
# shellcheck source=../scripts/controlplane/versions.sh
source "$root/scripts/controlplane/versions.sh"
training_operator=$("$root/scripts/controlplane.sh" source-dir "github.com/kubeflow/training-operator@$TRAINING_OPERATOR_VERSION")
jobset=$("$root/scripts/controlplane.sh" source-dir "sigs.k8s.io/jobset@$JOBSET_VERSION")

work=$(mktemp -d)
controller_pid=""
export NCCLGUARD_CONTROLPLANE_DIR=$work/cp
cleanup() {
  # Every step, whatever the one before returned: under errexit a `wait` answering a killed
  # child's status would end the trap here and leave the rest running.
  set +e
  [[ -n $controller_pid ]] && kill "$controller_pid" 2>/dev/null && wait "$controller_pid" 2>/dev/null
  "$root/scripts/controlplane.sh" stop >/dev/null 2>&1 || true
  rm -rf "$work"
}
trap cleanup EXIT

rss_kb() { awk '/^VmRSS:/ {print $2}' "/proc/$1/status"; }
# CPU seconds (user + system) a process has used so far.
cpu_s() { awk -v hz="$(getconf CLK_TCK)" '{printf "%.2f", ($14 + $15) / hz}' "/proc/$1/stat"; }

: >"$work/results"
for run in $(seq "$runs"); do
  "$root/scripts/controlplane.sh" start >"$work/cp.log" 2>&1
  kubeconfig=$NCCLGUARD_CONTROLPLANE_DIR/kubeconfig
  kubectl=$(sed -n 's/^export PATH=\(.*\):"\$PATH"$/\1/p' "$work/cp.log")/kubectl
  for crd in "$training_operator/manifests/base/crds/kubeflow.org_pytorchjobs.yaml" \
    "$root/tests/controlplane/crds/mpijob-crd.yaml" "$jobset/config/components/crd/bases/jobset.x-k8s.io_jobsets.yaml" \
    "$root"/crds/{nodevalidation,ncclpolicy}.yaml; do
    "$kubectl" --kubeconfig "$kubeconfig" apply --server-side -f "$crd" >/dev/null
  done
  "$kubectl" --kubeconfig "$kubeconfig" wait --for condition=established --timeout=60s \
    crd --all >/dev/null
  "$driver" setup "$kubeconfig" bench "$nodes"
  "$ncclguard" controller --kubeconfig "$kubeconfig" --leader-elect=false --workers "$workers" \
    --health-listen 0 \
    --kube-api-qps "$qps" --kube-api-burst "$((qps * 2))" \
    --log-level warn ${CONTROLLER_ARGS:-} 2>"$work/controller.log" &
  controller_pid=$!
  sleep 2  # caches of an almost empty cluster sync in well under a second
  idle_kb=$(rss_kb "$controller_pid")
  # Who burns the 2 cores during the jobs phase: kube-apiserver, etcd and the controller.
  apiserver_pid=$(awk '{print $1}' "$NCCLGUARD_CONTROLPLANE_DIR/kube-apiserver.pid")
  etcd_pid=$(awk '{print $1}' "$NCCLGUARD_CONTROLPLANE_DIR/etcd.pid")
  cpu_before=("$(cpu_s "$apiserver_pid")" "$(cpu_s "$etcd_pid")" "$(cpu_s "$controller_pid")")
  jobs_json=$("$driver" jobs "$kubeconfig" bench "$jobs")
  cpu_json=$(python3 -c 'import sys; a=sys.argv[1:4]; b=sys.argv[4:7]
print("{\"apiserver\":%.1f,\"etcd\":%.1f,\"controller\":%.1f}" % tuple(float(y)-float(x) for x,y in zip(a,b)))' \
    "${cpu_before[@]}" "$(cpu_s "$apiserver_pid")" "$(cpu_s "$etcd_pid")" "$(cpu_s "$controller_pid")")
  pods_json=$("$driver" pods "$kubeconfig" bench "$pods")
  # RSS once the pod events have been taken in: stable over three 1 s samples (at most 120 s).
  last=0 stable=0
  for _ in $(seq 120); do
    now=$(rss_kb "$controller_pid")
    if [[ $now == "$last" ]]; then stable=$((stable + 1)); else stable=0; fi
    last=$now
    [[ $stable -ge 3 ]] && break
    sleep 1
  done
  echo "{\"run\":$run,\"idle_rss_kb\":$idle_kb,\"rss_kb\":$last,\"jobs\":$jobs_json,\"jobs_cpu_s\":$cpu_json,\"pods\":$pods_json}" \
    | tee -a "$work/results"
  kill "$controller_pid"
  wait "$controller_pid" 2>/dev/null || true
  controller_pid=""
  "$root/scripts/controlplane.sh" stop >/dev/null 2>&1
done

python3 - "$work/results" "$runs" "$jobs" "$pods" "$workers" "$qps" <<'PY'
import json, statistics, sys
rows = [json.loads(line) for line in open(sys.argv[1])]
runs, jobs, pods, workers, qps = sys.argv[2:]
released = [r["jobs"]["served_and_released_s"] for r in rows if "served_and_released_s" in r["jobs"]]
rss = [r["rss_kb"] / 1024 for r in rows]
idle = [r["idle_rss_kb"] / 1024 for r in rows]
print(f"controller benchmark: median of {runs} runs, {workers} workers, --kube-api-qps {qps}, "
      f"nproc={__import__('os').cpu_count()}")
if released:
    print(f"  {jobs} gated PyTorchJobs created at once -> all served and released: "
          f"{statistics.median(released):.2f} s (target <= 10 s)")
print(f"  RSS with {jobs} jobs + {pods} pods cached: {statistics.median(rss):.1f} MB "
      f"(target <= 40 MB; idle {statistics.median(idle):.1f} MB)")
PY
