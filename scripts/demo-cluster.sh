#!/usr/bin/env bash
# `scripts/demo.sh --cluster`: the README's main job on a real two-node cluster.
#
# Starts the test nodes (scripts/node.sh with NCCLGUARD_NODE_COUNT=2: two kubelets, each node in
# a network namespace of its own, joined by a bridge with no way out; scheduler,
# controller-manager, kube-proxy and CoreDNS), makes them look like p5.48xlarge nodes (8 GPUs,
# 32 EFA devices each, as extended resources), builds the ncclguard image without a registry,
# installs ncclguard with helm, the Kubeflow training operator, JobSet and Kubeflow Trainer v2,
# and submits examples/pytorchjob-broken.yaml and examples/trainjob-broken.yaml sized for them:
#   1. both held by the gate: no node has been validated yet, no pods are made; the TrainJob
#      carries ncclguard's runtime patch (IPC_LOCK, /dev/shm);
#   2. the probe DaemonSet validates the nodes: the gate releases both jobs;
#   3. the training operator makes the PyTorchJob's Master and Worker pods, the Trainer and the
#      JobSet controller the TrainJob's; ncclguard's webhook fixes each pod (EFA devices,
#      IPC_LOCK, /dev/shm, NCCL/libfabric env, rendezvous DNS), and they run.
# Then stops the nodes. `--keep` leaves them running for you to explore.
# shellcheck source-path=SCRIPTDIR
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${NCCLGUARD_BUILD_DIR:-$root/build}
keep=false
for arg in "$@"; do
  case $arg in
    --keep) keep=true ;;
    --cluster) ;;
    -h | --help) sed -n '2,17p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "demo-cluster.sh: unknown argument $arg" >&2; exit 2 ;;
  esac
done

bold=$'\033[1m' dim=$'\033[2m' plain=$'\033[0m'
[[ -t 1 ]] || bold='' dim='' plain=''
say() { printf '\n%s== %s%s\n' "$bold" "$*" "$plain"; }
note() { printf '%s   %s%s\n' "$dim" "$*" "$plain"; }
fail() { printf 'demo.sh --cluster: %s\n' "$*" >&2; exit 1; }
# until_true <seconds> <command...>
until_true() {
  local deadline=$((SECONDS + $1)); shift
  until "$@" >/dev/null 2>&1; do
    ((SECONDS < deadline)) || return 1
    sleep 1
  done
}

((EUID == 0)) || fail "the nodes need root (network namespace, mounts, cgroups): run as root"

if [[ -z ${NCCLGUARD_DEMO_SKIP_BUILD:-} ]]; then
  say "0. Building what is missing (first run: about 15 minutes on 2 cores; later runs: seconds)"
  "$root/scripts/bootstrap.sh" >/dev/null
  # The node's Go build and ncclguard's C++ build side by side (both keep the cores busy).
  { "$root/scripts/node.sh" build 2>&1 | grep -v 'up to date' | sed 's/^/   /' || true; } &
  node_build=$!
  NCCLGUARD_BUILD_DIR=$build "$root/scripts/build.sh" ncclguard >/dev/null ||
    { wait "$node_build" || true; fail "building ncclguard failed"; }
  wait "$node_build" || true
fi

work=$(mktemp -d "${TMPDIR:-/tmp}/ncclguard-demo-cluster.XXXXXX")
export NCCLGUARD_NODE_DIR=$work/node
cleanup() {
  local rc=$?
  if [[ $keep == true && $rc -eq 0 ]]; then return; fi
  "$root/scripts/node.sh" stop >/dev/null 2>&1 || echo "demo.sh --cluster: scripts/node.sh stop left something behind (NCCLGUARD_NODE_DIR=$NCCLGUARD_NODE_DIR scripts/node.sh status)" >&2
  rm -rf "$work"
}
trap cleanup EXIT

