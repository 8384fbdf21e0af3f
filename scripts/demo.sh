#!/usr/bin/env bash
# The README's main command: ncclguard working on one machine, against a real kube-apiserver.
#
# Starts the local control plane (scripts/controlplane.sh: etcd + kube-apiserver on 127.0.0.1,
# no kubelet), installs the CRDs and the webhook configurations of the Helm chart pointed at a
# locally running `ncclguard controller` (webhook + controllers in one process, its certificates
# self-managed), opts a namespace in, and submits the shipped examples:
#   1. a PyTorchJob without EFA devices, IPC_LOCK or /dev/shm: admitted, held by the gate, and
#      its pods arrive fixed (shown as a diff);
#   2. a PyTorchJob that cannot be fixed: denied, with guide links;
#   3. the gate: held while a node fails its EFA check, released once the probe says Pass.
# Then cleans everything up. `--keep` leaves it running for you to explore.
# `--cluster`: the same job on a real two-node cluster instead, with a TrainJob beside it
# (scripts/demo-cluster.sh: kubelets, CoreDNS, helm install, the Kubeflow training operator,
# JobSet and Kubeflow Trainer v2 making the pods; as root).
# shellcheck source-path=SCRIPTDIR
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
# shellcheck source=lib/chart-locally.sh
source "$root/scripts/lib/chart-locally.sh"
build=${NCCLGUARD_BUILD_DIR:-$root/build}
ncclguard=$build/cli/ncclguard
keep=false
for arg in "$@"; do
  case $arg in
    --keep) keep=true ;;
    --cluster) exec "$root/scripts/demo-cluster.sh" "$@" ;;
    -h | --help)
      sed -n '2,15p' "$0" | sed 's/^# \{0,1\}//'
      exit 0
      ;;
    *)
      echo "demo.sh: unknown argument $arg (try --help)" >&2
      exit 2
      ;;
  esac
done

bold=$'\033[1m' dim=$'\033[2m' plain=$'\033[0m'
[[ -t 1 ]] || bold='' dim='' plain=''
say() { printf '\n%s== %s%s\n' "$bold" "$*" "$plain"; }
note() { printf '%s   %s%s\n' "$dim" "$*" "$plain"; }
fail() {
  printf 'demo.sh: %s\n' "$*" >&2
  [[ -s ${work:-/nonexistent}/controller.log ]] && tail -n 20 "$work/controller.log" >&2
  exit 1
}

# --- 0. Install and build what is missing (a fresh machine: several minutes; then ~1 s) -------
if [[ ! -x $ncclguard ]]; then
  say "0. First run: installing dependencies and building (a few minutes; later runs skip this)"
fi
if [[ -z ${NCCLGUARD_DEMO_SKIP_BUILD:-} ]]; then  # set by the ctest that runs this demo
  "$root/scripts/bootstrap.sh" >/dev/null
  # The control plane's Go build and ncclguard's C++ build side by side: both keep the cores
  # busy, and together they finish sooner than one after the other.
  "$root/scripts/controlplane.sh" build >/dev/null &
  go_build=$!
  "$root/scripts/build.sh" ncclguard >/dev/null || { wait "$go_build" || true; fail "building ncclguard failed"; }
  wait "$go_build" || fail "building the control plane failed (scripts/controlplane.sh build)"
fi

work=$(mktemp -d "${TMPDIR:-/tmp}/ncclguard-demo.XXXXXX")
export NCCLGUARD_CONTROLPLANE_DIR=$work/controlplane
controller_pid=""
cleanup() {
  # Every step, whatever the one before returned: under errexit a `wait` answering a killed
  # child's status would end the trap here and leave the rest running.
  set +e
  local rc=$?
  if [[ $keep == true && $rc -eq 0 ]]; then return; fi
  [[ -n $controller_pid ]] && kill "$controller_pid" 2>/dev/null && wait "$controller_pid" 2>/dev/null
  "$root/scripts/controlplane.sh" stop >/dev/null 2>&1 || true
  rm -rf "$work"
}
trap cleanup EXIT

say "1. Starting a local control plane (etcd + kube-apiserver on 127.0.0.1; no kubelet or scheduler)"
eval "$("$root/scripts/controlplane.sh" start)" || fail "the control plane did not start"
note "KUBECONFIG=$KUBECONFIG"

