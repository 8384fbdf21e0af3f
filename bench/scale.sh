#!/usr/bin/env bash
# The controller at the size of a real training cluster (issue 29). Per run, on a fresh control
# plane (scripts/controlplane.sh) with a real kube-scheduler, kube-controller-manager and kwok
# (scripts/kwok.sh; loopback only):
#   1. NAMESPACES opted-in namespaces, NODES kwok nodes (p5.48xlarge: 8 GPUs, 32 EFA) and a Pass
#      NodeValidation for each, written as `ncclguard probe publish` writes them (the probe itself
#      cannot run on a simulated node);
#   2. `ncclguard controller --leader-elect=false` started on that cluster, caches synced;
#   3. JOBS gated jobs (every PYTORCH_EVERYth a PyTorchJob, the rest Indexed Jobs labelled
#      ncclguard.io/managed=true; 16-64 pods of 8 GPUs each, 50 on average) created at once:
#      time until all are served and released; kube-controller-manager then makes the Jobs'
#      pods and the driver the PyTorchJobs' (with TRAINING_OPERATOR=1, as root: the real
#      Kubeflow training operator makes them, scripts/training-operator.sh start-local; add
#      TRAINING_OPERATOR_PER_NAMESPACE=1 for one operator per namespace, each with its own
#      client limit; see BENCHMARKS.md for why not by default), kube-scheduler binds them, kwok runs them (a
#      Job's pods complete after POD_SECONDS); the controller's RSS once stable, its CPU, the
#      API server's;
#   4. churn for CHURN_SECONDS: CHURN_RATE jobs a second deleted (oldest first) and created, the
#      controller's RSS and watches sampled every 10 s;
#   5. the repaired rack: RACK_NODES p5e.48xlarge nodes failing validation, RACK_JOBS held jobs
#      needing 16-64 of them; the NodeValidations turn Pass over RACK_SECONDS; per job, from the
#      write that completed its count to its release seen on a watch: p50/p99/max (the
#      controller's work queue depth sampled every 2 s meanwhile);
#   6. the controller's requests over the whole run from the API server's audit log (the
#      controller has a user of its own): writes per job by resource, LISTs after its start.
# Prints each run (one JSON line, also appended to $SCALE_RESULTS when set) and the medians of
# RUNS runs.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${NCCLGUARD_BUILD_DIR:-$root/build}
runs=${RUNS:-3}
nodes=${NODES:-5000}
jobs=${JOBS:-2000}
namespaces=${NAMESPACES:-8}
pytorch_every=${PYTORCH_EVERY:-4}
pod_seconds=${POD_SECONDS:-600}
churn_seconds=${CHURN_SECONDS:-1800}
churn_rate=${CHURN_RATE:-1}
rack_nodes=${RACK_NODES:-500}
rack_jobs=${RACK_JOBS:-100}
rack_seconds=${RACK_SECONDS:-60}
workers=${WORKERS:-4}
qps=${QPS:-500}
run_training_operator=${TRAINING_OPERATOR:-0}
ncclguard=${NCCLGUARD_BIN:-$build/cli/ncclguard}
driver=${BENCH_DRIVER:-$build/bench/scale/ncclguard_scale_bench}
if [[ -z ${NCCLGUARD_SKIP_BUILD:-} ]]; then
  "$root/scripts/build.sh" ncclguard ncclguard_scale_bench >/dev/null
  "$root/scripts/controlplane.sh" build controlplane node kwok >/dev/null 2>&1
  if [[ $run_training_operator == 1 ]]; then
    "$root/scripts/controlplane.sh" build training >/dev/null 2>&1
  fi
fi

work=$(mktemp -d)
controller_pid="" sampler_pid=""
export NCCLGUARD_CONTROLPLANE_DIR=$work/cp
cleanup() {
  # Every step, whatever the one before returned: under errexit a `wait` answering a killed
  # child's status would end the trap here and leave the rest running.
  set +e
  [[ -n $sampler_pid ]] && kill "$sampler_pid" 2>/dev/null && wait "$sampler_pid" 2>/dev/null
  [[ -n $controller_pid ]] && kill "$controller_pid" 2>/dev/null && wait "$controller_pid" 2>/dev/null
  [[ $run_training_operator == 1 ]] && KUBECONFIG=${kubeconfig:-/dev/null} \
    "$root/scripts/training-operator.sh" stop-local "$work" >/dev/null 2>&1
  "$root/scripts/kwok.sh" stop >/dev/null 2>&1 || true
  "$root/scripts/controlplane.sh" stop >/dev/null 2>&1 || true
  if [[ -n ${KEEP_WORK:-} ]]; then echo "scale: work dir kept: $work" >&2; else rm -rf "$work"; fi
}
trap cleanup EXIT

# shellcheck source=scale_lib.sh
source "$root/bench/scale_lib.sh"
kubeconfig="" controller_kubeconfig=""

