#!/usr/bin/env bash
# ctest node_trainer_tests (label node): Kubeflow Trainer v2 and JobSet on a cluster of two nodes
# (scripts/node.sh, NCCLGUARD_NODE_COUNT=2, both posing as p5.48xlarge with 8 GPUs and 32 EFA
# devices), with ncclguard installed by helm, the real JobSet controller and Trainer
# (scripts/trainer.sh) and the real Kubeflow training operator (scripts/training-operator.sh):
#
#   1. a TrainJob on a runtime made of Trainer's torch-distributed that pins p5.48xlarge, 2 nodes
#      x 8 GPUs: held while node 2 fails validation (the probe, run on the host against each node,
#      publishes the NodeValidations; the gate reads the instance type in the runtime), ncclguard's
#      runtime patch on it; released once both pass; the JobSet and its pods made by the real
#      Trainer and JobSet controllers, each pod fixed (32 EFA devices, IPC_LOCK, /dev/shm, the
#      NCCL/libfabric env), one pod per node, Running, no Service of ncclguard's; from the pod on
#      node 2, PET_MASTER_ADDR (the Trainer's rendezvous name) resolves to the pod on node 1 and a
#      TCP connection to its PET_MASTER_PORT succeeds
#   2. a plain JobSet: the same across the nodes, with the JobSet controller's headless Service and
#      none of ncclguard's
#   3. a TrainJob whose image does not exist: the ImagePullFailed diagnosis as the NcclDiagnosis
#      condition on the TrainJob and an Event
#   4. a PyTorchJob (training operator v1) keeps working: Master and Worker on different nodes,
#      the Worker reaching the Master's port through MASTER_ADDR
#
# Exit 77 (ctest: skipped) with the reason where the host cannot run a node.
# Environment: NCCLGUARD_BUILD_DIR (the ncclguard binary for the image), NCCLGUARD_NODE_TEST_KEEP
# (a dir to copy the nodes' logs to).
# shellcheck disable=SC2154 # work, bin, image, failures and begin are set by lib.sh
set -Eeuo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
# shellcheck disable=SC2034 # lib.sh reads it
build="${NCCLGUARD_BUILD_DIR:-$root/build}"
# shellcheck source=lib.sh
source "$root/tests/node/lib.sh"
require_node_host training-operator.v1 jobset trainer-controller-manager
start_work trainer-test

cleanup() { stop_node $?; }
trap cleanup EXIT
trap 'echo "FAIL: trainer_tests stopped at line $LINENO: $BASH_COMMAND"' ERR

# ---------------------------------------------------------------- the nodes, the image, the operators
if ! NCCLGUARD_NODE_COUNT=2 "$root/scripts/node.sh" start >"$work/node.env" 2>"$work/node-start.log"; then
  cat "$work/node-start.log"; echo "FAIL: scripts/node.sh start (2 nodes)"; exit 1
fi
eval "$(cat "$work/node.env")"
# shellcheck disable=SC1091
source "$NCCLGUARD_NODE_DIR/node.env"
read -r node1 node2 <<<"$NODE_NAMES"
pass "nodes $node1 and $node2 Ready with CoreDNS at $DNS_IP"
k() { kubectl --request-timeout=30s "$@"; }

build_image

start=$SECONDS
"$root/scripts/training-operator.sh" install >"$work/operator.log" 2>&1 ||
  { cat "$work/operator.log"; echo "FAIL: scripts/training-operator.sh install"; exit 1; }
"$root/scripts/trainer.sh" install >"$work/trainer.log" 2>&1 ||
  { cat "$work/trainer.log"; echo "FAIL: scripts/trainer.sh install"; exit 1; }
pass "training operator $TRAINING_OPERATOR_VERSION, JobSet $JOBSET_VERSION and Trainer $TRAINER_VERSION installed from their modules' manifests, webhooks serving ($((SECONDS - start))s)"

# Both nodes as p5.48xlarge with their device plugins: extended resources in the Nodes' status.
for n in $node1 $node2; do
  k patch node "$n" --subresource=status --type=merge \
    -p '{"status":{"capacity":{"nvidia.com/gpu":"8","vpc.amazonaws.com/efa":"32"}}}' >/dev/null