say "2. Installing the Helm chart's objects (manifests/: the chart rendered with default values)"
# The Kubeflow training operator's PyTorchJob CRD and JobSet's CRD (from the Go module cache); a
# minimal MPIJob (v2beta1) CRD stands in for the mpi-operator's.
# shellcheck source=controlplane/versions.sh
source "$root/scripts/controlplane/versions.sh"
training_operator=$("$root/scripts/controlplane.sh" source-dir "github.com/kubeflow/training-operator@$TRAINING_OPERATOR_VERSION")
jobset=$("$root/scripts/controlplane.sh" source-dir "sigs.k8s.io/jobset@$JOBSET_VERSION")
kubectl apply --server-side -f "$root/manifests/crds.yaml" -f "$root/tests/controlplane/crds/" \
  -f "$training_operator/manifests/base/crds/kubeflow.org_pytorchjobs.yaml" \
  -f "$jobset/config/components/crd/bases/jobset.x-k8s.io_jobsets.yaml" >/dev/null
# A CRD just created has no status yet, and kubectl wait refuses that at once: retry until it has.
for _ in $(seq 60); do kubectl wait --for condition=established --timeout=60s crd --all >/dev/null 2>&1 && break; sleep 0.5; done
kubectl wait --for condition=established --timeout=60s crd --all >/dev/null
kubectl apply --server-side -f "$root/manifests/ncclguard.yaml" >/dev/null
note "CRDs, namespace ncclguard-system, service accounts, RBAC, webhook configurations, NcclPolicy"
note "(the controller Deployment and probe DaemonSet are stored too; without a kubelet they never run)"

say "3. Running ncclguard controller here, as the chart's service account, with the chart's flags"
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
# The chart's webhook configurations call the controller on this machine (the API server
# cannot reach the chart's Service without a kubelet); their caBundle is the controller's to fill.
point_webhooks_at "https://127.0.0.1:$port"
sa_kubeconfig ncclguard-system ncclguard-controller "$work/controller.kubeconfig"
POD_NAMESPACE=ncclguard-system POD_NAME=ncclguard-controller-demo "$ncclguard" controller \
  --kubeconfig "$work/controller.kubeconfig" --webhook-listen "127.0.0.1:$port" \
  --webhook-cert-secret ncclguard-webhook-tls --cert-dir "$work/certs" \
  --webhook-service ncclguard-webhook --webhook-configuration ncclguard --webhook-host 127.0.0.1 \
  --log-level warn 2>"$work/controller.log" &
controller_pid=$!
ready=false
for _ in $(seq 150); do
  if curl -fsSk "https://127.0.0.1:$port/readyz" >/dev/null 2>&1; then ready=true; break; fi
  kill -0 "$controller_pid" 2>/dev/null || fail "ncclguard controller exited"
  sleep 0.2
done
[[ $ready == true ]] || fail "the webhook never became ready"
bundle=""
for _ in $(seq 150); do
  bundle=$(kubectl get validatingwebhookconfiguration ncclguard -o jsonpath='{.webhooks[0].clientConfig.caBundle}')
  [[ -n $bundle ]] && break
  sleep 0.2
done
[[ -n $bundle ]] || fail "the controller did not put its CA into the webhook configurations"
note "webhook on https://127.0.0.1:$port, certificate from Secret ncclguard-system/ncclguard-webhook-tls:"
note "the controller made it and put its CA into both webhook configurations (no cert-manager needed)"

kubectl create namespace ml >/dev/null
kubectl label namespace ml ncclguard.io/enabled=true >/dev/null
kubectl create namespace sandbox >/dev/null
note "namespace ml opted in (label ncclguard.io/enabled=true); namespace sandbox is not"

# Two p5.48xlarge nodes as the probe DaemonSet would have reported them: one passes, one is
# missing two of its 32 EFA devices.
node_validation() { # name summary
  local checks='[]'
  [[ $2 == Fail ]] && checks='[{"id":"efa-device-count","status":"Fail","observed":"30","expected":"32","message":"30 of 32 EFA devices"}]'
  kubectl apply -f - >/dev/null <<EOF
apiVersion: v1
kind: Node
metadata:
  name: $1
  labels: {node.kubernetes.io/instance-type: p5.48xlarge}
---
apiVersion: ncclguard.io/v1alpha1
kind: NodeValidation
metadata:
  name: $1
EOF
  kubectl patch nodevalidation "$1" --subresource=status --type=merge -p \
    "{\"status\":{\"instanceType\":\"p5.48xlarge\",\"summary\":\"$2\",\"lastProbeTime\":\"$(date -u +%FT%TZ)\",\"probeVersion\":\"demo\",\"checks\":$checks}}" >/dev/null
}
node_validation ip-10-0-1-7 Fail
node_validation ip-10-0-1-8 Pass
note "nodes: ip-10-0-1-8 Pass, ip-10-0-1-7 Fail (efa-device-count: 30 of 32)"

job_state() { # name
  kubectl get pytorchjob -n ml "$1" -o json | python3 -c '
import json, sys
job = json.load(sys.stdin)
meta, spec = job["metadata"], job["spec"]
print("   gate:      ncclguard.io/gate=%s, spec.runPolicy.suspend=%s" % (
    meta.get("annotations", {}).get("ncclguard.io/gate"),
    json.dumps(spec.get("runPolicy", {}).get("suspend"))))
for c in job.get("status", {}).get("conditions", []):
    if c["type"].startswith("Nccl"):
        print("   condition: %s=%s (%s): %s" % (c["type"], c["status"], c["reason"], c["message"]))'
}