say "1. Starting a real two-node cluster (scripts/node.sh; nothing can leave this machine)"
start=$SECONDS
export NCCLGUARD_NODE_COUNT=2
eval "$("$root/scripts/node.sh" start 2>"$work/node-start.log")" || { cat "$work/node-start.log" >&2; fail "the nodes did not start"; }
# shellcheck disable=SC1091
source "$NCCLGUARD_NODE_DIR/node.env"
read -r -a nodes <<<"$NODE_NAMES"
note "nodes ${nodes[*]} Ready in $((SECONDS - start)) s: a kubelet, containerd (runc) and kube-proxy each;"
note "scheduler, controller-manager, etcd and kube-apiserver on ${nodes[0]}; CoreDNS at $DNS_IP as the cluster DNS"
efa_advertised() {
  local node
  for node in "${nodes[@]}"; do
    [[ $(kubectl get node "$node" -o jsonpath='{.status.allocatable.vpc\.amazonaws\.com/efa}') == 32 ]] || return 1
  done
}
for node in "${nodes[@]}"; do
  kubectl patch node "$node" --subresource=status --type=merge \
    -p '{"status":{"capacity":{"nvidia.com/gpu":"8","vpc.amazonaws.com/efa":"32"}}}' >/dev/null
done
until_true 60 efa_advertised || fail "the nodes do not advertise their EFA devices"
note "each poses as a p5.48xlarge: label node.kubernetes.io/instance-type=p5.48xlarge; nvidia.com/gpu: 8 and"
note "vpc.amazonaws.com/efa: 32 in its status, as the NVIDIA and EFA device plugins would advertise them"
# Their place in the network, as EKS labels p5 nodes from the EC2 instance topology: one block.
for node in "${nodes[@]}"; do
  kubectl label node "$node" --overwrite topology.k8s.aws/network-node-layer-1=nn-spine \
    topology.k8s.aws/network-node-layer-2=nn-aggregation topology.k8s.aws/network-node-layer-3=nn-block-a >/dev/null
done
note "and both sit in one network block, as EKS labels them: topology.k8s.aws/network-node-layer-3=nn-block-a"

say "2. Building the ncclguard image without a registry and importing it into both nodes (scripts/image.sh)"
NCCLGUARD_BUILD_DIR=$build NCCLGUARD_IMAGE_ARCHIVE=$work/ncclguard.tar "$root/scripts/image.sh" 2>"$work/image.log" ||
  { cat "$work/image.log" >&2; fail "scripts/image.sh failed"; }
app_version=$(sed -n 's/^appVersion: *"\{0,1\}\([^"]*\)"\{0,1\}$/\1/p' "$root/charts/ncclguard/Chart.yaml")
image=ghcr.io/ncclguard/ncclguard:$app_version
note "$image"

say "3. helm install ncclguard (its probe DaemonSet left off for now: no node is validated yet)"
helm install ncclguard "$root/charts/ncclguard" -n ncclguard-system --create-namespace \
  --set probe.enabled=false --wait --timeout 180s >"$work/helm.log" 2>&1 || { cat "$work/helm.log" >&2; fail "helm install failed"; }
kubectl -n ncclguard-system get pods | sed 's/^/   /'

say "4. Installing the Kubeflow training operator, JobSet and Kubeflow Trainer v2 (their own release manifests, from the Go module cache)"
# Side by side: each mostly waits for its managers to start and their webhooks to serve.
"$root/scripts/training-operator.sh" install >"$work/training-operator.log" 2>&1 &
operator_install=$!
"$root/scripts/trainer.sh" install >"$work/trainer.log" 2>&1 ||
  { wait "$operator_install" || true; cat "$work/trainer.log" >&2; fail "scripts/trainer.sh install failed"; }
wait "$operator_install" || { cat "$work/training-operator.log" >&2; fail "scripts/training-operator.sh install failed"; }
grep -hv 'rollout\|rolled out' "$work/training-operator.log" "$work/trainer.log" | sed 's/^/   /'
kubectl get pods -n kubeflow -o name | sed 's/^/   kubeflow\//'
kubectl get pods -n jobset-system -o name | sed 's/^/   jobset-system\//'
kubectl get pods -n kubeflow-system -o name | sed 's/^/   kubeflow-system\//'
note "ClusterTrainingRuntime: $(kubectl get clustertrainingruntime -o jsonpath='{.items[*].metadata.name}')"
kubectl create namespace ml >/dev/null
kubectl label namespace ml ncclguard.io/enabled=true >/dev/null
note "namespace ml opted in to ncclguard (label ncclguard.io/enabled=true)"

