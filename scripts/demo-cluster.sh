#!/usr/bin/env bash
# `scripts/demo.sh --cluster`: the README's main job on a real single-node cluster.
#
# Starts the test node (scripts/node.sh: kubelet, containerd, scheduler, controller-manager,
# kube-proxy and CoreDNS in a network namespace with no way out), makes it look like a
# p5.48xlarge (8 GPUs, 32 EFA devices as extended resources), builds the ncclguard image
# without a registry, installs ncclguard with helm and the Kubeflow training operator, and
# submits examples/pytorchjob-broken.yaml sized for this node:
#   1. held by the gate: the node has not been validated yet, and the operator creates no pods;
#   2. the probe DaemonSet validates the node: the gate releases the job;
#   3. the training operator creates the Master and Worker pods, ncclguard's webhook fixes them
#      (EFA devices, IPC_LOCK, /dev/shm, NCCL/libfabric env, rendezvous DNS), and they run.
# Then stops the node. `--keep` leaves it running for you to explore.
# shellcheck source-path=SCRIPTDIR
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${NCCLGUARD_BUILD_DIR:-$root/build}
keep=false
for arg in "$@"; do
  case $arg in
    --keep) keep=true ;;
    --cluster) ;;
    -h | --help) sed -n '2,13p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
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

((EUID == 0)) || fail "the node needs root (network namespace, mounts, cgroups): run as root"

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

say "1. Starting a real single-node cluster (scripts/node.sh; nothing can leave this machine)"
start=$SECONDS
eval "$("$root/scripts/node.sh" start 2>"$work/node-start.log")" || { cat "$work/node-start.log" >&2; fail "the node did not start"; }
# shellcheck disable=SC1091
source "$NCCLGUARD_NODE_DIR/node.env"
note "node $NODE_NAME Ready in $((SECONDS - start)) s: kubelet, containerd (runc), kube-proxy, scheduler,"
note "controller-manager, etcd, kube-apiserver, and CoreDNS at $DNS_IP as the cluster DNS"
kubectl patch node "$NODE_NAME" --subresource=status --type=merge \
  -p '{"status":{"capacity":{"nvidia.com/gpu":"8","vpc.amazonaws.com/efa":"32"}}}' >/dev/null
until_true 60 bash -c "[[ \$(kubectl get node $NODE_NAME -o jsonpath='{.status.allocatable.vpc\.amazonaws\.com/efa}') == 32 ]]" ||
  fail "the node does not advertise its EFA devices"
note "it poses as a p5.48xlarge: label node.kubernetes.io/instance-type=p5.48xlarge; nvidia.com/gpu: 8 and"
note "vpc.amazonaws.com/efa: 32 in its status, as the NVIDIA and EFA device plugins would advertise them"

say "2. Building the ncclguard image without a registry and importing it into the node (scripts/image.sh)"
NCCLGUARD_BUILD_DIR=$build NCCLGUARD_IMAGE_ARCHIVE=$work/ncclguard.tar "$root/scripts/image.sh" 2>"$work/image.log" ||
  { cat "$work/image.log" >&2; fail "scripts/image.sh failed"; }
app_version=$(sed -n 's/^appVersion: *"\{0,1\}\([^"]*\)"\{0,1\}$/\1/p' "$root/charts/ncclguard/Chart.yaml")
image=ghcr.io/ncclguard/ncclguard:$app_version
note "$image"

say "3. helm install ncclguard (its probe DaemonSet left off for now: the node is not validated yet)"
helm install ncclguard "$root/charts/ncclguard" -n ncclguard-system --create-namespace \
  --set probe.enabled=false --wait --timeout 180s >"$work/helm.log" 2>&1 || { cat "$work/helm.log" >&2; fail "helm install failed"; }
kubectl -n ncclguard-system get pods | sed 's/^/   /'

say "4. Installing the Kubeflow training operator (its own release manifests, from the Go module cache)"
"$root/scripts/training-operator.sh" install 2>&1 | sed 's/^/   /'
kubectl -n kubeflow get pods | sed 's/^/   /'
kubectl create namespace ml >/dev/null
kubectl label namespace ml ncclguard.io/enabled=true >/dev/null
note "namespace ml opted in to ncclguard (label ncclguard.io/enabled=true)"

say "5. kubectl apply: examples/pytorchjob-broken.yaml, sized for this node"
# Half a p5 per pod (4 GPUs, 4 processes) so Master and Worker fit on one node, a memory limit
# this machine has, and an image the node has (no registry): the Master listens on the
# rendezvous port, the Worker connects to it through the MASTER_ADDR it was given, then both
# stay up.
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
preflight() { kubectl get pytorchjob -n ml llama-pretrain -o jsonpath='{.status.conditions[?(@.type=="NcclPreflight")].status}'; }
suspended() { kubectl get pytorchjob -n ml llama-pretrain -o jsonpath='{.status.conditions[?(@.type=="Suspended")].status}'; }
until_true 60 bash -c "[[ \$(kubectl get pytorchjob -n ml llama-pretrain -o jsonpath='{.status.conditions[?(@.type==\"NcclPreflight\")].status}') == False ]]" ||
  fail "the controller did not hold the job"
