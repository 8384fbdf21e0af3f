#!/usr/bin/env bash
# ctest node_audit_tests (label node): audit before enforcing, on the real node (scripts/node.sh)
# with ncclguard installed by helm in audit mode and the real Kubeflow training operator:
#
#   1. audit: a broken PyTorchJob (no EFA devices, no IPC_LOCK, no NCCL env, a 64 MB /dev/shm)
#      is admitted with warnings that say what ncclguard would have fixed, is not held although
#      no node is validated (its NcclPreflight condition says it would have been), and the
#      training operator runs its pods unchanged
#   2. its PolicyReport (wgpolicyk8s.io/v1alpha2, the CRD from its published module) lists what
#      would have been fixed: the job's fixes as warnings, its pods' as failures, with the guide
#      links; `kubectl get policyreport` counts them; `ncclguard audit` through the kubeconfig
#      prints the same findings
#   3. enforce: the NcclPolicy switched to mode enforce (no restart); the next PyTorchJob is held
#      by the gate until the node validates, then its pods come back fixed, and the report
#      fails them no more
#
# Exit 77 (ctest: skipped) with the reason where the host cannot run a node.
# Environment: NCCLGUARD_BUILD_DIR (the ncclguard binary for the image), NCCLGUARD_NODE_TEST_KEEP
# (a dir to copy the node's logs to).
# shellcheck disable=SC2154 # work, bin, image, failures and begin are set by lib.sh
set -Eeuo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
# shellcheck disable=SC2034 # lib.sh reads it
build="${NCCLGUARD_BUILD_DIR:-$root/build}"
# shellcheck source=lib.sh
source "$root/tests/node/lib.sh"
require_node_host training-operator.v1
start_work audit-test

trap 'stop_node $?' EXIT
trap 'echo "FAIL: audit_tests stopped at line $LINENO: $BASH_COMMAND"' ERR

if ! NCCLGUARD_NODE_INSTANCE_TYPE=ml.p5.48xlarge "$root/scripts/node.sh" start >"$work/node.env" 2>"$work/node-start.log"; then
  cat "$work/node-start.log"; echo "FAIL: scripts/node.sh start"; exit 1
fi
eval "$(cat "$work/node.env")"
# shellcheck disable=SC1091
source "$NCCLGUARD_NODE_DIR/node.env"
pass "node $NODE_NAME Ready"
k() { kubectl --request-timeout=30s "$@"; }

build_image
"$root/scripts/training-operator.sh" install >"$work/operator.log" 2>&1 ||
  { cat "$work/operator.log"; echo "FAIL: scripts/training-operator.sh install"; exit 1; }
pass "training operator $TRAINING_OPERATOR_VERSION installed"
k patch node "$NODE_NAME" --subresource=status --type=merge \
  -p '{"status":{"capacity":{"nvidia.com/gpu":"8","vpc.amazonaws.com/efa":"32"}}}' >/dev/null

# The PolicyReport CRD as the policy working group's API is published (in Kyverno's module: the
# group's own module is not served by the Go module proxy); the chart does not install it.
report_crd="$("$root/scripts/controlplane.sh" source-dir "github.com/kyverno/kyverno@$KYVERNO_VERSION")/config/crds/policyreport/wgpolicyk8s.io_policyreports.yaml"
k apply --server-side -f "$report_crd" >/dev/null
k wait --for condition=Established crd/policyreports.wgpolicyk8s.io --timeout=60s >/dev/null
pass "PolicyReport CRD from github.com/kyverno/kyverno@$KYVERNO_VERSION established"

# No probe: no node is validated, so in enforce mode the gate would hold every GPU job.
ns=ncclguard-system
# The test nodes share this machine's PID namespace: /proc/1 is its init, not the node's, so the
# probe's host path (which would enter /proc/1/ns/net) is off in every node test.
if ! helm install ncclguard "$root/charts/ncclguard" -n "$ns" --create-namespace --set probe.enabled=false --set probe.peer.hostPath=false \
  --set mode=audit --wait --timeout 180s >"$work/helm.log" 2>&1; then
  cat "$work/helm.log"; echo "FAIL: helm install --set mode=audit"; exit 1