done
advertised() {
  [[ "$(k get nodes -o jsonpath='{range .items[*]}{.status.allocatable.nvidia\.com/gpu}/{.status.allocatable.vpc\.amazonaws\.com/efa} {end}')" == "8/32 8/32 " ]]
}
eventually 60 advertised || { fail "nodes advertise $(k get nodes -o wide 2>&1)"; exit 1; }

ns=ncclguard-system
# The test nodes share this machine's PID namespace: /proc/1 is its init, not the node's, so the
# probe's host path (which would enter /proc/1/ns/net) is off in every node test.
if ! helm install ncclguard "$root/charts/ncclguard" -n "$ns" --create-namespace --set probe.enabled=false --set probe.peer.hostPath=false \
  --wait --timeout 180s >"$work/helm.log" 2>&1; then
  cat "$work/helm.log"; echo "FAIL: helm install"; exit 1
fi
k create namespace team >/dev/null
k label namespace team ncclguard.io/enabled=true >/dev/null
pass "helm install ncclguard; namespace team opted in"

# The probe, run here against each node: node 1 passes what this host (no GPU, no EFA device)
# passes; node 2 fails its EFA device count.
probe_node() { # NODE CHECKS
  "$build/cli/ncclguard" probe --once --publish --node-name "$1" --check "$2" >"$work/probe-$1.log" 2>&1 || true
}
summary() { k get nodevalidation "$1" -o jsonpath='{.status.summary}' 2>/dev/null; }
summary_is() { [[ "$(summary "$1")" =~ ^($2)$ ]]; }
probe_node "$node1" memlock-limit
probe_node "$node2" efa-device-count
if eventually 30 summary_is "$node1" 'Pass|Warn' && eventually 30 summary_is "$node2" Fail; then
  pass "probe: NodeValidation $node1 $(summary "$node1") (validated), $node2 Fail ($(k get nodevalidation "$node2" -o jsonpath='{.status.checks[0].message}'))"
else
  fail "probe: $node1 '$(summary "$node1")', $node2 '$(summary "$node2")'"
fi