: >"$work/results"
for run in $(seq "$runs"); do
  start_scale_cluster "$work"
  operator_arg=()
  if [[ $run_training_operator == 1 ]]; then
    # TRAINING_OPERATOR_PER_NAMESPACE=1: one operator per namespace, each with its own client
    # limit (v1.8.1's 20 requests a second, not configurable).
    operator_namespaces=""
    if [[ -n ${TRAINING_OPERATOR_PER_NAMESPACE:-} ]]; then
      operator_namespaces=$(seq -f 'scale-%g' 0 $((namespaces - 1)) | tr '\n' ' ')
    fi
    KUBECONFIG=$kubeconfig TRAINING_OPERATOR_NAMESPACES=$operator_namespaces \
      "$root/scripts/training-operator.sh" start-local "$work" 2>>"$work/cp.log"
    operator_arg=(operator)
  fi
  "$driver" setup "$kubeconfig" "$nodes" "$namespaces" >"$work/setup.json"
  metrics_port=$(free_port)
  "$ncclguard" controller --kubeconfig "$controller_kubeconfig" --leader-elect=false \
    --workers "$workers" --health-listen 0 --metrics-listen "127.0.0.1:$metrics_port" \
    --kube-api-qps "$qps" --kube-api-burst "$((qps * 2))" \
    --log-level warn ${CONTROLLER_ARGS:-} 2>"$work/controller.log" &
  controller_pid=$!
  wait_metrics "$metrics_port"
  sleep 5  # the initial lists of NODES nodes and NodeValidations
  audit_mark "$work" start
  apiserver_pid=$(awk '{print $1}' "$NCCLGUARD_CONTROLPLANE_DIR/kube-apiserver.pid")
  cpu0=("$(cpu_s "$apiserver_pid")" "$(cpu_s "$controller_pid")")
  idle_kb=$(rss_kb "$controller_pid")

  # The arrival: RSS and what the allocator holds, sampled while the jobs and their pods come
  # (every 15 s, a usual Prometheus interval: at 5,000 nodes a scrape costs the controller 0.1 s
  # of CPU, which the jobs phase counts).
  sample_controller "$controller_pid" "$metrics_port" 15 >"$work/jobs-samples" &
  sampler_pid=$!
  jobs_json=$("$driver" jobs "$kubeconfig" "$namespaces" 0 "$jobs" "$pytorch_every" "$pod_seconds" \
    "${operator_arg[@]}")
  cpu1=("$(cpu_s "$apiserver_pid")" "$(cpu_s "$controller_pid")")
  # The pods: until the API server's pod count stops growing (kube-controller-manager creates the
  # Jobs' pods after their release), at most 20 minutes.
  pods_now=$(wait_pods_settle 1200)
  kill "$sampler_pid" 2>/dev/null || true; wait "$sampler_pid" 2>/dev/null || true; sampler_pid=""
  stable_kb=$(stable_rss "$controller_pid")
  scrape "$metrics_port" >"$work/metrics.stable"  # the caches' size then
  audit_mark "$work" jobs

  # Churn, RSS and the controller's watches sampled meanwhile.
  sample_controller "$controller_pid" "$metrics_port" 10 >"$work/samples" &
  sampler_pid=$!
  churn_json=$("$driver" churn "$kubeconfig" "$namespaces" "$jobs" "$churn_seconds" "$churn_rate" "$pod_seconds")
  kill "$sampler_pid" 2>/dev/null || true; wait "$sampler_pid" 2>/dev/null || true; sampler_pid=""
  audit_mark "$work" churn

  sample_controller "$controller_pid" "$metrics_port" 2 >"$work/rack-samples" &
  sampler_pid=$!
  rack_json=$("$driver" rack "$kubeconfig" "$rack_nodes" "$rack_jobs" "$rack_seconds")
  kill "$sampler_pid" 2>/dev/null || true; wait "$sampler_pid" 2>/dev/null || true; sampler_pid=""
  audit_mark "$work" end
  cpu2=("$(cpu_s "$apiserver_pid")" "$(cpu_s "$controller_pid")")
  peak_kb=$(awk '/^VmHWM:/ {print $2}' "/proc/$controller_pid/status")
  scrape "$metrics_port" >"$work/metrics.end"

  python3 "$root/bench/scale_report.py" run "$work" "$run" "$jobs" "$nodes" "$idle_kb" "$stable_kb" \
    "$peak_kb" "$pods_now" "${cpu0[*]}" "${cpu1[*]}" "${cpu2[*]}" "$jobs_json" "$churn_json" \
    "$rack_json" "$(cat "$work/setup.json")" "$(uptime)" | tee -a "$work/results" | tee -a "${SCALE_RESULTS:-/dev/null}"
  kill "$controller_pid"; wait "$controller_pid" 2>/dev/null || true; controller_pid=""
  if [[ $run_training_operator == 1 ]]; then
    KUBECONFIG=$kubeconfig "$root/scripts/training-operator.sh" stop-local "$work"
  fi
  stop_scale_cluster
done
python3 "$root/bench/scale_report.py" medians "$work/results"