fi
policy_mode() { k get ncclpolicy default -o jsonpath='{.spec.mode}'; }
pass "helm install ncclguard --set mode=audit (NcclPolicy default spec.mode=$(policy_mode), probe off)"
k create namespace team >/dev/null
k label namespace team ncclguard.io/enabled=true >/dev/null

# A PyTorchJob with everything ncclguard fixes left out.
job_yaml() { # NAME
  cat <<YAML
apiVersion: kubeflow.org/v1
kind: PyTorchJob
metadata:
  name: $1
  namespace: team
spec:
  pytorchReplicaSpecs:
    Master:
      replicas: 1
      restartPolicy: OnFailure
      template:
        spec:
          nodeSelector: {node.kubernetes.io/instance-type: ml.p5.48xlarge}
          terminationGracePeriodSeconds: 1
          containers:
            - name: pytorch
              image: $image
              imagePullPolicy: Never
              command: [sleep, infinity]
              resources:
                limits: {nvidia.com/gpu: 4, memory: 256Mi, cpu: 100m}
    Worker:
      replicas: 1
      restartPolicy: OnFailure
      template:
        spec:
          nodeSelector: {node.kubernetes.io/instance-type: ml.p5.48xlarge}
          terminationGracePeriodSeconds: 1
          containers:
            - name: pytorch
              image: $image
              imagePullPolicy: Never
              command: [sleep, infinity]
              resources:
                limits: {nvidia.com/gpu: 4, memory: 256Mi, cpu: 100m}
YAML
}
pods_of() { # JOB: its pods' names
  k -n team get pods -l "training.kubeflow.org/job-name=$1" -o jsonpath='{range .items[*]}{.metadata.name}{"\n"}{end}'
}
preflight() { # JOB: status and reason of its NcclPreflight condition
  k -n team get pytorchjob "$1" -o jsonpath='{range .status.conditions[?(@.type=="NcclPreflight")]}{.status} {.reason}{end}'
}
running() { # POD
  [[ "$(k -n team get pod "$1" -o jsonpath='{.status.phase}' 2>/dev/null)" == Running ]]
}

# ---------------------------------------------------------------- 1. audit: admitted, warned, not held
# The first admission may reach a replica before the CA bundle it serves with is published (the
# audit webhooks fail open: retry until a warning shows that one answered).
audited_create() {
  job_yaml audited | k apply -f - >"$work/audited.out" 2>"$work/audited.warnings" &&
    grep 'ncclguard audit' "$work/audited.warnings" >/dev/null ||
    { k -n team delete pytorchjob audited --wait >/dev/null 2>&1; false; }
}
if eventually 60 audited_create; then
  pass "audit: PyTorchJob audited admitted with warnings: $(grep -c 'ncclguard audit' "$work/audited.warnings"), e.g. $(grep -m1 'efa-resources-missing' "$work/audited.warnings" || head -1 "$work/audited.warnings")"
else
  fail "audit: PyTorchJob audited: $(cat "$work/audited.out" "$work/audited.warnings" 2>&1)"
fi
gate_mark="$(k -n team get pytorchjob audited -o jsonpath='{.metadata.annotations.ncclguard\.io/gate}/{.spec.runPolicy.suspend}')"
would_hold() { [[ "$(preflight audited)" == "False WouldHold" ]]; }
if [[ "$gate_mark" == "/" ]] && eventually 60 would_hold; then
  pass "audit: not held (no gate mark, not suspended); NcclPreflight $(preflight audited): $(k -n team get pytorchjob audited -o jsonpath='{.status.conditions[?(@.type=="NcclPreflight")].message}')"
else
  fail "audit: gate mark/suspend '$gate_mark', NcclPreflight '$(preflight audited)'"
fi
if eventually 120 running audited-master-0 && eventually 120 running audited-worker-0; then
  pass "audit: the training operator made $(pods_of audited | tr '\n' ' ')and both run"
else
  fail "audit: pods $(k -n team get pods -o wide 2>&1)"