say "5. kubectl apply: examples/pytorchjob-broken.yaml, sized for these nodes"
# Half a p5 per pod (4 GPUs, 4 processes) so that the PyTorchJob and the TrainJob fit on the two
# nodes together, a memory limit this machine has, and an image the nodes have (no registry):
# the Master listens on the rendezvous port, the Worker connects to it through the MASTER_ADDR
# it was given, then both stay up.
python3 - "$root/examples/pytorchjob-broken.yaml" "$image" >"$work/job.yaml" <<'PY'
import sys, yaml
job = yaml.safe_load(open(sys.argv[1]))
scripts = {
    "Master": "exec perl -MIO::Socket::INET -e '$s = IO::Socket::INET->new(LocalPort => $ENV{MASTER_PORT}, Listen => 8, ReuseAddr => 1) or die $!; print qq(rank 0 listening on $ENV{MASTER_PORT}\\n); while ($c = $s->accept) { print $c qq(hello from rank 0\\n); close $c }'",
    "Worker": "until r=$(perl -MIO::Socket::INET -e '$c = IO::Socket::INET->new(PeerAddr => $ENV{MASTER_ADDR}, PeerPort => $ENV{MASTER_PORT}) or exit 1; print scalar <$c>'); do sleep 1; done; echo \"rank 1 reached $MASTER_ADDR:$MASTER_PORT: $r\"; exec sleep infinity",
}
job["spec"]["nprocPerNode"] = "4"
for role, spec in job["spec"]["pytorchReplicaSpecs"].items():
    c = spec["template"]["spec"]["containers"][0]
    c["image"] = sys.argv[2]
    c["imagePullPolicy"] = "Never"
    c["command"] = ["bash", "-c", scripts[role]]
    c["resources"]["limits"] = {"nvidia.com/gpu": 4, "memory": "256Mi"}
print(yaml.safe_dump(job, sort_keys=False))
PY
diff -u --label examples/pytorchjob-broken.yaml --label "as submitted here" \
  <(python3 -c 'import sys, yaml; print(yaml.safe_dump(yaml.safe_load(open(sys.argv[1])), sort_keys=False))' "$root/examples/pytorchjob-broken.yaml") \
  "$work/job.yaml" | grep '^[-+]' | grep -v '^[-+][-+]' | sed 's/^/   /' || true
kubectl apply -f "$work/job.yaml"

job_state() {
  kubectl get pytorchjob -n ml llama-pretrain -o json | python3 -c '
import json, sys
job = json.load(sys.stdin)
meta, spec = job["metadata"], job["spec"]
print("   gate:      ncclguard.io/gate=%s, spec.runPolicy.suspend=%s" % (
    meta.get("annotations", {}).get("ncclguard.io/gate"),
    json.dumps(spec.get("runPolicy", {}).get("suspend"))))
for c in job.get("status", {}).get("conditions", []):
    who = "ncclguard" if c["type"].startswith("Nccl") else "operator"
    print("   condition: %-9s %s=%s (%s): %s" % (who, c["type"], c["status"], c["reason"], c["message"]))'
}
# has <kind> <name> <jsonpath> <value>: whether the object's field has the value.
has() { [[ $(kubectl get "$1" -n ml "$2" -o jsonpath="$3") == "$4" ]]; }
until_true 60 has pytorchjob llama-pretrain '{.status.conditions[?(@.type=="NcclPreflight")].status}' False ||
  fail "the controller did not hold the PyTorchJob"
until_true 60 has pytorchjob llama-pretrain '{.status.conditions[?(@.type=="Suspended")].status}' True ||
  fail "the training operator did not see the PyTorchJob suspended"
