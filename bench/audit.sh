#!/usr/bin/env bash
# Audit benchmark (issue 28). Per run, on a fresh control plane (scripts/controlplane.sh: real etcd
# + kube-apiserver, loopback only, stopped by pid at exit):
#   1. NAMESPACES namespaces holding PODS GPU pods (real objects: no kubelet, they stay Pending;
#      every other one lacks its EFA devices) and JOBS PyTorchJobs (Master + Worker of 8 GPUs),
#      created by PARALLEL `kubectl create` processes: objects/s;
#   2. `ncclguard audit -A` (text and -o json) over them: wall time, CPU seconds, peak RSS; its
#      JSON is what the controller's reports must add up to, namespace by namespace;
#   3. `ncclguard controller --metrics-listen 127.0.0.1:PORT` (background audit on by default):
#      time from its start until the PolicyReports on the server carry the same summary counts
#      as the CLI's, its CPU seconds (/proc/<pid>/stat) and peak RSS (VmHWM) by then, and the
#      report writes it made (ncclguard_audit_report_writes_total{operation}): one per namespace
#      (and report), not per object;
#   4. CHANGED (default 100) PyTorchJobs of one namespace changed (a broken NCCL_PROTO): time
#      until that namespace's reports say so, and the writes that took.
# Steps 3-4 need a controller with the background audit (`--policy-reports`); with one without
# it, they are skipped, saying so. Prints each run as JSON and the medians of RUNS runs.
#
# Usage: bench/audit.sh [--quick]    (--quick: 500 pods, 50 jobs, 5 namespaces, 20 changed, 1 run)
# Environment: PODS (10000), JOBS (1000), NAMESPACES (10), CHANGED (100), RUNS (3), PARALLEL (8),
#   NCCLGUARD_BIN, NCCLGUARD_BUILD_DIR, NCCLGUARD_SKIP_BUILD.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${NCCLGUARD_BUILD_DIR:-$root/build}
pods=${PODS:-10000}
jobs=${JOBS:-1000}
namespaces=${NAMESPACES:-10}
changed=${CHANGED:-100}
runs=${RUNS:-3}
parallel=${PARALLEL:-8}
if [[ ${1:-} == --quick ]]; then
  pods=${PODS:-500} jobs=${JOBS:-50} namespaces=${NAMESPACES:-5} changed=${CHANGED:-20} runs=${RUNS:-1}
elif [[ -n ${1:-} ]]; then
  echo "usage: $0 [--quick]" >&2
  exit 2
fi
ncclguard=${NCCLGUARD_BIN:-$build/cli/ncclguard}
[[ -n ${NCCLGUARD_SKIP_BUILD:-} ]] || "$root/scripts/build.sh" ncclguard >/dev/null

# shellcheck source=../scripts/controlplane/versions.sh
source "$root/scripts/controlplane/versions.sh"
training_operator=$("$root/scripts/controlplane.sh" source-dir "github.com/kubeflow/training-operator@$TRAINING_OPERATOR_VERSION")
kyverno=$("$root/scripts/controlplane.sh" source-dir "github.com/kyverno/kyverno@${KYVERNO_VERSION:-v1.19.1}")
controller_audits=0
"$ncclguard" controller --help 2>&1 | grep -q -- --policy-reports && controller_audits=1