fi
# Unchanged: what enforce mode would have added is not there.
k -n team get pod audited-worker-0 -o json >"$work/audited-worker.json"
unchanged="$(python3 - "$work/audited-worker.json" <<'PY'
import json, sys
pod = json.load(open(sys.argv[1]))
c = pod["spec"]["containers"][0]
added = []
if "vpc.amazonaws.com/efa" in c["resources"].get("limits", {}): added.append("EFA devices")
if "IPC_LOCK" in (c.get("securityContext") or {}).get("capabilities", {}).get("add", []): added.append("IPC_LOCK")
if any(e["name"].startswith(("NCCL_", "FI_")) for e in c.get("env", [])): added.append("NCCL/libfabric env")
if any(v.get("emptyDir", {}).get("medium") == "Memory" for v in pod["spec"].get("volumes", [])): added.append("/dev/shm")
print("changed: " + ", ".join(added) if added else "unchanged")
PY
)"
[[ "$unchanged" == unchanged ]] && pass "audit: pod audited-worker-0 runs as submitted (no EFA devices, IPC_LOCK, NCCL env or /dev/shm added)" ||
  fail "audit: pod audited-worker-0 $unchanged"

# ---------------------------------------------------------------- 2. the PolicyReport, and `ncclguard audit`
# "<kind>/<name> <rule> <result>" lines of a list of PolicyReports (or one), sorted.
cat >"$work/results_of.py" <<'PY'
import json, sys
doc = json.load(sys.stdin)
reports = [doc] if doc.get("kind") == "PolicyReport" else doc.get("items", [])
for report in reports:
    for r in report.get("results", []):
        res = r["resources"][0]
        print("%s/%s %s %s" % (res["kind"], res["name"], r.get("rule", "-"), r["result"]))
PY
results_of() { python3 "$work/results_of.py" | sort; }
report_results() { k -n team get policyreports -o json | results_of; }
reported() {
  report_results >"$work/report.txt" &&
    grep -q '^PyTorchJob/audited efa-resources-missing warn$' "$work/report.txt" &&
    grep -q '^Pod/audited-worker-0 efa-resources-missing fail$' "$work/report.txt" &&
    grep -q '^Pod/audited-master-0 ipc-lock-missing fail$' "$work/report.txt"
}
if eventually 90 reported; then
  pass "PolicyReport team/ncclguard: $(wc -l <"$work/report.txt") results; $(grep -c ' fail$' "$work/report.txt") fail (the pods), $(grep -c ' warn$' "$work/report.txt") warn (the job's fixes)"
else
  fail "PolicyReport in team: $(cat "$work/report.txt" 2>&1); $(k -n team get policyreports -o yaml 2>&1 | head -40)"
fi
k -n team get policyreports >"$work/polr.txt"
summary="$(k -n team get policyreport ncclguard -o jsonpath='{.summary.pass} {.summary.fail} {.summary.warn}')"
read -r n_pass n_fail n_warn <<<"$summary"
if ((n_fail > 0 && n_warn > 0)) && grep -E "^ncclguard .* $n_pass +$n_fail +$n_warn " "$work/polr.txt" >/dev/null; then
  pass "kubectl get policyreport -n team shows the counts: $(tr -s ' \n' ' ' <"$work/polr.txt")"
else
  fail "kubectl get policyreport -n team (summary $summary): $(cat "$work/polr.txt")"
fi
guide="$(k -n team get policyreport ncclguard -o jsonpath='{.results[?(@.rule=="efa-resources-missing")].properties.guide}' | awk '{print $1}')"
[[ "$guide" == http*'#'* ]] && pass "report results link the guide: $guide" || fail "report guide link '$guide'"
"$build/cli/ncclguard" audit --kubeconfig "$KUBECONFIG" -n team -o json >"$work/cli.json" 2>"$work/cli.err" && cli_rc=0 || cli_rc=$?
results_of <"$work/cli.json" >"$work/cli.txt" 2>&1 || true
report_results >"$work/report.txt"
if ((cli_rc == 1)) && diff "$work/report.txt" "$work/cli.txt" >"$work/cli.diff"; then
  pass "ncclguard audit -n team -o json (exit 1: failures) prints the report's $(wc -l <"$work/cli.txt") findings"
