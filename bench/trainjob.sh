#!/usr/bin/env bash
# A TrainJob (Kubeflow Trainer v2) from `kubectl apply` until all its pods are Running, on the
# real test node (scripts/node.sh, CoreDNS) with the real JobSet controller v0.11.1 and Trainer
# v2.2.0 (scripts/trainer.sh) making the JobSet and the pods:
#   with:    in namespace ml, opted in (ncclguard.io/enabled=true): the webhook marks the TrainJob
#            suspended and adds ncclguard's runtime patch, the controller releases it (the node is
#            validated by the probe), the Trainer unsuspends the JobSet, the webhook fixes each
#            pod (EFA devices, env);
#   without: in namespace plain, not opted in: the webhook configurations' namespaceSelector keeps
#            the API server from calling ncclguard and the controller ignores the namespace, so
#            it is the Trainer, JobSet, the Job controller and the kubelet alone, on the same
#            cluster with the same components running.
# The runs alternate (with, without, with, ...) so that the shared machine's load falls on both
# alike. TrainJob on the torch-distributed runtime, 2 nodes (pods), 4 GPUs, 100m CPU and 256Mi
# each (the node poses as a p5.48xlarge, selected by a runtime patch), a shell waiting on `sleep`
# in the ncclguard image. Each run's TrainJob is deleted, and its JobSet and pods gone, before
# the next. Prints every run, the median, min and max of RUNS runs each (default 5). One untimed
# run in each namespace first. Needs root, like the node. Usage: bench/trainjob.sh
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
# shellcheck source=bench/node_lib.sh
source "$root/bench/node_lib.sh"
node_bench trainjob
# until_true <command...>: polls every 0.2 s; gives up (the bench fails) after 180 s.
until_true() {
  local deadline=$((SECONDS + 180))
  until "$@" >/dev/null 2>&1; do
    ((SECONDS < deadline)) || { echo "bench/trainjob.sh: gave up waiting for: $*" >&2; exit 1; }
    sleep 0.2
  done
}

"$root/scripts/node.sh" build >/dev/null 2>&1
eval "$("$root/scripts/node.sh" start 2>/dev/null)"
# shellcheck disable=SC1091
source "$NCCLGUARD_NODE_DIR/node.env"
NCCLGUARD_IMAGE_ARCHIVE=$work/ncclguard.tar "$root/scripts/image.sh" >/dev/null 2>&1
app_version=$(sed -n 's/^appVersion: *"\{0,1\}\([^"]*\)"\{0,1\}$/\1/p' "$root/charts/ncclguard/Chart.yaml")
image=ghcr.io/ncclguard/ncclguard:$app_version
kubectl patch node "$NODE_NAME" --subresource=status --type=merge \
  -p '{"status":{"capacity":{"nvidia.com/gpu":"8","vpc.amazonaws.com/efa":"32"}}}' >/dev/null
"$root/scripts/trainer.sh" install >/dev/null 2>&1
helm install ncclguard "$root/charts/ncclguard" -n ncclguard-system --create-namespace \
  --set 'probe.checks={memlock-limit,dev-shm-stale,removeipc}' --wait --timeout 180s >/dev/null
until_true bash -c "[[ \$(kubectl get node $NODE_NAME -o jsonpath='{.metadata.labels.ncclguard\.io/validated}') == true ]]"
kubectl create namespace ml >/dev/null
kubectl label namespace ml ncclguard.io/enabled=true >/dev/null
kubectl create namespace plain >/dev/null

# bash as PID 1 with a TERM trap, so that a deleted pod goes at once (sleep as PID 1 would not).
cat >"$work/trainjob.yaml" <<YAML
apiVersion: trainer.kubeflow.org/v1alpha1
kind: TrainJob
metadata: {name: bench}
spec:
  runtimeRef: {name: torch-distributed}
  trainer:
    image: $image
    command: [bash, -c, 'trap "exit 0" TERM; sleep infinity & wait']
    numNodes: 2
    numProcPerNode: 4
    resourcesPerNode:
      limits: {nvidia.com/gpu: 4, cpu: 100m, memory: 256Mi}
  runtimePatches:
    - manager: bench.example/scheduling
      trainingRuntimeSpec:
        template:
          spec:
            replicatedJobs:
              - name: node
                template:
                  spec:
                    template:
                      spec:
                        nodeSelector: {node.kubernetes.io/instance-type: p5.48xlarge}
YAML

phases() { kubectl -n "$1" get pods -l jobset.sigs.k8s.io/jobset-name=bench -o jsonpath='{range .items[*]}{.status.phase} {end}'; }
all_running() { [[ "$(phases "$1")" == "Running Running " ]]; }
all_gone() { [[ -z "$(kubectl -n "$1" get pods,jobsets -o name)" ]]; }
# one_run <namespace>: seconds from apply to both pods Running; the TrainJob is deleted afterwards.
one_run() {
  local ns=$1 t0 t
  t0=$(now)
  kubectl -n "$ns" apply -f "$work/trainjob.yaml" >/dev/null
  until_true all_running "$ns"
  t=$(elapsed "$t0" "$(now)")
  kubectl -n "$ns" delete trainjob bench --wait=true >/dev/null
  until_true all_gone "$ns"
  printf '%s' "$t"
}
# efa <namespace>: the EFA devices of the first pod of the TrainJob (the webhook's fix).
efa() { kubectl -n "$1" get pods -l jobset.sigs.k8s.io/jobset-name=bench -o jsonpath='{.items[0].spec.containers[0].resources.limits.vpc\.amazonaws\.com/efa}'; }
# The untimed first runs: ncclguard's webhook fixed the pods in ml and never reached plain.
check_paths() {
  kubectl -n ml apply -f "$work/trainjob.yaml" >/dev/null
  until_true all_running ml
  [[ $(efa ml) == 16 ]] || { echo "bench/trainjob.sh: the pods in ml were not fixed (efa=$(efa ml))" >&2; exit 1; }
  [[ $(kubectl -n ml get trainjob bench -o jsonpath='{.metadata.annotations.ncclguard\.io/gate}') == admitted ]] ||
    { echo "bench/trainjob.sh: the TrainJob in ml did not go through the gate" >&2; exit 1; }
  kubectl -n ml delete trainjob bench --wait=true >/dev/null
  until_true all_gone ml
  kubectl -n plain apply -f "$work/trainjob.yaml" >/dev/null
  until_true all_running plain
  [[ -z $(efa plain) ]] || { echo "bench/trainjob.sh: ncclguard reached namespace plain" >&2; exit 1; }
  kubectl -n plain delete trainjob bench --wait=true >/dev/null
  until_true all_gone plain
}

check_paths
declare -a with=() without=()
for ((run = 1; run <= runs; run++)); do
  with+=("$(one_run ml)")
  without+=("$(one_run plain)")
done

stats() { printf '%s\n' "$@" | sort -n | awk '{ v[NR] = $1 } END { printf "median %s s, min %s s, max %s s", (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2, v[1], v[NR] }'; }
echo "TrainJob (2 nodes) kubectl apply -> all pods Running, $runs runs each, alternating:"
echo "  with ncclguard (ml, opted in):        ${with[*]} s; $(stats "${with[@]}")"
echo "  without ncclguard (plain, not opted): ${without[*]} s; $(stats "${without[@]}")"