note "held by the gate: no validated p5.48xlarge node yet; the training operator sees it suspended"
job_state
note "pods in ml: $(kubectl get pods -n ml -o name | wc -l) (the operator creates none while the job is held)"
note "rendezvous: $(kubectl get service -n ml llama-pretrain -o jsonpath='headless Service {.metadata.name}, MASTER_ADDR {.metadata.annotations.ncclguard\.io/master-addr}')"

say "6. kubectl apply: examples/trainjob-broken.yaml (Kubeflow Trainer v2), sized for these nodes"
# The same sizing; node 0 (PET_NODE_RANK, from the Job's completion index) listens on the port
# the Trainer's torch plugin gave it, node 1 connects to PET_MASTER_ADDR (JobSet's pod DNS name).
python3 - "$root/examples/trainjob-broken.yaml" "$image" >"$work/trainjob.yaml" <<'PY'
import sys, yaml
job = yaml.safe_load(open(sys.argv[1]))
script = ("if [ \"$PET_NODE_RANK\" = 0 ]; then exec perl -MIO::Socket::INET -e '$s = IO::Socket::INET->new(LocalPort => $ENV{PET_MASTER_PORT}, Listen => 8, ReuseAddr => 1) or die $!; print qq(node 0 listening on $ENV{PET_MASTER_PORT}\\n); while ($c = $s->accept) { print $c qq(hello from node 0\\n); close $c }'; fi; "
          "until r=$(perl -MIO::Socket::INET -e '$c = IO::Socket::INET->new(PeerAddr => $ENV{PET_MASTER_ADDR}, PeerPort => $ENV{PET_MASTER_PORT}) or exit 1; print scalar <$c>'); do sleep 1; done; echo \"node $PET_NODE_RANK reached $PET_MASTER_ADDR:$PET_MASTER_PORT: $r\"; exec sleep infinity")
trainer = job["spec"]["trainer"]
trainer["image"] = sys.argv[2]
trainer["command"] = ["bash", "-c", script]
trainer["numProcPerNode"] = 4
trainer["resourcesPerNode"]["limits"] = {"nvidia.com/gpu": 4, "memory": "256Mi"}
print(yaml.safe_dump(job, sort_keys=False))
PY
diff -u --label examples/trainjob-broken.yaml --label "as submitted here" \
  <(python3 -c 'import sys, yaml; print(yaml.safe_dump(yaml.safe_load(open(sys.argv[1])), sort_keys=False))' "$root/examples/trainjob-broken.yaml") \
  "$work/trainjob.yaml" | grep '^[-+]' | grep -v '^[-+][-+]' | sed 's/^/   /' || true
kubectl apply -f "$work/trainjob.yaml"
trainjob_state() {
  kubectl get trainjob -n ml llama-finetune -o json | python3 -c '
import json, sys
job = json.load(sys.stdin)
meta, spec = job["metadata"], job["spec"]
print("   gate:      ncclguard.io/gate=%s, spec.suspend=%s" % (
    meta.get("annotations", {}).get("ncclguard.io/gate"), json.dumps(spec.get("suspend"))))
for c in job.get("status", {}).get("conditions", []):
    who = "ncclguard" if c["type"].startswith("Nccl") else "trainer"
    print("   condition: %-9s %s=%s (%s): %s" % (who, c["type"], c["status"], c["reason"], c["message"]))'
}
until_true 60 has trainjob llama-finetune '{.status.conditions[?(@.type=="NcclPreflight")].status}' False ||
  fail "the controller did not hold the TrainJob"
until_true 60 has jobset llama-finetune '{.spec.suspend}' true ||
  fail "the Trainer did not make the TrainJob's JobSet suspended"