say "4. kubectl apply -f examples/pytorchjob-broken.yaml (no EFA devices, no IPC_LOCK, no /dev/shm)"
kubectl apply -f "$root/examples/pytorchjob-broken.yaml"
for _ in $(seq 50); do
  kubectl get pytorchjob -n ml llama-pretrain -o jsonpath='{.status.conditions}' | grep -q NcclPreflight && break
  sleep 0.2
done
[[ $(kubectl get pytorchjob -n ml llama-pretrain -o jsonpath='{.status.conditions[?(@.type=="NcclPreflight")].status}') == False ]] ||
  fail "the controller did not hold the job"
note "admitted, marked for the gate and held: one of the two nodes it needs failed its EFA check"
job_state llama-pretrain
note "rendezvous: $(kubectl get service -n ml llama-pretrain -o jsonpath='Service {.metadata.name}, clusterIP {.spec.clusterIP}, MASTER_ADDR {.metadata.annotations.ncclguard\.io/master-addr}')"

say "5. Its pods arrive fixed (no training-operator runs here: the demo creates the Master pod it would)"
pod_json=$(kubectl get pytorchjob -n ml llama-pretrain -o json | python3 -c '
import json, sys
job = json.load(sys.stdin)
template = job["spec"]["pytorchReplicaSpecs"]["Master"]["template"]
pod = {"apiVersion": "v1", "kind": "Pod",
       "metadata": {"name": "llama-pretrain-master-0",
                    "labels": {"training.kubeflow.org/job-name": "llama-pretrain",
                               "training.kubeflow.org/replica-type": "master",
                               "training.kubeflow.org/replica-index": "0"}},
       "spec": template["spec"]}
print(json.dumps(pod))')
# The same pod through the API server twice (dry run): in sandbox, where ncclguard is not
# involved, and in ml; the difference is exactly what the webhook changed.
spec_of() { kubectl create --dry-run=server -n "$1" -f - -o json <<<"$pod_json" |
  python3 -c 'import json,sys; print(json.dumps(json.load(sys.stdin)["spec"], indent=2, sort_keys=True))'; }
diff -u --label "pod as submitted (namespace sandbox)" --label "pod as admitted (namespace ml)" \
  <(spec_of sandbox) <(spec_of ml) || true
kubectl create -n ml -f - <<<"$pod_json" >/dev/null
[[ $(kubectl get pod -n ml llama-pretrain-master-0 -o jsonpath='{.spec.containers[0].resources.limits.vpc\.amazonaws\.com/efa}') == 32 ]] ||
  fail "the pod was stored without its EFA devices"
note "created; ncclguard's webhook ran in the API server's admission chain"

say "6. kubectl apply -f examples/pytorchjob-denied.yaml (NCCL_PROTO=fast, WORLD_SIZE 32 for 16 ranks)"
if kubectl apply -f "$root/examples/pytorchjob-denied.yaml"; then
  fail "the job that cannot be fixed was admitted"
fi
note "denied: nothing was stored; every reason links its section of docs/guide.md"

say "7. The gate: the EFA device of ip-10-0-1-7 is fixed and the probe reports Pass"
node_validation ip-10-0-1-7 Pass
for _ in $(seq 100); do
  [[ $(kubectl get pytorchjob -n ml llama-pretrain -o jsonpath='{.spec.runPolicy.suspend}') == false ]] && break
  sleep 0.2
done
[[ $(kubectl get pytorchjob -n ml llama-pretrain -o jsonpath='{.spec.runPolicy.suspend}') == false ]] ||
  fail "the job was not released"
note "released: both nodes it needs are validated"
job_state llama-pretrain
note "events on the job:"
kubectl get events.events.k8s.io -n ml --field-selector regarding.name=llama-pretrain \
  -o custom-columns='TYPE:.type,REASON:.reason,NOTE:.note' | sed 's/^/   /'

if [[ $keep == true ]]; then
  say "Still running (--keep). Explore with:"
  echo "   export KUBECONFIG=$KUBECONFIG PATH=$(dirname "$(command -v kubectl)"):\$PATH"
  echo "   kubectl get pytorchjobs,services,nodevalidations -A"
  echo "   stop: kill $controller_pid; NCCLGUARD_CONTROLPLANE_DIR=$NCCLGUARD_CONTROLPLANE_DIR scripts/controlplane.sh stop"
else
  say "Done; the control plane is stopped. The tests: scripts/test.sh. Install on a cluster: README, \"Install on a cluster\"."
fi
