#!/usr/bin/env bash
# Kueue AdmissionCheck benchmark (issue 15). Per run, on a fresh control plane
# (scripts/controlplane.sh: real etcd + kube-apiserver, loopback only):
#   1. real Kueue (scripts/controlplane.sh build kueue; its CRDs from the Go module cache) with
#      integrations batch/job, a ResourceFlavor p5 (nodeLabels p5.48xlarge), the AdmissionCheck
#      ncclguard.io/preflight, a ClusterQueue with quota for every job and a LocalQueue;
#   2. NODES p5.48xlarge nodes, all NodeValidations Pass but the last (Fail);
#   3. `ncclguard controller --kueue-admission-check --leader-elect=false` started;
#   4. WORKLOADS batch Jobs of NODES pods x 8 GPUs, queued (created suspended, as Kueue's
#      webhook would make them: its webhooks are not registered here); Kueue makes their
#      Workloads and reserves quota; wait until every Workload's check is Pending;
#   5. the last node passes: time from that status write until all WORKLOADS checks are Ready
#      (a watch of the Workloads), the CPU seconds kube-apiserver, etcd, Kueue and the controller
#      spent meanwhile, and the controller's RSS then.
# Prints each run and the medians of RUNS runs (default 3). Needs root (unshare --mount).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${NCCLGUARD_BUILD_DIR:-$root/build}
# shellcheck source=../scripts/controlplane/versions.sh disable=SC1091
source "$root/scripts/controlplane/versions.sh"
# shellcheck source=bench/kueue_lib.sh
source "$root/bench/kueue_lib.sh"
runs=${RUNS:-3}
workloads=${WORKLOADS:-200}
nodes=${NODES:-4}
workers=${WORKERS:-4}
ncclguard=${NCCLGUARD_BIN:-$build/cli/ncclguard}
[[ -n ${NCCLGUARD_SKIP_BUILD:-} ]] || "$root/scripts/build.sh" ncclguard >/dev/null
"$root/scripts/controlplane.sh" build kueue >/dev/null 2>&1
kueue_src=$("$root/scripts/controlplane.sh" source-dir "sigs.k8s.io/kueue@$KUEUE_VERSION")

work=$(mktemp -d)
controller_pid="" kueue_pid=""
export NCCLGUARD_CONTROLPLANE_DIR=$work/cp
stop_pid() { [[ -n $1 ]] && kill "$1" 2>/dev/null && wait "$1" 2>/dev/null; return 0; }
cleanup() {
  stop_pid "$controller_pid"
  stop_pid "$kueue_pid"
  "$root/scripts/controlplane.sh" stop >/dev/null 2>&1 || true
  rm -rf "$work"
}
trap cleanup EXIT

rss_kb() { awk '/^VmRSS:/ {print $2}' "/proc/$1/status"; }
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }

# Kueue's serving certificate (its webhook server starts with it; nothing calls it here).
mkdir -p "$work/certs"
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 1 \
  -subj /CN=kueue-bench -addext subjectAltName=IP:127.0.0.1 \
  -keyout "$work/certs/tls.key" -out "$work/certs/tls.crt" 2>/dev/null
# Kueue reads its metrics certificate from /etc/kueue/metrics/certs: it runs in a mount
# namespace of its own where /etc is $work/etc (nothing on the host changes).
mkdir -p "$work/etc/kueue/metrics/certs"
cp "$work/certs/tls.crt" "$work/certs/tls.key" "$work/etc/kueue/metrics/certs/"

# Prints the seconds from the NodeValidation write (made by this script) until every check
# `check` is Ready, from a watch of the Workloads (one list for its resourceVersion first: with
# thousands of Workloads, polling the list would load the API server it measures).
cat >"$work/watch.py" <<'EOF'
import http.client, json, os, ssl, subprocess, sys, time
url, ca, cert, key, check, total, patch_cmd, pids = sys.argv[1:9]
total = int(total)
# name:pid,...: the CPU seconds each spends from the write until the last check is Ready.
pids = dict(item.split(":") for item in pids.split(","))
tick = os.sysconf("SC_CLK_TCK")
def cpu_s():
    out = {}
    for name, pid in pids.items():
        fields = open("/proc/%s/stat" % pid).read().rsplit(")", 1)[1].split()
        out[name] = (int(fields[11]) + int(fields[12])) / tick  # utime + stime
    return out