else
  fail "ncclguard audit: exit $cli_rc, $(head -3 "$work/cli.err"); differs from the report: $(head -20 "$work/cli.diff")"
fi

# ---------------------------------------------------------------- 3. enforce: fixed and gated
k -n team delete pytorchjob audited --wait --timeout=60s >/dev/null
gone() { [[ -z "$(pods_of audited)" ]]; }
eventually 60 gone || fail "audit: pods of audited still there: $(pods_of audited)"
k patch ncclpolicy default --type=merge -p '{"spec":{"mode":"enforce"}}' >/dev/null
# The webhook reloads the policy without a restart: the next job is marked for the gate.
enforced_create() {
  k -n team delete pytorchjob enforced --ignore-not-found --wait >/dev/null 2>&1
  job_yaml enforced | k apply -f - >/dev/null 2>&1 &&
    [[ "$(k -n team get pytorchjob enforced -o jsonpath='{.metadata.annotations.ncclguard\.io/gate}')" == pending ]]
}
held() { [[ "$(preflight enforced)" == "False InsufficientValidatedNodes" ]]; }
if eventually 60 enforced_create && eventually 60 held && [[ -z "$(pods_of enforced)" ]]; then
  pass "enforce (NcclPolicy spec.mode=$(policy_mode), no restart): PyTorchJob enforced marked and held, no pods ($(k -n team get pytorchjob enforced -o jsonpath='{.status.conditions[?(@.type=="NcclPreflight")].message}'))"
else
  fail "enforce: PyTorchJob enforced: NcclPreflight '$(preflight enforced)', gate '$(k -n team get pytorchjob enforced -o jsonpath='{.metadata.annotations}' 2>&1)', pods $(pods_of enforced)"
fi
# The probe validates the node (checks this host passes): the gate lets the job go.
helm upgrade ncclguard "$root/charts/ncclguard" -n "$ns" --reuse-values --set probe.enabled=true \
  --set 'probe.checks={memlock-limit,dev-shm-stale,removeipc}' --wait --timeout 180s >"$work/upgrade.log" 2>&1 ||
  { cat "$work/upgrade.log"; echo "FAIL: helm upgrade probe.enabled=true"; exit 1; }
released() { [[ "$(preflight enforced)" == "True ValidatedNodesAvailable" ]]; }
if eventually 120 released && eventually 120 running enforced-worker-0; then
  pass "enforce: released once the node validated; the operator made $(pods_of enforced | tr '\n' ' ')"
else
  fail "enforce: NcclPreflight '$(preflight enforced)', pods $(k -n team get pods -o wide 2>&1)"
fi
efa="$(k -n team get pod enforced-worker-0 -o jsonpath='{.spec.containers[0].resources.limits.vpc\.amazonaws\.com/efa} {.spec.containers[0].securityContext.capabilities.add}')"
[[ "$efa" == 16\ *IPC_LOCK* ]] && pass "enforce: pod enforced-worker-0 fixed (EFA devices and capabilities: $efa)" ||
  fail "enforce: pod enforced-worker-0 not fixed: '$efa'"
# The fixed pods fail nothing (the training operator's bare MASTER_ADDR is still a warning:
# master-addr-unqualified); the deleted job's results are gone.
pods_fixed() {
  report_results >"$work/report.txt" &&
    grep -q '^Pod/enforced-worker-0 ' "$work/report.txt" &&
    ! grep -q '^Pod/enforced-.* fail$' "$work/report.txt" &&
    ! grep -q '^Pod/audited\|^PyTorchJob/audited ' "$work/report.txt"
}
if eventually 90 pods_fixed; then
  pass "PolicyReport: the fixed pods fail nothing ($(grep '^Pod/' "$work/report.txt" | tr '\n' ';')), the deleted job's results are gone"
else
  fail "PolicyReport after enforce: $(tr '\n' ';' <"$work/report.txt")"
fi

((failures == 0)) || exit 1
echo "audit_tests: all passed ($((SECONDS - begin))s)"