note "held by the gate with the PyTorchJob; the Trainer made its JobSet suspended, and no pods:"
trainjob_state
note "JobSet llama-finetune (made by the Trainer): $(kubectl get jobset -n ml llama-finetune -o jsonpath='spec.suspend={.spec.suspend}, replicatedJobs {.spec.replicatedJobs[*].name}'); pods: $(kubectl get pods -n ml -l jobset.sigs.k8s.io/jobset-name=llama-finetune -o name | wc -l)"
note "spec.runtimePatches: the team's entry and ncclguard's, added by the webhook at admission"
note "(kubectl get trainjob -n ml llama-finetune -o yaml, under spec.runtimePatches):"
kubectl get trainjob -n ml llama-finetune -o json | python3 -c '
import json, sys, yaml
job = json.load(sys.stdin)
for p in job["spec"]["runtimePatches"]:
    p.pop("time", None)
print(yaml.safe_dump(job["spec"]["runtimePatches"], sort_keys=False), end="")' | sed 's/^/     /'

say "7. helm upgrade --set probe.enabled=true: the probe DaemonSet validates the nodes"
# The checks this machine can pass (it has no GPUs or EFA devices: those checks would fail it).
helm upgrade ncclguard "$root/charts/ncclguard" -n ncclguard-system --reuse-values --set probe.enabled=true \
  --set 'probe.checks={memlock-limit,dev-shm-stale,removeipc}' --wait --timeout 180s >"$work/upgrade.log" 2>&1 ||
  { cat "$work/upgrade.log" >&2; fail "helm upgrade failed"; }
for node in "${nodes[@]}"; do
  until_true 120 bash -c "[[ \$(kubectl get node $node -o jsonpath='{.metadata.labels.ncclguard\.io/validated}') == true ]]" ||
    fail "the probe did not validate node $node"
  note "NodeValidation $node: $(kubectl get nodevalidation "$node" -o jsonpath='{.status.summary}: {range .status.checks[*]}{.id}={.status} {end}')"
done
until_true 60 has pytorchjob llama-pretrain '{.spec.runPolicy.suspend}' false || fail "the PyTorchJob was not released"
until_true 60 has trainjob llama-finetune '{.spec.suspend}' false || fail "the TrainJob was not released"
note "both released by the gate:"
job_state
trainjob_state

# pod_fixes <pod> <container> <what made it> <env names>: what the webhook added to the pod, and
# the rendezvous variables its maker set.
pod_fixes() {
  kubectl get pod -n ml "$1" -o json | python3 -c '
import json, sys
pod = json.load(sys.stdin)
spec = pod["spec"]
c = next(c for c in spec["containers"] if c["name"] == sys.argv[2])
env = {e["name"]: e.get("value") for e in c.get("env", [])}
print("   what ncclguard added to %s (%s made it):" % (sys.argv[1], sys.argv[3]))
print("     resources.limits: %s" % json.dumps(c["resources"]["limits"]))
print("     capabilities: %s" % json.dumps(c.get("securityContext", {}).get("capabilities", {})))
print("     /dev/shm: %s" % [v["name"] for v in spec.get("volumes", []) if v.get("emptyDir", {}).get("medium") == "Memory"])
print("     env: %s" % ", ".join("%s=%s" % (k, v) for k, v in env.items() if k.startswith(("NCCL_", "FI_"))))
print("     hostname %s, subdomain %s (the name under the headless Service resolves)" % (spec.get("hostname"), spec.get("subdomain")))
for term in spec.get("affinity", {}).get("podAffinity", {}).get("preferredDuringSchedulingIgnoredDuringExecution", []):
    t = term["podAffinityTerm"]
    print("     pod affinity (preferred): with %s, on %s" % (json.dumps(t["labelSelector"]["matchLabels"]), t["topologyKey"]))
rdzv = [k for k in sys.argv[4].split() if k in env]
print("   set by the %s: %s" % (sys.argv[3], " ".join("%s=%s" % (k, env[k]) for k in rdzv)))' "$1" "$2" "$3" "$4"
}

