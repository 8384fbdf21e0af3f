#!/usr/bin/env bash
# A PyTorchJob from `kubectl apply` until all its pods are Running, on the real test node
# (scripts/node.sh, CoreDNS) with the real Kubeflow training operator making the pods:
#   with:    ncclguard installed by helm, the node validated by its probe: the job goes through
#            the webhook (gate mark), the controller (release, headless Service) and the webhook
#            again for each pod (fixes);
#   without: after `helm uninstall ncclguard`: the operator and the kubelet alone.
# The difference is ncclguard's cost. A third set of runs turns the gate's fast path off
# (NcclPolicy gate.admitWhenReady: false): every job held at admission and released by the
# controller, as before issue 29. Master + 1 Worker, 4 GPUs each (the node poses as a
# p5.48xlarge), each pod `sleep infinity` in an image the node has. Each run's job is deleted and
# its pods gone before the next. Prints every run and the medians of RUNS runs (default 5).
# Needs root, like the node. Usage: bench/training.sh
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
# shellcheck source=bench/node_lib.sh
source "$root/bench/node_lib.sh"
node_bench training
until_true() { until "$@" >/dev/null 2>&1; do sleep 0.2; done; }

"$root/scripts/node.sh" build >/dev/null 2>&1
eval "$("$root/scripts/node.sh" start 2>/dev/null)"
# shellcheck disable=SC1091
source "$NCCLGUARD_NODE_DIR/node.env"
NCCLGUARD_IMAGE_ARCHIVE=$work/ncclguard.tar "$root/scripts/image.sh" >/dev/null 2>&1
app_version=$(sed -n 's/^appVersion: *"\{0,1\}\([^"]*\)"\{0,1\}$/\1/p' "$root/charts/ncclguard/Chart.yaml")
image=ghcr.io/ncclguard/ncclguard:$app_version
kubectl patch node "$NODE_NAME" --subresource=status --type=merge \
  -p '{"status":{"capacity":{"nvidia.com/gpu":"8","vpc.amazonaws.com/efa":"32"}}}' >/dev/null
"$root/scripts/training-operator.sh" install >/dev/null 2>&1
helm install ncclguard "$root/charts/ncclguard" -n ncclguard-system --create-namespace \
  --set 'probe.checks={memlock-limit,dev-shm-stale,removeipc}' --wait --timeout 180s >/dev/null
until_true bash -c "[[ \$(kubectl get node $NODE_NAME -o jsonpath='{.metadata.labels.ncclguard\.io/validated}') == true ]]"
kubectl create namespace ml >/dev/null
kubectl label namespace ml ncclguard.io/enabled=true >/dev/null

replica() {
  cat <<YAML
    $1:
      replicas: 1
      restartPolicy: OnFailure
      template:
        spec:
          nodeSelector: {node.kubernetes.io/instance-type: p5.48xlarge}
          terminationGracePeriodSeconds: 0
          containers:
            - name: pytorch
              image: $image
              imagePullPolicy: Never
              command: [sleep, infinity]
              resources:
                limits: {nvidia.com/gpu: 4, memory: 256Mi, cpu: 100m}
YAML
}
{
  printf 'apiVersion: kubeflow.org/v1\nkind: PyTorchJob\nmetadata: {name: bench, namespace: ml}\nspec:\n  pytorchReplicaSpecs:\n'
  replica Master
  replica Worker
} >"$work/job.yaml"

phases() { kubectl -n ml get pods -l training.kubeflow.org/job-name=bench -o jsonpath='{range .items[*]}{.status.phase} {end}'; }
all_running() { [[ "$(phases)" == "Running Running " ]]; }
no_pods() { [[ -z "$(kubectl -n ml get pods -o name)" ]]; }
# one_run: seconds from apply to both pods Running; the job is deleted afterwards.
one_run() {
  local t0 t
  t0=$(now)
  kubectl apply -f "$work/job.yaml" >/dev/null
  until_true all_running
  t=$(elapsed "$t0" "$(now)")
  kubectl -n ml delete pytorchjob bench --wait=true >/dev/null
  until_true no_pods
  printf '%s' "$t"
}

declare -a with=() held=() without=()
for ((run = 1; run <= runs; run++)); do with+=("$(one_run)"); done
# The same install with the gate's fast path off (NcclPolicy gate.admitWhenReady: false): every
# job suspended at admission and released by the controller, the round trip of the earlier
# releases. The webhook follows the policy without a restart; a dry-run create says when.
kubectl patch ncclpolicy default --type=merge -p '{"spec":{"gate":{"admitWhenReady":false}}}' >/dev/null
held_dry_run() {
  [[ "$(kubectl apply --dry-run=server -f "$work/job.yaml" -o jsonpath='{.metadata.annotations.ncclguard\.io/gate}')" == pending ]]
}
until_true held_dry_run
for ((run = 1; run <= runs; run++)); do held+=("$(one_run)"); done
helm uninstall ncclguard -n ncclguard-system --wait >/dev/null
for ((run = 1; run <= runs; run++)); do without+=("$(one_run)"); done

echo "PyTorchJob (Master + Worker) kubectl apply -> all pods Running, $runs runs each:"
echo "  with ncclguard (admitted at creation): ${with[*]} s; median $(printf '%s\n' "${with[@]}" | median) s"
echo "  with ncclguard, gate.admitWhenReady=false (held, released): ${held[*]} s; median $(printf '%s\n' "${held[@]}" | median) s"
echo "  without ncclguard: ${without[*]} s; median $(printf '%s\n' "${without[@]}" | median) s"