work=$(mktemp -d)
controller_pid=""
export NCCLGUARD_CONTROLPLANE_DIR=$work/cp
cleanup() {
  if [[ -n $controller_pid ]]; then
    kill "$controller_pid" 2>/dev/null || true
    wait "$controller_pid" 2>/dev/null || true
  fi
  # controlplane.sh stop ends the etcd and kube-apiserver it started, by the pids it recorded.
  "$root/scripts/controlplane.sh" stop >/dev/null 2>&1 || true
  rm -rf "$work"
}
trap cleanup EXIT

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
now() { date +%s.%N; }
elapsed() { python3 -c 'import sys; print("%.2f" % (float(sys.argv[2]) - float(sys.argv[1])))' "$1" "$2"; }
cpu_s() { awk -v hz="$(getconf CLK_TCK)" '{printf "%.2f", ($14 + $15) / hz}' "/proc/$1/stat"; }
peak_kb() { awk '/^VmHWM:/ {print $2}' "/proc/$1/status"; }
rss_kb() { awk '/^VmRSS:/ {print $2}' "/proc/$1/status"; }
# Sum of the controller's report writes (every operation), 0 before the first.
writes() {
  curl -sf "http://127.0.0.1:$port/metrics" |
    awk '/^ncclguard_audit_report_writes_total[{ ]/ {sum += $NF} END {printf "%d", sum}'
}
# "namespace pass warn fail" per namespace, summed over its reports, sorted: from the server
# (`kubectl get policyreports`) or from `ncclguard audit -o json` (a file).
summaries() {
  python3 -c '
import json, sys, collections
items = json.load(open(sys.argv[1]) if len(sys.argv) > 1 else sys.stdin)["items"]
sums = collections.defaultdict(lambda: [0, 0, 0])
for report in items:
    if report.get("metadata", {}).get("labels", {}).get("app.kubernetes.io/managed-by") != "ncclguard":
        continue
    s = report.get("summary", {})
    for i, key in enumerate(("pass", "warn", "fail")):
        sums[report["metadata"]["namespace"]][i] += s.get(key, 0)
for ns in sorted(sums):
    if any(sums[ns]):  # a namespace with nothing audited: an empty report, or none
        print(ns, *sums[ns])
' "$@"
}
server_summaries() { "$kubectl" --kubeconfig "$kubeconfig" get policyreports -A -o json | summaries; }

# The objects, as NAMESPACES x PARALLEL-ish List files for `kubectl create -f`.
python3 - "$work/objects" "$pods" "$jobs" "$namespaces" "$parallel" <<'PY'
import json, os, sys
out, pods, jobs, namespaces, parallel = sys.argv[1], *map(int, sys.argv[2:])
os.makedirs(out)
def container(broken, efa=True):
    resources = {"nvidia.com/gpu": 8, "memory": "1000Gi"}
    if efa and not broken:
        resources["vpc.amazonaws.com/efa"] = 32
    return {"name": "pytorch",
            "image": "registry.example/train@sha256:" + "0123456789abcdef" * 4,
            "env": [{"name": "FI_PROVIDER", "value": "efa"},
                    {"name": "FI_EFA_USE_DEVICE_RDMA", "value": "1"},
                    {"name": "NCCL_SOCKET_IFNAME", "value": "^lo,docker,efa,veth"},
                    {"name": "TORCH_NCCL_ASYNC_ERROR_HANDLING", "value": "1"},
                    {"name": "NCCL_DEBUG", "value": "INFO"},
                    {"name": "NCCL_DEBUG_SUBSYS", "value": "INIT,NET"}],
            "resources": {"requests": dict(resources), "limits": dict(resources)},
            "securityContext": {"capabilities": {"add": ["IPC_LOCK"]}},
            "volumeMounts": [{"name": "dshm", "mountPath": "/dev/shm"}]}
def pod_spec(broken):
    return {"nodeSelector": {"node.kubernetes.io/instance-type": "p5.48xlarge"},
            "containers": [container(broken)],
            "volumes": [{"name": "dshm", "emptyDir": {"medium": "Memory", "sizeLimit": "512Gi"}}]}
def ns_of(i):
    return "audit-%d" % (i % namespaces)
objects = [{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "audit-%d" % n}}
           for n in range(namespaces)]
