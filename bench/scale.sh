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
#   5. the repaired rack: RACK_NODES p5e.48xlarge nodes failing validation, RACK_JOBS held jobs
#      needing 16-64 of them; the NodeValidations turn Pass over RACK_SECONDS; per job, whether
#      its release came after the write that completed its count in etcd's order (one before it
#      is a gate bug: the run fails, naming the job), and from that write's start and from its
#      return to the release seen on a watch: p50/p99/max (the controller's work queue depth
#      sampled every 2 s meanwhile);
#   6. the controller's requests over the whole run from the API server's audit log (the
#      controller has a user of its own): writes per job by resource, LISTs after its start.
# Prints each run (one JSON line, also appended to $SCALE_RESULTS when set) and the medians of
# RUNS runs. A failed step says so on stderr (the step, its command, the driver's error, the end
# of the controller's log) and keeps the work folder with the logs (KEEP_WORK=1 keeps it always).
# A run whose phase failed after measuring (jobs not all released, an early release in the
# repaired rack) is still reported, with "failed" set, left out of the medians; the bench then
# exits 1.
set -eEuo pipefail
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

work=$(mktemp -d)
controller_pid="" sampler_pid="" driver_pid="" run=0 step="build" failed_command="" failed_runs=()
export NCCLGUARD_CONTROLPLANE_DIR=$work/cp
# What failed first, for the report on exit (errtrace: within functions too): the line's text
# where the command is a function's `return`.
on_error() {
  local rc=$1 line=$2 file=$3 command=$4
  [[ -n $failed_command ]] && return
  [[ $command == return* ]] && command=$(sed -n "${line}s/^ *//p" "$file")
  failed_command="$command (${file#"$root"/}:$line, exit $rc)"
}
trap 'on_error $? "$LINENO" "${BASH_SOURCE[0]}" "$BASH_COMMAND"' ERR
# keep_logs <dir>: the control plane's and kwok's logs, which stopping them removes.
keep_logs() {
  mkdir -p "$1"
  cp "$NCCLGUARD_CONTROLPLANE_DIR"/*.log "$NCCLGUARD_CONTROLPLANE_DIR"/kwok/*.log "$1/" 2>/dev/null
}
cleanup() {
  local status=$? log
  # Every step, whatever the one before returned: under errexit a `wait` answering a killed
  # child's status would end the trap here and leave the rest running.
  set +e
  trap - ERR
  [[ -n $driver_pid ]] && kill "$driver_pid" 2>/dev/null && wait "$driver_pid" 2>/dev/null
  [[ -n $sampler_pid ]] && kill "$sampler_pid" 2>/dev/null && wait "$sampler_pid" 2>/dev/null
  [[ -n $controller_pid ]] && kill "$controller_pid" 2>/dev/null && wait "$controller_pid" 2>/dev/null
  ((status != 0)) && keep_logs "$work/logs-run$run"
  [[ $run_training_operator == 1 ]] && KUBECONFIG=${kubeconfig:-/dev/null} \
    "$root/scripts/training-operator.sh" stop-local "$work" >/dev/null 2>&1
  "$root/scripts/kwok.sh" stop >/dev/null 2>&1 || true
  "$root/scripts/controlplane.sh" stop >/dev/null 2>&1 || true
  if ((status != 0)); then
    if [[ -n $failed_command ]]; then
      echo "scale: FAILED at step '$step' (run $run of $runs): $failed_command" >&2
    else
      echo "scale: FAILED (run $run of $runs): ${#failed_runs[@]} run(s) failed: ${failed_runs[*]}" >&2
    fi
    for log in "$work/$step.err" "$work/run$run-controller.log"; do
      [[ -s $log ]] || continue
      echo "scale: the end of $log:" >&2
      tail -n 15 "$log" | sed 's/^/  /' >&2
    done
    echo "scale: logs kept in $work (run<N>-<phase>.err: the driver's errors; run<N>-controller.log;" \
      "cp.log, kwok.log, results; logs-run$run/: the control plane's and kwok's)" >&2
  elif [[ -n ${KEEP_WORK:-} ]]; then
    echo "scale: work dir kept: $work" >&2
  else
    rm -rf "$work"
  fi
}
trap cleanup EXIT
# Interrupted: the EXIT trap then sees the signal's status, says so and keeps the logs.
trap 'failed_command="interrupted (SIGINT)"; exit 130' INT
trap 'failed_command="interrupted (SIGTERM)"; exit 143' TERM

if [[ -z ${NCCLGUARD_SKIP_BUILD:-} ]]; then
  "$root/scripts/build.sh" ncclguard ncclguard_scale_bench >"$work/build.err" 2>&1
  step="build-controlplane"
  "$root/scripts/controlplane.sh" build controlplane node kwok >"$work/$step.err" 2>&1
  if [[ $run_training_operator == 1 ]]; then
    step="build-training"
    "$root/scripts/controlplane.sh" build training >"$work/$step.err" 2>&1
  fi
fi

# drive <phase> <driver arguments...>: one phase of the driver, its JSON line in
# $work/run<run>-<phase>.json and its errors in .err beside. A phase that fails after printing
# its figures fails the run (the driver's last error line says why) and the run goes on to be
# reported; one that printed none ends the bench here.
drive() {
  local phase=$1 rc=0
  shift
  step="run$run-$phase"
  # In the background: a signal to this script is taken at once, not when the phase ends.
  "$driver" "$@" >"$work/$step.json" 2>"$work/$step.err" &
  driver_pid=$!
  wait "$driver_pid" || rc=$?
  driver_pid=""
  ((rc == 0)) && return 0
  if ! python3 -c 'import json, sys; json.loads(open(sys.argv[1]).readline())' \
    "$work/$step.json" 2>/dev/null; then
    failed_command="the driver's $phase phase exited $rc without its figures"
    return 1
  fi
  run_failed+="${run_failed:+; }$phase: $(tail -n 1 "$work/$step.err")"
  echo "scale: run $run: the $phase phase failed (exit $rc); its errors ($work/$step.err):" >&2
  sed 's/^/  /' "$work/$step.err" >&2
}

# shellcheck source=scale_lib.sh
source "$root/bench/scale_lib.sh"
kubeconfig="" controller_kubeconfig=""

: >"$work/results"
for run in $(seq "$runs"); do
  run_failed=""
  step="run$run-cluster"
  start_scale_cluster "$work"
  operator_arg=()
  if [[ $run_training_operator == 1 ]]; then
    # TRAINING_OPERATOR_PER_NAMESPACE=1: one operator per namespace, each with its own client
    # limit (v1.8.1's 20 requests a second, not configurable).
    operator_namespaces=""
    if [[ -n ${TRAINING_OPERATOR_PER_NAMESPACE:-} ]]; then
      operator_namespaces=$(seq -f 'scale-%g' 0 $((namespaces - 1)) | tr '\n' ' ')
    fi
    step="run$run-training-operator"
    KUBECONFIG=$kubeconfig TRAINING_OPERATOR_NAMESPACES=$operator_namespaces \
      "$root/scripts/training-operator.sh" start-local "$work" 2>>"$work/cp.log"
    operator_arg=(operator)
  fi
  drive setup setup "$kubeconfig" "$nodes" "$namespaces"
  step="run$run-controller"
  metrics_port=$(free_port)
  "$ncclguard" controller --kubeconfig "$controller_kubeconfig" --leader-elect=false \
    --workers "$workers" --health-listen 0 --metrics-listen "127.0.0.1:$metrics_port" \
    --kube-api-qps "$qps" --kube-api-burst "$((qps * 2))" \
    --log-level warn ${CONTROLLER_ARGS:-} 2>"$work/run$run-controller.log" &
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
  drive jobs jobs "$kubeconfig" "$namespaces" 0 "$jobs" "$pytorch_every" "$pod_seconds" \
    "${operator_arg[@]}"
  cpu1=("$(cpu_s "$apiserver_pid")" "$(cpu_s "$controller_pid")")
  # The pods: until the API server's pod count stops growing (kube-controller-manager creates the
  # Jobs' pods after their release), at most 20 minutes.
  step="run$run-pods"
  pods_now=$(wait_pods_settle 1200)
  kill "$sampler_pid" 2>/dev/null || true; wait "$sampler_pid" 2>/dev/null || true; sampler_pid=""
  stable_kb=$(stable_rss "$controller_pid")
  scrape "$metrics_port" >"$work/metrics.stable"  # the caches' size then
  audit_mark "$work" jobs

  # Churn, RSS and the controller's watches sampled meanwhile.
  sample_controller "$controller_pid" "$metrics_port" 10 >"$work/samples" &
  sampler_pid=$!
  drive churn churn "$kubeconfig" "$namespaces" "$jobs" "$churn_seconds" "$churn_rate" "$pod_seconds"
  kill "$sampler_pid" 2>/dev/null || true; wait "$sampler_pid" 2>/dev/null || true; sampler_pid=""
  audit_mark "$work" churn

  sample_controller "$controller_pid" "$metrics_port" 2 >"$work/rack-samples" &
  sampler_pid=$!
  drive rack rack "$kubeconfig" "$rack_nodes" "$rack_jobs" "$rack_seconds"
  kill "$sampler_pid" 2>/dev/null || true; wait "$sampler_pid" 2>/dev/null || true; sampler_pid=""
  audit_mark "$work" end
  step="run$run-report"
  cpu2=("$(cpu_s "$apiserver_pid")" "$(cpu_s "$controller_pid")")
  peak_kb=$(awk '/^VmHWM:/ {print $2}' "/proc/$controller_pid/status")
  scrape "$metrics_port" >"$work/metrics.end"

  python3 "$root/bench/scale_report.py" run "$work" "$run" "$jobs" "$nodes" "$idle_kb" "$stable_kb" \
    "$peak_kb" "$pods_now" "${cpu0[*]}" "${cpu1[*]}" "${cpu2[*]}" "$(<"$work/run$run-jobs.json")" \
    "$(<"$work/run$run-churn.json")" "$(<"$work/run$run-rack.json")" \
    "$(<"$work/run$run-setup.json")" "$(uptime)" "$run_failed" |
    tee -a "$work/results" | tee -a "${SCALE_RESULTS:-/dev/null}"
  kill "$controller_pid"; wait "$controller_pid" 2>/dev/null || true; controller_pid=""
  if [[ -n $run_failed ]]; then
    failed_runs+=("run $run: $run_failed")
    keep_logs "$work/logs-run$run"
  fi
  if [[ $run_training_operator == 1 ]]; then
    KUBECONFIG=$kubeconfig "$root/scripts/training-operator.sh" stop-local "$work"
  fi
  stop_scale_cluster
done
step="medians"
python3 "$root/bench/scale_report.py" medians "$work/results"
if ((${#failed_runs[@]})); then
  step="runs"
  exit 1
fi