say "8. The training operator creates the PyTorchJob's pods; ncclguard's webhook fixes them; they run"
running() { [[ $(kubectl get pods -n ml -l "$1" -o jsonpath='{range .items[*]}{.status.phase} {end}') == "Running Running " ]]; }
until_true 180 running training.kubeflow.org/job-name=llama-pretrain || { kubectl get pods -n ml -o wide >&2; fail "the PyTorchJob's pods are not Running"; }
kubectl get pods -n ml -l training.kubeflow.org/job-name=llama-pretrain -o custom-columns=POD:.metadata.name,PHASE:.status.phase,NODE:.spec.nodeName,IP:.status.podIP | sed 's/^/   /'
pod_fixes llama-pretrain-worker-0 pytorch "training operator" "MASTER_ADDR MASTER_PORT WORLD_SIZE RANK"
until_true 60 bash -c 'kubectl logs -n ml llama-pretrain-worker-0 -c pytorch | grep -q "rank 1 reached"' || fail "the Worker did not reach the Master"
note "Worker log: $(kubectl logs -n ml llama-pretrain-worker-0 -c pytorch | grep 'rank 1 reached')"
note "(resolved by CoreDNS, connected across the pod network)"
# placement <kind> <name>: the job's NcclPlacement condition, once its pods are bound.
placement() {
  until_true 60 has "$1" "$2" '{.status.conditions[?(@.type=="NcclPlacement")].status}' True ||
    fail "$1 $2 has no NcclPlacement True"
  note "$1 $2: $(kubectl get "$1" -n ml "$2" -o jsonpath='{.status.conditions[?(@.type=="NcclPlacement")].type}={.status.conditions[?(@.type=="NcclPlacement")].status} {.status.conditions[?(@.type=="NcclPlacement")].reason}: {.status.conditions[?(@.type=="NcclPlacement")].message}')"
}
placement pytorchjob llama-pretrain

say "9. The Trainer and the JobSet controller create the TrainJob's pods; ncclguard's webhook fixes them; they run"
until_true 180 running jobset.sigs.k8s.io/jobset-name=llama-finetune || { kubectl get pods -n ml -o wide >&2; fail "the TrainJob's pods are not Running"; }
note "JobSet llama-finetune (owner: TrainJob llama-finetune): spec.suspend=$(kubectl get jobset -n ml llama-finetune -o jsonpath='{.spec.suspend}'); Jobs: $(kubectl get jobs -n ml -l jobset.sigs.k8s.io/jobset-name=llama-finetune -o jsonpath='{.items[*].metadata.name}')"
kubectl get pods -n ml -l jobset.sigs.k8s.io/jobset-name=llama-finetune -o custom-columns=POD:.metadata.name,PHASE:.status.phase,NODE:.spec.nodeName,IP:.status.podIP | sed 's/^/   /'
# A Job's pod names end in a random suffix; its hostname is <job>-<index>.
node1=$(kubectl get pods -n ml -l jobset.sigs.k8s.io/jobset-name=llama-finetune,batch.kubernetes.io/job-completion-index=1 -o jsonpath='{.items[0].metadata.name}')
pod_fixes "$node1" node "Trainer's torch plugin" "PET_MASTER_ADDR PET_MASTER_PORT PET_NNODES PET_NPROC_PER_NODE"
until_true 60 bash -c "kubectl logs -n ml $node1 -c node | grep -q 'node 1 reached'" || fail "TrainJob node 1 did not reach node 0"
note "$node1's log: $(kubectl logs -n ml "$node1" -c node | grep 'node 1 reached')"
note "(JobSet's headless Service, resolved by CoreDNS)"
placement trainjob llama-finetune
note "all pods in ml:"
kubectl get pods -n ml -o custom-columns=POD:.metadata.name,PHASE:.status.phase,NODE:.spec.nodeName,IP:.status.podIP | sed 's/^/   /'

if [[ $keep == true ]]; then
  say "Still running (--keep). Explore with:"
  echo "   export KUBECONFIG=$KUBECONFIG PATH=$(dirname "$(command -v kubectl)"):\$PATH"
  echo "   kubectl describe pytorchjob -n ml llama-pretrain; kubectl get trainjob,jobset -n ml -o yaml; kubectl get pods -A"
  echo "   stop: NCCLGUARD_NODE_DIR=$NCCLGUARD_NODE_DIR scripts/node.sh stop"
else
  say "Done; the nodes are stopped and nothing of them is left."
fi