preflight() { # KIND NAME: status reason of the NcclPreflight condition
  k -n team get "$1" "$2" -o jsonpath='{range .status.conditions[?(@.type=="NcclPreflight")]}{.status} {.reason}{end}'
}
held() { [[ "$(preflight "$1" "$2")" == "False InsufficientValidatedNodes" ]]; }
released() { [[ "$(preflight "$1" "$2")" == "True ValidatedNodesAvailable" ]]; }
pods_of() { k -n team get pods -l "jobset.sigs.k8s.io/jobset-name=$1" -o jsonpath='{range .items[*]}{.metadata.name}{"\n"}{end}'; }
placement() { # JOBSET: "<node>:gpu=<n>,efa=<n>,<phase>" of each pod, sorted
  k -n team get pods -l "jobset.sigs.k8s.io/jobset-name=$1" -o jsonpath='{range .items[*]}{.spec.nodeName}:gpu={.spec.containers[0].resources.limits.nvidia\.com/gpu},efa={.spec.containers[0].resources.limits.vpc\.amazonaws\.com/efa},{.status.phase}{"\n"}{end}' | sort | tr '\n' ' '
}
one_per_node_running() {
  [[ "$(placement "$1")" == "$(printf '%s\n' "$node1:gpu=8,efa=32,Running" "$node2:gpu=8,efa=32,Running" | sort | tr '\n' ' ')" ]]
}
# What the pod of completion index <i> of a JobSet's first job runs on.
pod_at() { # JOBSET INDEX
  k -n team get pods -l "jobset.sigs.k8s.io/jobset-name=$1,batch.kubernetes.io/job-completion-index=$2" -o jsonpath='{.items[0].metadata.name}'
}
# Inside a pod: the effective capabilities, /dev/shm's size and the NCCL/libfabric env.
inside() { # POD
  k -n team exec "$1" -- bash -c 'echo "capeff=$(awk "/^CapEff/ {print \$2}" /proc/self/status)"
    echo "shm_kb=$(df -k --output=size /dev/shm | tail -n 1 | tr -d " ")"
    env | grep -E "^(NCCL|FI)_" | sort | tr "\n" " "; echo'
}
check_fixed_inside() { # POD WHAT
  local out capeff shm_kb
  out="$(inside "$1" 2>&1)"
  capeff="$(sed -n 's/^capeff=//p' <<<"$out")"
  shm_kb="$(sed -n 's/^shm_kb=//p' <<<"$out")"
  if [[ "$capeff" =~ ^[0-9a-f]+$ ]] && (((16#$capeff >> 14) & 1)) && [[ "$shm_kb" =~ ^[0-9]+$ ]] && ((shm_kb > 65536)) &&
    grep -q 'FI_PROVIDER=efa' <<<"$out" && grep -q 'FI_EFA_USE_DEVICE_RDMA=1' <<<"$out" && grep -q 'NCCL_SOCKET_IFNAME=' <<<"$out"; then
    pass "inside $2 $1: CAP_IPC_LOCK effective (CapEff $capeff), /dev/shm $((shm_kb / 1024)) MB, env $(tail -n 1 <<<"$out")"
  else
    fail "inside $2 $1: $out"
  fi
}
# From a pod, <name> resolves to <ip> and a TCP connection to <port> there is answered "rank0".
reaches() { # POD NAME IP PORT CONTAINER
  local out
  out="$(k -n team exec "$1" -c "${5:-}" -- bash -c "getent hosts $2 | awk '{print \$1}'; perl -MIO::Socket::INET -e '\$c = IO::Socket::INET->new(PeerAddr => \"$2\", PeerPort => $4, Timeout => 5) or die \"connect: \$!\"; print scalar <\$c>'" 2>/dev/null)"
  [[ "$out" == "$3"$'\n'"rank0" ]]
}
# Rank 0's program: it listens on the port it is given (its first argument) and answers "rank0".
# Perl is in every Debian image; no single quote in it, so it goes into YAML and bash as it is.
listen='$| = 1; my $s = IO::Socket::INET->new(LocalPort => $ARGV[0], Listen => 8, ReuseAddr => 1) or die "listen: $!"; while (my $c = $s->accept) { print $c "rank0\n"; close $c; }'

# ---------------------------------------------------------------- 1. a TrainJob across the nodes
# The platform's runtime: Trainer's torch-distributed as installed, its trainer pods pinned to
# p5.48xlarge (what a cluster admin's runtime says). The gate finds the instance type there, in the
# controller's cache of runtimes; the TrainJob only asks 8 GPUs a node, and runs as root in the
# pods (a runtime patch of its own) so that IPC_LOCK shows in the effective set.
k get clustertrainingruntime torch-distributed -o json | python3 -c '
import json, sys
runtime = json.load(sys.stdin)
runtime["metadata"] = {"name": "torch-p5", "labels": runtime["metadata"].get("labels", {})}
for job in runtime["spec"]["template"]["spec"]["replicatedJobs"]:
    if job["name"] == "node":
        job["template"]["spec"]["template"]["spec"]["nodeSelector"] = {"node.kubernetes.io/instance-type": "p5.48xlarge"}
print(json.dumps(runtime))' >"$work/torch-p5.json"
k apply -f "$work/torch-p5.json" >/dev/null
cat >"$work/trainjob.yaml" <<YAML
apiVersion: trainer.kubeflow.org/v1alpha1
kind: TrainJob
metadata: {name: llama, namespace: team}
spec:
  runtimeRef: {name: torch-p5}
  trainer:
    image: $image
    numNodes: 2
    command: [bash, -c]
    args:
      - |
        if [ "\$PET_NODE_RANK" = 0 ]; then exec perl -MIO::Socket::INET -e '$listen' "\$PET_MASTER_PORT"; fi
        exec sleep infinity
    resourcesPerNode:
      limits: {nvidia.com/gpu: 8, memory: 256Mi, cpu: 100m}
  runtimePatches:
    - manager: team.example.com/placement
      trainingRuntimeSpec:
        template:
          spec:
            replicatedJobs:
              - name: node
                template:
                  spec:
                    template:
                      spec:
                        securityContext: {runAsUser: 0}
YAML
# The first admission may reach the controller before the CA bundle it serves with is published.
eventually 60 k apply -f "$work/trainjob.yaml" || fail "the TrainJob was not admitted: $(k apply -f "$work/trainjob.yaml" 2>&1)"
ours='{range .spec.runtimePatches[?(@.manager=="ncclguard.io/webhook")]}{.trainingRuntimeSpec.template.spec.replicatedJobs[0].template.spec.template.spec}{end}'
if eventually 60 held trainjob llama && [[ -z "$(pods_of llama)" ]] &&
  [[ "$(k -n team get trainjob llama -o jsonpath='{.spec.suspend}')" == true ]]; then
  pass "gate: TrainJob llama held (spec.suspend), no pods: $(k -n team get trainjob llama -o jsonpath='{.status.conditions[?(@.type=="NcclPreflight")].message}')"
else
  fail "gate: TrainJob llama not held: '$(preflight trainjob llama)', suspend $(k -n team get trainjob llama -o jsonpath='{.spec.suspend}'), pods: $(pods_of llama)"
fi
patch_spec="$(k -n team get trainjob llama -o jsonpath="$ours")"
if [[ "$patch_spec" == *IPC_LOCK* && "$patch_spec" == */dev/shm* && "$patch_spec" == *Memory* ]]; then
  pass "TrainJob llama carries ncclguard's runtime patch (manager ncclguard.io/webhook): $patch_spec"
else
  fail "TrainJob llama's runtime patches: $(k -n team get trainjob llama -o jsonpath='{.spec.runtimePatches}')"
fi
probe_node "$node2" memlock-limit
if eventually 60 released trainjob llama && eventually 180 one_per_node_running llama; then
  pass "released once $node2 validated; the Trainer's JobSet made one pod per node, each fixed and Running: $(placement llama)"
else
  fail "TrainJob llama: '$(preflight trainjob llama)', pods $(placement llama); $(k -n team get jobset,pods -o wide 2>&1 | tail -n 5)"
fi
owner="$(k -n team get jobset llama -o jsonpath='{.metadata.ownerReferences[0].kind}/{.metadata.ownerReferences[0].name}' 2>&1)"
services="$(k -n team get services -o jsonpath='{range .items[*]}{.metadata.name}:{.metadata.ownerReferences[0].kind}:{.spec.clusterIP} {end}')"
if [[ "$owner" == TrainJob/llama && "$services" == "llama:JobSet:None " ]]; then
  pass "JobSet llama owned by TrainJob llama; the only Service is the JobSet controller's headless llama"
else
  fail "JobSet llama owner '$owner'; Services: $services"
fi
rank0="$(pod_at llama 0)"
rank1="$(pod_at llama 1)"
check_fixed_inside "$rank0" "TrainJob pod"
rank0_ip="$(k -n team get pod "$rank0" -o jsonpath='{.status.podIP}')"
rank1_node="$(k -n team get pod "$rank1" -o jsonpath='{.spec.nodeName}')"
master="$(k -n team exec "$rank1" -- printenv PET_MASTER_ADDR 2>&1)"
port="$(k -n team exec "$rank1" -- printenv PET_MASTER_PORT 2>&1)"
if eventually 60 reaches "$rank1" "$master" "$rank0_ip" "$port" node; then
  pass "from $rank1 on $rank1_node: PET_MASTER_ADDR $master resolves to $rank0 ($rank0_ip) on the other node, and port $port answers"
else
  fail "from $rank1 on $rank1_node: $master / $port: $(k -n team exec "$rank1" -- getent hosts "$master" 2>&1)"
fi
k -n team describe trainjob llama >"$work/describe-trainjob.txt" 2>&1 || true
if grep -q 'NcclPreflight' "$work/describe-trainjob.txt" && grep -q 'Admitted' "$work/describe-trainjob.txt"; then
  pass "kubectl describe trainjob llama tells it: $(grep -E 'ValidatedNodesAvailable|Admitted' "$work/describe-trainjob.txt" | head -n 2 | tr -s ' ' | tr '\n' ' ')"
else
  fail "kubectl describe trainjob llama: $(tail -n 15 "$work/describe-trainjob.txt")"
fi
k -n team delete trainjob llama --wait=true --timeout=120s >/dev/null
no_pods() { [[ -z "$(k -n team get pods -o name)" ]]; }
eventually 120 no_pods || fail "the TrainJob's pods did not go: $(k -n team get pods 2>&1)"

# ---------------------------------------------------------------- 2. a plain JobSet
cat >"$work/jobset.yaml" <<YAML
apiVersion: jobset.x-k8s.io/v1alpha2
kind: JobSet
metadata: {name: js, namespace: team}
spec:
  replicatedJobs:
    - name: workers
      replicas: 1
      template:
        spec:
          parallelism: 2
          completions: 2
          completionMode: Indexed
          backoffLimit: 0
          template:
            spec:
              nodeSelector: {node.kubernetes.io/instance-type: p5.48xlarge}
              securityContext: {runAsUser: 0}
              terminationGracePeriodSeconds: 1
              containers:
                - name: train
                  image: $image
                  imagePullPolicy: Never
                  command: [bash, -c]
                  args:
                    - |
                      if [ "\$JOB_COMPLETION_INDEX" = 0 ]; then exec perl -MIO::Socket::INET -e '$listen' 29500; fi
                      exec sleep infinity
                  resources:
                    limits: {nvidia.com/gpu: 8, memory: 256Mi, cpu: 100m}
YAML
k apply -f "$work/jobset.yaml" >/dev/null
if eventually 60 released jobset js && eventually 180 one_per_node_running js; then
  pass "JobSet js released (both nodes validated), one pod per node, fixed and Running: $(placement js)"
else
  fail "JobSet js: '$(preflight jobset js)', pods $(placement js)"
fi
services="$(k -n team get services -o jsonpath='{range .items[*]}{.metadata.name}:{.metadata.ownerReferences[0].kind}:{.spec.clusterIP} {end}')"
if [[ "$services" == "js:JobSet:None " ]]; then
  pass "JobSet js: the JobSet controller's headless Service js, and none of ncclguard's"
else
  fail "JobSet js Services: $services"
fi
js0="$(pod_at js 0)"
js1="$(pod_at js 1)"
check_fixed_inside "$js1" "JobSet pod"
js0_ip="$(k -n team get pod "$js0" -o jsonpath='{.status.podIP}')"
if eventually 60 reaches "$js1" js-workers-0-0.js "$js0_ip" 29500 train; then
  pass "from $js1: js-workers-0-0.js (the JobSet's pod hostname and subdomain) resolves to $js0 ($js0_ip) on the other node, and port 29500 answers"
else
  fail "from $js1: js-workers-0-0.js: $(k -n team exec "$js1" -- getent hosts js-workers-0-0.js 2>&1)"
fi
k -n team delete jobset js --wait=true --timeout=120s >/dev/null
eventually 120 no_pods || fail "the JobSet's pods did not go: $(k -n team get pods 2>&1)"

# ---------------------------------------------------------------- 3. a TrainJob's failure, explained
cat >"$work/noimage.yaml" <<YAML
apiVersion: trainer.kubeflow.org/v1alpha1
kind: TrainJob
metadata: {name: noimage, namespace: team}
spec:
  runtimeRef: {name: torch-distributed}
  trainer:
    image: registry.example/llama-train:does-not-exist
    numNodes: 1
    resourcesPerNode:
      limits: {memory: 64Mi, cpu: 100m}
YAML
k apply -f "$work/noimage.yaml" >/dev/null
diagnosis() { k -n team get trainjob noimage -o jsonpath='{range .status.conditions[?(@.type=="NcclDiagnosis")]}{.status} {.reason}: {.message}{end}'; }
diagnosed() { [[ "$(diagnosis)" == "True ImagePullFailed: "* ]]; }
event() { k -n team get events --field-selector involvedObject.kind=TrainJob,involvedObject.name=noimage,reason=ImagePullFailed -o jsonpath='{.items[0].message}'; }
if eventually 120 diagnosed && [[ -n "$(event)" ]]; then
  pass "TrainJob noimage: NcclDiagnosis $(diagnosis | cut -c1-160); Event ImagePullFailed"
else
  fail "TrainJob noimage: NcclDiagnosis '$(diagnosis)', Event '$(event)'; pods $(k -n team get pods 2>&1 | tail -n 2)"
fi
k -n team delete trainjob noimage --wait=true --timeout=120s >/dev/null
eventually 120 no_pods || fail "the TrainJob's pods did not go: $(k -n team get pods 2>&1)"

# ---------------------------------------------------------------- 4. PyTorchJob v1 across the nodes
cat >"$work/pytorchjob.yaml" <<YAML
apiVersion: kubeflow.org/v1
kind: PyTorchJob
metadata: {name: bert, namespace: team}
spec:
  pytorchReplicaSpecs:
    Master:
      replicas: 1
      restartPolicy: OnFailure
      template:
        spec:
          nodeSelector: {node.kubernetes.io/instance-type: p5.48xlarge}
          terminationGracePeriodSeconds: 1
          containers:
            - name: pytorch
              image: $image
              imagePullPolicy: Never
              command: [perl, -MIO::Socket::INET, -e]
              args: ['$listen', \$(MASTER_PORT)]
              resources:
                limits: {nvidia.com/gpu: 8, memory: 256Mi, cpu: 100m}
    Worker:
      replicas: 1
      restartPolicy: OnFailure
      template:
        spec:
          nodeSelector: {node.kubernetes.io/instance-type: p5.48xlarge}
          terminationGracePeriodSeconds: 1
          containers:
            - name: pytorch
              image: $image
              imagePullPolicy: Never
              command: [sleep, infinity]
              resources:
                limits: {nvidia.com/gpu: 8, memory: 256Mi, cpu: 100m}
YAML
k apply -f "$work/pytorchjob.yaml" >/dev/null
ptj_placement() {
  k -n team get pods -l training.kubeflow.org/job-name=bert -o jsonpath='{range .items[*]}{.metadata.labels.training\.kubeflow\.org/replica-type}@{.spec.nodeName}:{.status.phase} {end}'
}
spread_running() {
  local p; p="$(ptj_placement)"
  [[ "$p" =~ ^(master|worker)@(ncclguard-node[-0-9]*):Running\ (master|worker)@(ncclguard-node[-0-9]*):Running\ $ ]] &&
    [[ "${BASH_REMATCH[2]}" != "${BASH_REMATCH[4]}" ]]
}
if eventually 60 released pytorchjob bert && eventually 180 spread_running; then
  pass "PyTorchJob bert released; Master and Worker on different nodes, Running: $(ptj_placement)"
else
  fail "PyTorchJob bert: '$(preflight pytorchjob bert)', pods $(ptj_placement)"
fi
worker="$(k -n team get pods -l training.kubeflow.org/job-name=bert,training.kubeflow.org/replica-type=worker -o jsonpath='{.items[0].metadata.name}')"
master_pod="$(k -n team get pods -l training.kubeflow.org/job-name=bert,training.kubeflow.org/replica-type=master -o jsonpath='{.items[0].metadata.name}')"
master_ip="$(k -n team get pod "$master_pod" -o jsonpath='{.status.podIP}')"
master_addr="$(k -n team exec "$worker" -c pytorch -- printenv MASTER_ADDR 2>&1)"
master_port="$(k -n team exec "$worker" -c pytorch -- printenv MASTER_PORT 2>&1)"
if eventually 60 reaches "$worker" "$master_addr" "$master_ip" "$master_port" pytorch; then
  pass "from the Worker $worker: MASTER_ADDR $master_addr resolves to the Master ($master_ip) on the other node, and port $master_port answers"
else
  fail "from the Worker $worker: $master_addr:$master_port: $(k -n team exec "$worker" -c pytorch -- getent hosts "$master_addr" 2>&1)"
fi

echo "trainer_tests: $failures failure(s) in $((SECONDS - begin))s"
((failures == 0))