ctx = ssl.create_default_context(cafile=ca)
ctx.load_cert_chain(cert, key)
host, port = url.split("//")[1].split(":")
path = "/apis/kueue.x-k8s.io/v1beta2/namespaces/bench/workloads"
def is_ready(w):
    return any(e.get("name") == check and e.get("state") == "Ready"
               for e in (w.get("status") or {}).get("admissionChecks") or [])
conn = http.client.HTTPSConnection(host, int(port), context=ctx, timeout=600)
conn.request("GET", path)
listed = json.loads(conn.getresponse().read())
ready = {w["metadata"]["name"] for w in listed["items"] if is_ready(w)}
conn.request("GET", path + "?watch=1&timeoutSeconds=600&resourceVersion="
             + listed["metadata"]["resourceVersion"])
stream = conn.getresponse()
cpu0 = cpu_s()
start = time.monotonic()
subprocess.run(patch_cmd, shell=True, check=True, stdout=subprocess.DEVNULL)
while len(ready) < total:
    line = stream.readline()
    if not line:
        sys.exit("the watch ended with %d of %d checks Ready" % (len(ready), total))
    event = json.loads(line)
    if event.get("type") in ("ADDED", "MODIFIED") and is_ready(event["object"]):
        ready.add(event["object"]["metadata"]["name"])
seconds = time.monotonic() - start
cpu1 = cpu_s()
print(json.dumps({"all_ready_s": round(seconds, 2),
                  "cpu_s": {name: round(cpu1[name] - cpu0[name], 2) for name in pids}}))
EOF

: >"$work/results"
for run in $(seq "$runs"); do
  kueue_control_plane "$root"/crds/{nodevalidation,ncclpolicy}.yaml
  env_file=$NCCLGUARD_CONTROLPLANE_DIR/controlplane.env
  k create namespace kueue-system >/dev/null
  k create namespace bench >/dev/null
  health=$(free_port)
  cat >"$work/kueue.yaml" <<EOF
apiVersion: config.kueue.x-k8s.io/v1beta2
kind: Configuration
namespace: kueue-system
health: {healthProbeBindAddress: "127.0.0.1:$health"}
metrics: {bindAddress: "0"}
webhook: {host: 127.0.0.1, port: $(free_port), certDir: "$work/certs"}
leaderElection: {leaderElect: false}
internalCertManagement: {enable: false}
manageJobsWithoutQueueName: false
integrations: {frameworks: ["batch/job"]}
EOF
  # shellcheck disable=SC2016 # $0 and $@ belong to the inner shell
  KUBECONFIG=$kubeconfig unshare --mount --propagation private \
    /bin/sh -c 'mount --bind "$0" /etc && exec "$@"' "$work/etc" \
    "$bin/kueue" --config="$work/kueue.yaml" \
    --feature-gates=VisibilityOnDemand=false >"$work/kueue.log" 2>&1 &
  kueue_pid=$!
  for _ in $(seq 240); do
    curl -sf "http://127.0.0.1:$health/readyz" >/dev/null && break
    sleep 0.5
  done

  for i in $(seq "$nodes"); do
    summary=Pass
    [[ $i == "$nodes" ]] && summary=Fail
    k create -f - >/dev/null <<EOF
{"apiVersion":"v1","kind":"Node","metadata":{"name":"node-$i","labels":{"node.kubernetes.io/instance-type":"p5.48xlarge"}}}
EOF
    k create -f - >/dev/null <<EOF
{"apiVersion":"ncclguard.io/v1alpha1","kind":"NodeValidation","metadata":{"name":"node-$i"}}
EOF
    k patch nodevalidation "node-$i" --subresource=status --type=merge \
      -p "{\"status\":{\"instanceType\":\"p5.48xlarge\",\"summary\":\"$summary\",\"checks\":[]}}" >/dev/null
  done
  gpus=$((workloads * nodes * 8))
  k apply -f - >/dev/null <<EOF