until_true 60 bash -c "[[ \$(kubectl get pytorchjob -n ml llama-pretrain -o jsonpath='{.status.conditions[?(@.type==\"Suspended\")].status}') == True ]]" ||
  fail "the training operator did not see the job suspended"
note "held by the gate: no validated p5.48xlarge node yet; the training operator sees it suspended"
job_state
note "pods in ml: $(kubectl get pods -n ml -o name | wc -l) (the operator creates none while the job is held)"
note "rendezvous: $(kubectl get service -n ml llama-pretrain -o jsonpath='headless Service {.metadata.name}, MASTER_ADDR {.metadata.annotations.ncclguard\.io/master-addr}')"

say "6. helm upgrade --set probe.enabled=true: the probe DaemonSet validates the node"
# The checks this machine can pass (it has no GPUs or EFA devices: those checks would fail it).
helm upgrade ncclguard "$root/charts/ncclguard" -n ncclguard-system --reuse-values --set probe.enabled=true \
  --set 'probe.checks={memlock-limit,dev-shm-stale,removeipc}' --wait --timeout 180s >"$work/upgrade.log" 2>&1 ||
  { cat "$work/upgrade.log" >&2; fail "helm upgrade failed"; }
until_true 120 bash -c "[[ \$(kubectl get node $NODE_NAME -o jsonpath='{.metadata.labels.ncclguard\.io/validated}') == true ]]" ||
  fail "the probe did not validate the node"
note "NodeValidation $NODE_NAME: $(kubectl get nodevalidation "$NODE_NAME" -o jsonpath='{.status.summary}: {range .status.checks[*]}{.id}={.status} {end}')"
until_true 60 bash -c "[[ \$(kubectl get pytorchjob -n ml llama-pretrain -o jsonpath='{.spec.runPolicy.suspend}') == false ]]" ||
  fail "the job was not released"
note "released by the gate:"
job_state

say "7. The training operator creates the pods; ncclguard's webhook fixes them; they run"
running() { [[ $(kubectl get pods -n ml -l training.kubeflow.org/job-name=llama-pretrain -o jsonpath='{range .items[*]}{.status.phase} {end}') == "Running Running " ]]; }
until_true 180 running || { kubectl get pods -n ml -o wide >&2; fail "the pods are not Running"; }
kubectl get pods -n ml -o wide | sed 's/^/   /'
kubectl get pod -n ml llama-pretrain-worker-0 -o json | python3 -c '
import json, sys
pod = json.load(sys.stdin)
spec = pod["spec"]
c = spec["containers"][0]
env = {e["name"]: e.get("value") for e in c.get("env", [])}
print("   what the webhook added to llama-pretrain-worker-0 (the operator made it from the template):")
print("     resources.limits: %s" % json.dumps(c["resources"]["limits"]))
print("     capabilities: %s" % json.dumps(c.get("securityContext", {}).get("capabilities", {})))
print("     /dev/shm: %s" % [v["name"] for v in spec.get("volumes", []) if v.get("emptyDir", {}).get("medium") == "Memory"])
print("     env: %s" % ", ".join("%s=%s" % (k, v) for k, v in env.items() if k.startswith(("NCCL_", "FI_"))))
print("     hostname %s, subdomain %s (the name under the headless Service resolves)" % (spec.get("hostname"), spec.get("subdomain")))
print("   set by the training operator: MASTER_ADDR=%s MASTER_PORT=%s WORLD_SIZE=%s RANK=%s" % (
    env.get("MASTER_ADDR"), env.get("MASTER_PORT"), env.get("WORLD_SIZE"), env.get("RANK")))'
until_true 60 bash -c 'kubectl logs -n ml llama-pretrain-worker-0 -c pytorch | grep -q "rank 1 reached"' || fail "the Worker did not reach the Master"
note "Worker log: $(kubectl logs -n ml llama-pretrain-worker-0 -c pytorch | grep 'rank 1 reached')"
note "(resolved by CoreDNS, connected across the pod network)"

if [[ $keep == true ]]; then
  say "Still running (--keep). Explore with:"
  echo "   export KUBECONFIG=$KUBECONFIG PATH=$(dirname "$(command -v kubectl)"):\$PATH"
  echo "   kubectl describe pytorchjob -n ml llama-pretrain; kubectl get pods -A"
  echo "   stop: NCCLGUARD_NODE_DIR=$NCCLGUARD_NODE_DIR scripts/node.sh stop"
else
  say "Done; the node is stopped and nothing of it is left."
fi