json.dump({"apiVersion": "v1", "kind": "List", "items": objects}, open(out + "/namespaces.json", "w"))
chunks = [[] for _ in range(parallel)]
for i in range(pods):
    chunks[i % parallel].append({"apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "pod-%d" % i, "namespace": ns_of(i)}, "spec": pod_spec(i % 2 == 1)})
for i in range(jobs):
    template = {"spec": pod_spec(False)}
    chunks[i % parallel].append({"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob",
        "metadata": {"name": "job-%d" % i, "namespace": ns_of(i)},
        "spec": {"pytorchReplicaSpecs": {"Master": {"replicas": 1, "template": template},
                                         "Worker": {"replicas": 1, "template": template}}}})
for n, chunk in enumerate(chunks):
    json.dump({"apiVersion": "v1", "kind": "List", "items": chunk}, open("%s/chunk-%d.json" % (out, n), "w"))
# The change of step 4: the same jobs with a broken NCCL_PROTO (a deny: fail).
broken = container(False)
broken["env"].append({"name": "NCCL_PROTO", "value": "fast"})
patch = {"spec": {"pytorchReplicaSpecs": {role: {"template": {"spec": {"containers": [broken]}}}
                                          for role in ("Master", "Worker")}}}
json.dump(patch, open(out + "/change.json", "w"))
PY

: >"$work/results"
for run in $(seq "$runs"); do
  "$root/scripts/controlplane.sh" start >"$work/cp.log" 2>&1
  kubeconfig=$NCCLGUARD_CONTROLPLANE_DIR/kubeconfig
  kubectl=$(sed -n 's/^export PATH=\(.*\):"\$PATH"$/\1/p' "$work/cp.log")/kubectl
  for crd in "$training_operator/manifests/base/crds/kubeflow.org_pytorchjobs.yaml" \
    "$kyverno/config/crds/policyreport/wgpolicyk8s.io_policyreports.yaml" \
    "$root"/crds/{nodevalidation,ncclpolicy}.yaml; do
    "$kubectl" --kubeconfig "$kubeconfig" apply --server-side -f "$crd" >/dev/null
  done
  "$kubectl" --kubeconfig "$kubeconfig" wait --for condition=established --timeout=60s \
    crd --all >/dev/null
  "$kubectl" --kubeconfig "$kubeconfig" create -f "$work/objects/namespaces.json" >/dev/null

  # 1. The objects.
  start=$(now)
  creators=()
  for chunk in "$work"/objects/chunk-*.json; do
    "$kubectl" --kubeconfig "$kubeconfig" create -f "$chunk" >/dev/null &
    creators+=($!)
  done
  for pid in "${creators[@]}"; do wait "$pid"; done
  create_s=$(elapsed "$start" "$(now)")

  # 2. The CLI over them: text, then JSON (the expected summaries).
  /usr/bin/time -f '%e %U %S %M' -o "$work/time-text" \
    "$ncclguard" audit --kubeconfig "$kubeconfig" -A >"$work/audit.txt" 2>"$work/audit-text.err" || true
  /usr/bin/time -f '%e %U %S %M' -o "$work/time-json" \
    "$ncclguard" audit --kubeconfig "$kubeconfig" -A -o json >"$work/expected.json" \
    2>"$work/audit-json.err" || true
  summaries "$work/expected.json" >"$work/expected"
  # GNU time's last line (a first one says "Command exited with non-zero status 1": a fail).
  read -r text_s text_user text_sys text_kb < <(tail -n 1 "$work/time-text")
  read -r json_s json_user json_sys json_kb < <(tail -n 1 "$work/time-json")
  cli_json=$(printf '{"summary":"%s","text_s":%s,"text_cpu_s":%.2f,"text_peak_kb":%s,"json_s":%s,"json_cpu_s":%.2f,"json_peak_kb":%s,"json_bytes":%s}' \
    "$(tail -n 1 "$work/audit.txt")" "$text_s" "$(echo "$text_user + $text_sys" | bc)" "$text_kb" \
    "$json_s" "$(echo "$json_user + $json_sys" | bc)" "$json_kb" "$(stat -c %s "$work/expected.json")")

  controller_json=null change_json=null
  if ((controller_audits)); then
    # 3. The controller's background audit, from its start.
    port=$(free_port)
    start=$(now)
    "$ncclguard" controller --kubeconfig "$kubeconfig" --leader-elect=false --health-listen 0 \
      --metrics-listen "127.0.0.1:$port" --log-level warn 2>"$work/controller.log" &
    controller_pid=$!
    complete_s=timeout
    while (($(echo "$(now) - $start < 600" | bc))); do
      if [[ $(server_summaries 2>/dev/null) == "$(cat "$work/expected")" ]]; then
        complete_s=$(elapsed "$start" "$(now)")
        break
      fi
      sleep 0.5
    done
    cpu_then=$(cpu_s "$controller_pid") peak_then=$(peak_kb "$controller_pid") writes_then=$(writes)
    sleep 5  # what stays once the first pass is over
    controller_json=$(printf '{"complete_s":"%s","cpu_s":%s,"peak_kb":%s,"rss_kb":%s,"writes":%s}' \
      "$complete_s" "$cpu_then" "$peak_then" "$(rss_kb "$controller_pid")" "$writes_then")

    # 4. CHANGED jobs of audit-0 changed; the namespace's reports must follow.
    before=$(writes)
    mapfile -t names < <("$kubectl" --kubeconfig "$kubeconfig" get pytorchjobs -n audit-0 \
      -o name | head -n "$changed")
    start=$(now)
    for name in "${names[@]}"; do
      "$kubectl" --kubeconfig "$kubeconfig" patch -n audit-0 "$name" --type merge \
        --patch-file "$work/objects/change.json" >/dev/null
    done
    "$ncclguard" audit --kubeconfig "$kubeconfig" -A -o json >"$work/expected.json" 2>/dev/null || true
    summaries "$work/expected.json" >"$work/expected"
    follow_s=timeout
    while (($(echo "$(now) - $start < 300" | bc))); do
      if [[ $(server_summaries 2>/dev/null) == "$(cat "$work/expected")" ]]; then
        follow_s=$(elapsed "$start" "$(now)")
        break
      fi
      sleep 0.5
    done
    sleep 5  # writes still coming after the reports agree would be counted too
    change_json=$(printf '{"changed":%d,"follow_s":"%s","writes":%d}' \
      "${#names[@]}" "$follow_s" "$(($(writes) - before))")
    kill "$controller_pid"
    wait "$controller_pid" 2>/dev/null || true
    controller_pid=""
  fi

  echo "{\"run\":$run,\"pods\":$pods,\"jobs\":$jobs,\"namespaces\":$namespaces,\"create_s\":$create_s,\"cli\":$cli_json,\"controller\":$controller_json,\"change\":$change_json}" |
    tee -a "$work/results"
  "$root/scripts/controlplane.sh" stop >/dev/null 2>&1
done

python3 - "$work/results" "$runs" "$controller_audits" <<'PY'
import json, os, statistics, sys
rows = [json.loads(line) for line in open(sys.argv[1])]
runs, controller_audits = sys.argv[2], sys.argv[3] == "1"
med = lambda values: statistics.median(values)
r0 = rows[0]
objects = r0["pods"] + r0["jobs"]
print(f"audit benchmark: median of {runs} runs, {r0['pods']} pods + {r0['jobs']} PyTorchJobs in "
      f"{r0['namespaces']} namespaces, nproc={os.cpu_count()}")
create = med([r["create_s"] for r in rows])
print(f"  {objects} objects created (parallel kubectl create): {create:.1f} s, {objects / create:.0f} objects/s")
for mode in ("text", "json"):
    print(f"  ncclguard audit -A{' -o json' if mode == 'json' else ''}: "
          f"{med([r['cli'][mode + '_s'] for r in rows]):.2f} s, "
          f"{med([r['cli'][mode + '_cpu_s'] for r in rows]):.2f} CPU s, "
          f"peak RSS {med([r['cli'][mode + '_peak_kb'] for r in rows]) / 1024:.1f} MB")
print(f"  -o json output: {med([r['cli']['json_bytes'] for r in rows]) / 1e6:.1f} MB; "
      f"results: {r0['cli']['summary']}")
if not controller_audits:
    print("  controller: skipped (this ncclguard controller has no --policy-reports)")
    sys.exit(0)
done = [r for r in rows if r["controller"]["complete_s"] != "timeout"]
if not done:
    print("  controller: the reports never matched the CLI's within 600 s")
    sys.exit(1)
c = lambda key: med([r["controller"][key] for r in done])
print(f"  controller start -> reports complete: {med([float(r['controller']['complete_s']) for r in done]):.2f} s, "
      f"{c('cpu_s'):.2f} CPU s, peak RSS {c('peak_kb') / 1024:.1f} MB, {c('writes'):.0f} report writes; "
      f"RSS 5 s later {c('rss_kb') / 1024:.1f} MB")
followed = [r for r in done if r["change"]["follow_s"] != "timeout"]
if followed:
    print(f"  {r0['change']['changed']} jobs changed in one namespace -> its reports follow: "
          f"{med([float(r['change']['follow_s']) for r in followed]):.2f} s, "
          f"{med([r['change']['writes'] for r in followed]):.0f} report writes")
PY