apiVersion: kueue.x-k8s.io/v1beta2
kind: ResourceFlavor
metadata: {name: p5}
spec: {nodeLabels: {node.kubernetes.io/instance-type: p5.48xlarge}}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: AdmissionCheck
metadata: {name: preflight}
spec: {controllerName: ncclguard.io/preflight}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: ClusterQueue
metadata: {name: cq}
spec:
  namespaceSelector: {}
  resourceGroups:
    - coveredResources: [cpu, nvidia.com/gpu]
      flavors:
        - name: p5
          resources:
            - {name: cpu, nominalQuota: $gpus}
            - {name: nvidia.com/gpu, nominalQuota: $gpus}
  admissionChecksStrategy:
    admissionChecks: [{name: preflight}]
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: LocalQueue
metadata: {name: lq, namespace: bench}
spec: {clusterQueue: cq}
EOF

  "$ncclguard" controller --kubeconfig "$kubeconfig" --leader-elect=false --workers "$workers" \
    --health-listen 0 --kueue-admission-check --log-level warn 2>"$work/controller.log" &
  controller_pid=$!

  python3 - "$workloads" "$nodes" >"$work/jobs.yaml" <<'EOF'
import json, sys
n, pods = int(sys.argv[1]), int(sys.argv[2])
for i in range(n):
    print("---")
    print(json.dumps({"apiVersion": "batch/v1", "kind": "Job",
        "metadata": {"name": "train-%d" % i, "namespace": "bench",
                     "labels": {"kueue.x-k8s.io/queue-name": "lq"}},
        "spec": {"suspend": True, "parallelism": pods, "completions": pods,
                 "template": {"spec": {"restartPolicy": "Never", "containers": [
                     {"name": "t", "image": "registry.invalid/t:1",
                      "resources": {"requests": {"cpu": "1", "nvidia.com/gpu": "8"},
                                    "limits": {"nvidia.com/gpu": "8"}}}]}}}}))
EOF
  k create -f "$work/jobs.yaml" >/dev/null
  pending=0
  for _ in $(seq 600); do
    pending=$(k get workloads -n bench -o json | python3 -c '
import json, sys
items = json.load(sys.stdin)["items"]
print(sum(1 for w in items for e in (w.get("status") or {}).get("admissionChecks") or []
          if e.get("name") == "preflight" and e.get("state") == "Pending"
          and "nodes validated" in e.get("message", "")))')
    [[ $pending == "$workloads" ]] && break
    sleep 1
  done
  [[ $pending == "$workloads" ]] || { echo "kueue.sh: only $pending of $workloads checks Pending" >&2; exit 1; }

  field() { sed -n "s/^$1=//p" "$env_file"; }
  pid_of() { awk '{print $1}' "$NCCLGUARD_CONTROLPLANE_DIR/$1.pid"; }
  timed=$(python3 "$work/watch.py" "$(field APISERVER_URL)" "$(field CA_FILE)" \
    "$(field ADMIN_CERT_FILE)" "$(field ADMIN_KEY_FILE)" preflight "$workloads" \
    "$bin/kubectl --kubeconfig $kubeconfig patch nodevalidation node-$nodes --subresource=status --type=merge -p '{\"status\":{\"summary\":\"Pass\"}}'" \
    "kube-apiserver:$(pid_of kube-apiserver),etcd:$(pid_of etcd),kueue:$kueue_pid,ncclguard:$controller_pid")
  rss=$(rss_kb "$controller_pid")
  echo "{\"run\":$run,\"workloads\":$workloads,${timed:1:-1},\"controller_rss_kb\":$rss}" |
    tee -a "$work/results"
  stop_pid "$controller_pid"
  controller_pid=""
  stop_pid "$kueue_pid"
  kueue_pid=""
  "$root/scripts/controlplane.sh" stop >/dev/null 2>&1
done

python3 - "$work/results" <<'EOF'
import json, os, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
print("median of %d runs: all %d checks Ready %.2f s after the last node passed; controller RSS %.1f MB"
      % (len(rows), rows[0]["workloads"], statistics.median(r["all_ready_s"] for r in rows),
         statistics.median(r["controller_rss_kb"] for r in rows) / 1024))
# Where the 2 cores went meanwhile: CPU seconds per process, and all of them per second.
for name in rows[0]["cpu_s"]:
    print("  %s: %.2f CPU s (median)" % (name, statistics.median(r["cpu_s"][name] for r in rows)))
print("  together: %.2f cores busy of %d" % (statistics.median(
    sum(r["cpu_s"].values()) / r["all_ready_s"] for r in rows), os.cpu_count()))
EOF
