#!/usr/bin/env bash
# Checks the Helm chart (run by ctest as chart_check; see README "Install on a cluster"):
#  1. helm lint and helm template with the default values and each charts/ncclguard/ci/*.yaml;
#  2. on a real kube-apiserver + etcd (scripts/controlplane.sh, an instance of its own, stopped
#     on exit): the CRDs and manifests/ncclguard.yaml applied and accepted (CRDs Established,
#     RBAC, webhook configurations, Services, Deployment, DaemonSet, PDB, NcclPolicy), the
#     non-default renders accepted by a server-side dry run (the ServiceMonitor and PodMonitor
#     against the Prometheus operator's CRDs), the webhook configurations'
#     namespace selection shown by pod creations, the controller's pod template admitted under
#     Pod Security "restricted", and `kubectl auth can-i` for every verb the README's RBAC
#     tables list and some that must be denied;
#  3. this build's ncclguard (NCCLGUARD_BIN, default build/cli/ncclguard) with tokens of the
#     chart's service accounts: `probe --publish` on a fixture host root writes its node's
#     objects (and is refused without the probe's role); `controller` (without its webhook)
#     holds a gated PyTorchJob, then releases it once two nodes pass, without a single 403;
#     then with --webhook-cert-secret (self-managed certificates): the Secret and both caBundles
#     appear and kube-apiserver gets a fixed pod from it;
#  4. `kubectl delete` of the manifests, then `helm install` and `helm uninstall`.
# No kubelet, scheduler or controller-manager runs: the Deployment and DaemonSet are stored and
# validated, their pods never run. Exit 0 when every check passes.
# shellcheck source-path=SCRIPTDIR
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
# shellcheck source=controlplane/versions.sh
source "$root/scripts/controlplane/versions.sh"
# shellcheck source=lib/chart-locally.sh
source "$root/scripts/lib/chart-locally.sh"
bin_dir=${NCCLGUARD_CONTROLPLANE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/ncclguard/controlplane/$KUBERNETES_VERSION}/bin
chart=$root/charts/ncclguard
ncclguard=${NCCLGUARD_BIN:-${NCCLGUARD_BUILD_DIR:-$root/build}/cli/ncclguard}
release=ncclguard
ns="ncclguard-system"

failures=0
step() { printf '\n== %s\n' "$*"; }
pass() { printf 'ok    %s\n' "$*"; }
fail() { printf 'FAIL  %s\n' "$*"; failures=$((failures + 1)); }

for b in helm kubectl; do
  [[ -x $bin_dir/$b ]] || { echo "check-chart: $bin_dir/$b missing: run scripts/controlplane.sh build" >&2; exit 2; }
done
export PATH=$bin_dir:$PATH
work=$(mktemp -d)
export NCCLGUARD_CONTROLPLANE_DIR=$work/controlplane
started=0
cleanup() {
  ((started)) && "$root/scripts/controlplane.sh" stop >/dev/null 2>&1 || true
  rm -rf "$work"
}
trap cleanup EXIT

step "helm lint and helm template"
values_files=("")
for f in "$chart"/ci/*.yaml; do values_files+=("$f"); done
for values in "${values_files[@]}"; do
  label=${values:+${values#"$root"/}}
  label=${label:-default values}
  args=()
  [[ -z $values ]] || args=(-f "$values")
  if helm lint --strict "$chart" "${args[@]}" >"$work/lint.log" 2>&1; then
    pass "helm lint --strict ($label)"
  else
    fail "helm lint --strict ($label)"; cat "$work/lint.log"
  fi
  name=$(basename "${values:-default}" .yaml)
  if helm template "$release" "$chart" --namespace "$ns" "${args[@]}" >"$work/render-$name.yaml" 2>"$work/template.log"; then
    pass "helm template ($label): $(grep -c '^kind:' "$work/render-$name.yaml") objects"
  else
    fail "helm template ($label)"; cat "$work/template.log"
  fi
done
# What the non-default values must change in the render.
expect_in() { # expect_in <render> <description> <fixed string>
  if grep -qF -- "$3" "$work/render-$1.yaml"; then pass "$1: $2"; else fail "$1: $2 ($3 not found)"; fi
}
expect_not_in() {
  if grep -qF -- "$3" "$work/render-$1.yaml"; then fail "$1: $2 ($3 found)"; else pass "$1: $2"; fi
}
expect_in default "self-managed certificates" "--webhook-cert-secret=ncclguard-webhook-tls"
expect_not_in default "no caBundle in the chart (the controller fills it)" "caBundle:"
expect_in cert-manager-values "cert-manager Certificate" "kind: Certificate"
expect_in cert-manager-values "caBundle injected by cert-manager" "cert-manager.io/inject-ca-from: ncclguard-system/ncclguard-webhook-tls"
expect_in cert-manager-values "serving files from the mounted Secret" "--tls-cert-file=/var/run/ncclguard/certs/tls.crt"
expect_in cert-manager-values "failurePolicy Ignore" "failurePolicy: Ignore"
expect_not_in cert-manager-values "no probe DaemonSet" "kind: DaemonSet"
expect_not_in cert-manager-values "no Secret RBAC without self-managed certificates" "resources: [secrets]"
expect_not_in controller-only-values "no webhook configurations" "WebhookConfiguration"
expect_in controller-only-values "plain-HTTP health port" "--health-listen=:8081"
expect_not_in controller-only-values "unprivileged probe" "privileged: true"
expect_in kueue-values "the AdmissionCheck" "controllerName: ncclguard.io/preflight"
expect_in kueue-values "the controller answers it" "--kueue-admission-check"
expect_in kueue-values "RBAC on Kueue's Workload status" "resources: [workloads/status, admissionchecks/status]"
expect_not_in default "no Kueue AdmissionCheck by default" "kueue.x-k8s.io"
expect_in default "the background audit's PolicyReports" "--policy-reports=true"
# Metrics (metrics.*): both processes serve /metrics on a named port; by default Prometheus finds
# them by the prometheus.io annotations, with serviceMonitor.enabled by a ServiceMonitor (the
# controller's metrics Service) and a PodMonitor (the probe pods) instead.
expect_in default "the controller serves /metrics" "- --metrics-listen=:8080"
expect_in default "the probe serves /metrics" "- --metrics-listen=:9402"
expect_in default "a metrics port on both pods" "- name: metrics"
expect_in default "the controller's metrics Service" "name: ncclguard-controller-metrics"
expect_in default "scrape annotations" 'prometheus.io/scrape: "true"'
expect_in default "the probe's scrape port" 'prometheus.io/port: "9402"'
expect_in default "the controller's scrape port" 'prometheus.io/port: "8080"'
expect_not_in default "no ServiceMonitor without the Prometheus operator" "kind: ServiceMonitor"
expect_in monitoring-values "ServiceMonitor" "kind: ServiceMonitor"
expect_in monitoring-values "PodMonitor for the probe pods" "kind: PodMonitor"
expect_in monitoring-values "monitors labelled for Prometheus' selectors" "release: kube-prometheus-stack"
expect_in monitoring-values "the scrape interval" "interval: 15s"
expect_not_in monitoring-values "no scrape annotations beside the monitors" "prometheus.io/scrape"
expect_in monitoring-values "podAnnotations kept" "example.com/team: ml-platform"
expect_in monitoring-values "NetworkPolicy: the metrics port from the monitoring namespace" "kubernetes.io/metadata.name: monitoring"
helm template "$release" "$chart" --namespace "$ns" --set metrics.enabled=false >"$work/render-metrics-off.yaml"
expect_not_in metrics-off "metrics.enabled=false: no --metrics-listen" "--metrics-listen"
expect_not_in metrics-off "metrics.enabled=false: no metrics Service" "ncclguard-controller-metrics"
expect_not_in metrics-off "metrics.enabled=false: no scrape annotations" "prometheus.io/"
helm template "$release" "$chart" --namespace "$ns" --set-string 'probe.podAnnotations.prometheus\.io/scrape=false' >"$work/render-opt-out.yaml"
expect_in opt-out "podAnnotations win over the scrape annotations" 'prometheus.io/scrape: "false"'
# The alerts and the dashboard: off by default; ci/monitoring-values.yaml has both (the
# PrometheusRule is dry-run against the Prometheus operator's CRD below; tests/metrics checks
# the rules themselves and the dashboard's queries).
expect_not_in default "no PrometheusRule by default" "kind: PrometheusRule"
expect_not_in default "no dashboard ConfigMap by default" "grafana_dashboard"
expect_in monitoring-values "the PrometheusRule" "kind: PrometheusRule"
expect_in monitoring-values "an alert and its runbook" "runbook_url: https://github.com/ncclguard/ncclguard/blob/main/docs/operator.md#ncclguardcontrollerdown"
expect_in monitoring-values "the dashboard ConfigMap for Grafana's sidecar" 'grafana_dashboard: "1"'
expect_in monitoring-values "the dashboard's JSON in it" '"uid": "ncclguard"'
# Audit mode (docs/operator.md "Audit mode"): namespaces route by their ncclguard.io/mode label;
# `mode: audit` sets the NcclPolicy's spec.mode and makes every entry Ignore.
expect_in default "the policy's mode: namespaces without a mode label" "values: [audit, enforce]"
expect_in default "the enforce namespaces' validating path" "path: /validate/enforce"
expect_in default "the audit namespaces' validating path" "path: /validate/audit"
expect_not_in default "no mutating path for audit namespaces" "path: /mutate/audit"
expect_in default "the NcclPolicy enforces by default" "mode: enforce"
helm template "$release" "$chart" --namespace "$ns" --set mode=audit >"$work/render-audit.yaml"
expect_in audit "mode=audit: the NcclPolicy audits" "mode: audit"
expect_not_in audit "mode=audit: no entry fails closed" "failurePolicy: Fail"
if helm template "$release" "$chart" --set webhook.failurePolicy=Sometimes >/dev/null 2>"$work/schema.log" &&
  helm template "$release" "$chart" --set controler.replicas=2 >/dev/null 2>>"$work/schema.log" &&
  helm template "$release" "$chart" --set mode=Audit >/dev/null 2>>"$work/schema.log"; then
  fail "values.schema.json accepted a bad failurePolicy, an unknown key or a bad mode"
else
  pass "values.schema.json rejects a bad failurePolicy, an unknown key and a bad mode"
fi
if "$root/scripts/render-manifests.sh" --check >/dev/null 2>"$work/render.log"; then
  pass "manifests/ matches the chart"
else
  fail "manifests/ is stale"; cat "$work/render.log"
fi

step "starting a control plane of its own"
# The watchdog stops it even if this script is killed (a ctest timeout) before its trap runs.
eval "$(NCCLGUARD_CONTROLPLANE_OWNER_PID=$$ "$root/scripts/controlplane.sh" start)"
started=1
k() { kubectl --request-timeout=20s "$@"; }

step "RBAC: the chart grants the controller what it declares, and nothing more"
# Each render's controller Deployment args and ServiceAccount, given to `ncclguard controller
# --print-rbac` (what the enabled controllers read and write: manager/controller_module.h),
# compared with the ClusterRole and Role of that ServiceAccount (scripts/lib/compare-rbac.py).
for values in "${values_files[@]}"; do
  name=$(basename "${values:-default}" .yaml)
  args=()
  [[ -z $values ]] || args=(-f "$values")
  helm template "$release" "$chart" --namespace "$ns" "${args[@]}" \
    --show-only templates/controller-deployment.yaml --show-only templates/controller-rbac.yaml >"$work/rbac-$name.yaml"
  k create --dry-run=client -o json -f "$work/rbac-$name.yaml" >"$work/rbac-$name.json"
  mapfile -t flags < <(python3 "$root/scripts/lib/compare-rbac.py" --args "$work/rbac-$name.json")
  if POD_NAMESPACE=$ns POD_SERVICE_ACCOUNT=${flags[0]} "$ncclguard" "${flags[@]:1}" --print-rbac >"$work/declared-$name.json" 2>"$work/declared-$name.log" &&
    python3 "$root/scripts/lib/compare-rbac.py" "$work/rbac-$name.json" "$work/declared-$name.json" >"$work/compare-$name.log"; then
    pass "$name: $(tail -1 "$work/compare-$name.log")"
  else
    fail "$name: the chart's RBAC differs from what the controller declares"; cat "$work/declared-$name.log" "$work/compare-$name.log"
  fi
done

step "CRDs and manifests/ncclguard.yaml applied"
if k apply --server-side -f "$root/manifests/crds.yaml" >/dev/null &&
  k wait --for=condition=Established --timeout=30s crd/nodevalidations.ncclguard.io crd/ncclpolicies.ncclguard.io >/dev/null; then
  pass "CRDs applied and Established"
else
  fail "CRDs not Established"
fi
if k apply --server-side -f "$root/manifests/ncclguard.yaml" >"$work/apply.log" 2>&1; then
  pass "manifests/ncclguard.yaml applied: $(wc -l <"$work/apply.log") objects"
else
  fail "kubectl apply manifests/ncclguard.yaml"; cat "$work/apply.log"
fi
# Every object is stored as rendered (none dropped, none renamed).
if k get -f "$root/manifests/ncclguard.yaml" -o name >"$work/stored.txt" 2>&1; then
  pass "all $(wc -l <"$work/stored.txt") objects are stored"
else
  fail "kubectl get -f manifests/ncclguard.yaml"; cat "$work/stored.txt"
fi
for obj in deployment/ncclguard-controller daemonset/ncclguard-probe service/ncclguard-webhook \
  service/ncclguard-controller-metrics poddisruptionbudget/ncclguard-controller serviceaccount/ncclguard-controller serviceaccount/ncclguard-probe; do
  if k -n "$ns" get "$obj" >/dev/null 2>&1; then pass "$obj accepted (not run: no kubelet here)"; else fail "$obj missing"; fi
done
spec=$(k get ncclpolicy default -o jsonpath='{.spec.guideBaseURL}' 2>/dev/null || true)
if [[ $spec == https://* ]]; then pass "NcclPolicy default stored (guideBaseURL $spec)"; else fail "NcclPolicy default missing"; fi

step "webhook configurations"
for kind in mutatingwebhookconfiguration validatingwebhookconfiguration; do
  got=$(k get "$kind" ncclguard -o jsonpath='{range .webhooks[*]}{.name} {.sideEffects} {.timeoutSeconds} {.failurePolicy} {.namespaceSelector.matchLabels}{"\n"}{end}')
  optin='{"ncclguard.io/enabled":"true"}'
  want="mutate.ncclguard.io None 5 Fail $optin"$'\n'"mutate-enforce.ncclguard.io None 5 Fail $optin"
  # Audit namespaces and Kubeflow Trainer's runtimes are only warned about: an outage must not
  # block them.
  [[ $kind == mutating* ]] || want="validate.ncclguard.io None 5 Fail $optin"$'\n'"validate-enforce.ncclguard.io None 5 Fail $optin"$'\n'"validate-audit.ncclguard.io None 5 Ignore $optin"$'\n'"runtimes.ncclguard.io None 5 Ignore $optin"
  if [[ $got == "$want" ]]; then
    pass "$kind/ncclguard: $got"
  else
    fail "$kind/ncclguard: got '$got'"
  fi
done
# The API server does validate these objects: the same configuration with a timeout over its
# 30 s maximum is rejected, so the acceptance above means something.
k get validatingwebhookconfiguration ncclguard -o json |
  python3 -c 'import json,sys; o=json.load(sys.stdin); o["metadata"]={"name":"ncclguard-invalid"}; o["webhooks"][0]["timeoutSeconds"]=31; print(json.dumps(o))' >"$work/invalid.json"
if k create -f "$work/invalid.json" >"$work/invalid.log" 2>&1; then
  fail "the API server accepted a webhook configuration with timeoutSeconds 31"
else
  if grep -q 'timeoutSeconds' "$work/invalid.log"; then
    pass "a configuration with timeoutSeconds 31 is rejected"
  else
    fail "rejected for another reason"; cat "$work/invalid.log"
  fi
fi

# No controller answers here (no kubelet), and failurePolicy is Fail: a pod is refused exactly
# where the webhook is called, which shows what the namespace selector intercepts.
pod_json() {
  printf '{"apiVersion":"v1","kind":"Pod","metadata":{"name":"%s"},"spec":{"containers":[{"name":"c","image":"registry.example/x:1"}]}}' "$1"
}
k create namespace team-opted-in >/dev/null && k label namespace team-opted-in ncclguard.io/enabled=true >/dev/null
k create namespace team-other >/dev/null
k label namespace kube-system ncclguard.io/enabled=true --overwrite >/dev/null
k label namespace "$ns" ncclguard.io/enabled=true --overwrite >/dev/null
# The API server loads webhook configurations asynchronously: wait until the opted-in namespace
# is intercepted.
intercepted=0
for _ in $(seq 1 50); do
  if ! pod_json probe | k -n team-opted-in create --dry-run=server -f - >"$work/optin.log" 2>&1; then
    grep -q 'failed calling webhook "mutate.ncclguard.io"' "$work/optin.log" && { intercepted=1; break; }
  fi
  sleep 0.2
done
if ((intercepted)); then
  pass "team-opted-in (labelled): pod refused: $(grep -o 'failed calling webhook "[^"]*"' "$work/optin.log")"
else
  fail "team-opted-in (labelled): pod not sent to the webhook"; cat "$work/optin.log"
fi
# A namespace's ncclguard.io/mode label picks the entry: enforce is refused by the enforce entry
# (failurePolicy Fail); audit has no mutating entry and its validating one is Ignore, so even
# with no webhook answering the pod is created.
k create namespace team-enforce >/dev/null
k label namespace team-enforce ncclguard.io/enabled=true ncclguard.io/mode=enforce >/dev/null
if ! pod_json probe | k -n team-enforce create --dry-run=server -f - >"$work/enforce.log" 2>&1 &&
  grep -q 'failed calling webhook "mutate-enforce.ncclguard.io"' "$work/enforce.log"; then
  pass "team-enforce (ncclguard.io/mode=enforce): pod refused by mutate-enforce.ncclguard.io"
else
  fail "team-enforce (ncclguard.io/mode=enforce): not refused by the enforce entry"; cat "$work/enforce.log"
fi
k create namespace team-audit >/dev/null
k label namespace team-audit ncclguard.io/enabled=true ncclguard.io/mode=audit >/dev/null
for target in team-other kube-system "$ns" team-audit; do
  if pod_json "pod-$target" | k -n "$target" create -f - >"$work/pod.log" 2>&1; then
    case $target in
      team-other) pass "$target: pod created without calling the webhook" ;;
      team-audit) pass "$target (ncclguard.io/mode=audit): pod created, the unanswered audit entry ignored" ;;
      *) pass "$target: pod created without calling the webhook (labelled, still excluded)" ;;
    esac
  else
    fail "$target: pod creation failed"; cat "$work/pod.log"
  fi
done

step "the controller pod meets Pod Security \"restricted\""
k create namespace psa-restricted >/dev/null
k label namespace psa-restricted pod-security.kubernetes.io/enforce=restricted >/dev/null
k -n "$ns" get deployment ncclguard-controller -o json |
  python3 -c 'import json,sys; t=json.load(sys.stdin)["spec"]["template"]; print(json.dumps({"apiVersion":"v1","kind":"Pod","metadata":{"name":"controller","labels":t["metadata"]["labels"]},"spec":t["spec"]}))' >"$work/controller-pod.json"
if k -n psa-restricted create --dry-run=server -f "$work/controller-pod.json" >"$work/psa.log" 2>&1; then
  pass "controller pod template admitted under enforce=restricted"
else
  fail "controller pod template violates restricted"; cat "$work/psa.log"
fi

step "non-default values: server-side dry run"
k create namespace ncclguard-alt >/dev/null
# ci/kueue-values.yaml renders a Kueue AdmissionCheck: Kueue's CRDs from the Go module cache.
kueue_crds=$("$root/scripts/controlplane.sh" source-dir "sigs.k8s.io/kueue@$KUEUE_VERSION")/config/components/crd/bases
for crd in "$kueue_crds"/kueue.x-k8s.io_*.yaml; do k apply --server-side -f "$crd" >/dev/null; done
# ci/monitoring-values.yaml renders a ServiceMonitor and a PodMonitor: the Prometheus operator's
# CRDs (monitoring.coreos.com/v1) from its repository's module in the Go module cache (the
# pkg/apis/monitoring module has no CRD YAML). Kept here, not in controlplane/versions.sh: that
# file is part of the hash of every control-plane binary, and this module builds nothing.
prometheus_operator_version=v0.85.0
monitoring_crds=$("$root/scripts/controlplane.sh" source-dir "github.com/prometheus-operator/prometheus-operator@$prometheus_operator_version")/example/prometheus-operator-crd
for kind in servicemonitors podmonitors prometheusrules; do
  k apply --server-side -f "$monitoring_crds/monitoring.coreos.com_$kind.yaml" >/dev/null
done
# A CRD just created has no status yet, and kubectl wait refuses that at once: retry until it has.
for _ in $(seq 60); do k wait --for=condition=Established --timeout=30s crd --all >/dev/null 2>&1 && break; sleep 0.5; done
k wait --for condition=established --timeout=60s crd --all >/dev/null
for f in "$chart"/ci/*.yaml; do
  name=$(basename "$f" .yaml)
  helm template ncclguard-alt "$chart" --namespace ncclguard-alt -f "$f" >"$work/alt-$name.yaml"
  # cert-manager's own kinds need cert-manager's CRDs, which this control plane does not have.
  # helm template separates documents with "---" lines; no YAML parser needed.
  python3 - "$work/alt-$name.yaml" "$work/alt-$name-core.yaml" <<'PY'
import re, sys
docs = [d for d in re.split(r"^---$", open(sys.argv[1]).read(), flags=re.M) if "kind:" in d]
kept = [d for d in docs if not re.search(r"^apiVersion: cert-manager\.io/", d, flags=re.M)]
open(sys.argv[2], "w").write("---".join(kept))
print(f"{len(docs) - len(kept)} cert-manager objects left out", file=sys.stderr)
PY
  if k apply --server-side --dry-run=server -f "$work/alt-$name-core.yaml" >"$work/alt.log" 2>&1; then
    pass "ci/$name.yaml: $(wc -l <"$work/alt.log") objects accepted (dry run)"
  else
    fail "ci/$name.yaml rejected"; cat "$work/alt.log"
  fi
done
# The monitors were checked against the operator's schema: one with a scheme it does not know
# is rejected, so the acceptance above means something.
python3 - "$work/alt-monitoring-values.yaml" "$work/bad-monitor.yaml" <<'PY'
import re, sys
docs = re.split(r"^---$", open(sys.argv[1]).read(), flags=re.M)
monitor = next(d for d in docs if re.search(r"^kind: ServiceMonitor$", d, flags=re.M))
open(sys.argv[2], "w").write(monitor.replace("scheme: http", "scheme: gopher"))
PY
if k apply --server-side --dry-run=server -f "$work/bad-monitor.yaml" >"$work/bad-monitor.log" 2>&1; then
  fail "the API server accepted a ServiceMonitor with scheme gopher (no CRD schema?)"
elif grep -q 'scheme' "$work/bad-monitor.log"; then
  pass "a ServiceMonitor with scheme gopher is rejected by the Prometheus operator's CRD"
else
  fail "the bad ServiceMonitor was rejected for another reason"; cat "$work/bad-monitor.log"
fi

step "RBAC: kubectl auth can-i as the service accounts"
# can <yes|no> <sa> <verb> <resource>[/name][:subresource] [namespace]
can() {
  local want=$1 sa=$2 verb=$3 resource=$4 where=${5:-} sub=""
  if [[ $resource == *:* ]]; then sub=${resource#*:}; resource=${resource%%:*}; fi
  local args=(auth can-i "$verb" "$resource" --as "system:serviceaccount:$ns:$sa")
  if [[ -n $sub ]]; then args+=(--subresource "$sub"); fi
  if [[ -n $where ]]; then args+=(-n "$where"); fi
  local got
  got=$(k "${args[@]}" 2>"$work/can-i.log" || true)
  if grep -q "doesn't have a resource type" "$work/can-i.log"; then
    fail "$resource is not served: $(cat "$work/can-i.log")"
  elif [[ $got == "$want" ]]; then
    pass "$sa $verb $resource${sub:+ ($sub)}${where:+ -n $where}: $got"
  else
    fail "$sa $verb $resource${sub:+ ($sub)}${where:+ -n $where}: got '$got', want $want"
  fi
}
# The training operators' CRDs, so that kubectl resolves their resources: the Kubeflow training
# operator's own PyTorchJob CRD and JobSet's from the Go module cache, test copies for the kinds
# neither ships.
training_operator=$("$root/scripts/controlplane.sh" source-dir "github.com/kubeflow/training-operator@$TRAINING_OPERATOR_VERSION")
k apply --server-side -f "$training_operator/manifests/base/crds/kubeflow.org_pytorchjobs.yaml" >/dev/null
jobset=$("$root/scripts/controlplane.sh" source-dir "sigs.k8s.io/jobset@$JOBSET_VERSION")
k apply --server-side -f "$jobset/config/components/crd/bases/jobset.x-k8s.io_jobsets.yaml" >/dev/null
for f in "$root"/tests/controlplane/crds/*.yaml; do k apply --server-side -f "$f" >/dev/null; done
# The PolicyReport CRD (not the chart's: Kyverno's module publishes the working group's).
kyverno=$("$root/scripts/controlplane.sh" source-dir "github.com/kyverno/kyverno@$KYVERNO_VERSION")
k apply --server-side -f "$kyverno/config/crds/policyreport/wgpolicyk8s.io_policyreports.yaml" >/dev/null
# A CRD just created has no status yet, and kubectl wait refuses that at once: retry until it has.
for _ in $(seq 60); do k wait --for=condition=Established --timeout=30s crd --all >/dev/null 2>&1 && break; sleep 0.5; done
k wait --for=condition=Established --timeout=30s crd --all >/dev/null
c="ncclguard-controller"
for r in pytorchjobs.kubeflow.org mpijobs.kubeflow.org jobsets.jobset.x-k8s.io jobs.batch; do
  for v in get list watch patch; do can yes $c $v "$r" team-opted-in; done
  can yes $c patch "$r:status" team-opted-in
  can no $c delete "$r" team-opted-in
  can no $c create "$r" team-opted-in
  can no $c update "$r:status" team-opted-in
done
for v in list watch; do can yes $c $v pods team-opted-in; done
for v in list watch create patch; do can yes $c $v services team-opted-in; done
for r in nodes namespaces; do for v in list watch; do can yes $c $v $r; done; done
for v in list watch create patch; do can yes $c $v events.events.k8s.io team-opted-in; done
for r in nodevalidations.ncclguard.io ncclpolicies.ncclguard.io; do for v in list watch; do can yes $c $v $r; done; done
can yes $c patch ncclpolicies.ncclguard.io:status
for v in get list watch create patch delete; do can yes $c $v policyreports.wgpolicyk8s.io team-opted-in; done
can no $c update policyreports.wgpolicyk8s.io team-opted-in
can no $c update ncclpolicies.ncclguard.io:status
can yes $c get serviceaccounts/ncclguard-controller "$ns"
for v in list watch update patch delete; do can no $c $v serviceaccounts "$ns"; done
can no $c get serviceaccounts/ncclguard-probe "$ns"
can no $c get serviceaccounts/ncclguard-controller team-opted-in
can yes $c create leases.coordination.k8s.io "$ns"
for v in get update; do can yes $c $v leases.coordination.k8s.io/ncclguard-controller "$ns"; done
for v in get update; do can yes $c $v secrets/ncclguard-webhook-tls "$ns"; done
can yes $c create secrets "$ns"
for v in list watch delete; do can no $c $v secrets "$ns"; done
for r in mutatingwebhookconfigurations validatingwebhookconfigurations; do
  for v in get patch; do can yes $c $v "$r.admissionregistration.k8s.io/ncclguard"; done
  for v in list watch; do can no $c $v "$r.admissionregistration.k8s.io"; done
  can no $c patch "$r.admissionregistration.k8s.io/someone-elses"
  can no $c delete "$r.admissionregistration.k8s.io/ncclguard"
done
can no $c get secrets team-opted-in
can no $c list secrets kube-system
can no $c get secrets/another-secret "$ns"
can no $c delete pods team-opted-in
can no $c create pods team-opted-in
can no $c patch nodes
can no $c get leases.coordination.k8s.io/another-lease "$ns"
can no $c create leases.coordination.k8s.io team-opted-in
can no $c patch nodevalidations.ncclguard.io
can no $c update ncclpolicies.ncclguard.io
p="ncclguard-probe"
for v in get patch; do can yes $p $v nodes; done
can yes $p patch nodes:status
can no $p update nodes:status
for v in get create patch list; do can yes $p $v nodevalidations.ncclguard.io; done
can no $p watch nodevalidations.ncclguard.io
can yes $p patch nodevalidations.ncclguard.io:status
can no $p update nodevalidations.ncclguard.io
can no $p update nodevalidations.ncclguard.io:status
can no $p delete nodes
can no $p list nodes
can no $p delete nodevalidations.ncclguard.io
can no $p get secrets "$ns"
# The RAS reads: list pods (on its node, by field selector); nothing else of pods.
can yes $p list pods team-opted-in
for v in get watch patch; do can no $p $v pods team-opted-in; done
can no $p get pods/log team-opted-in
can no $p update ncclpolicies.ncclguard.io

step "the probe and the controller run with the chart's RBAC (service-account tokens)"
# No webhook serves here (the controller runs without one): the configurations would refuse
# the test job in the opted-in namespace.
k delete mutatingwebhookconfiguration ncclguard >/dev/null
k delete validatingwebhookconfiguration ncclguard >/dev/null
sa_kubeconfig "$ns" ncclguard-probe "$work/probe.kubeconfig"
sa_kubeconfig "$ns" ncclguard-controller "$work/controller.kubeconfig"
for node in gpu-node-1 gpu-node-2; do
  printf '{"apiVersion":"v1","kind":"Node","metadata":{"name":"%s","labels":{"node.kubernetes.io/instance-type":"p5.48xlarge"}}}' "$node" |
    k create -f - >/dev/null
done

if [[ ! -x $ncclguard ]]; then
  fail "$ncclguard missing: build it first (scripts/build.sh ncclguard) or set NCCLGUARD_BIN"
else
  # The DaemonSet's command on a fixture host root (the real sysfs of a p5 with 32 EFA devices).
  rc=0
  timeout 30 "$ncclguard" probe --publish --once --kubeconfig "$work/probe.kubeconfig" --node-name gpu-node-1 \
    --host-root "$root/tests/fixtures/probe/p5-32efa" --instance-type p5.48xlarge --check-timeout 10 \
    >"$work/probe.log" 2>&1 || rc=$?
  summary=$(k get nodevalidation gpu-node-1 -o jsonpath='{.status.summary}' 2>/dev/null || true)
  validated=$(k get node gpu-node-1 -o jsonpath='{.metadata.labels.ncclguard\.io/validated}')
  ready=$(k get node gpu-node-1 -o jsonpath='{.status.conditions[?(@.type=="NcclReady")].status}')
  if ((rc <= 1)) && [[ -n $summary && -n $validated && -n $ready ]] && ! grep -q Forbidden "$work/probe.log"; then
    pass "probe --publish as ncclguard-probe: NodeValidation $summary, label validated=$validated, NcclReady=$ready"
  else
    fail "probe --publish as ncclguard-probe (exit $rc, summary '$summary')"; cat "$work/probe.log"
  fi
  # Without the probe's role the same command only logs 403s and retries.
  timeout 5 "$ncclguard" probe --publish --once --kubeconfig "$work/controller.kubeconfig" --node-name gpu-node-2 \
    --host-root "$root/tests/fixtures/probe/p5-32efa" --instance-type p5.48xlarge >"$work/probe-denied.log" 2>&1 || true
  if grep -q '"code":"Forbidden"' "$work/probe-denied.log" && ! k get nodevalidation gpu-node-2 >/dev/null 2>&1; then
    pass "probe --publish as ncclguard-controller: Forbidden, nothing written"
  else
    fail "probe --publish as ncclguard-controller was not refused"; cat "$work/probe-denied.log"
  fi

  # A job the webhook marked: the controller must hold it (gpu-node-1 failed), then release it.
  k -n team-opted-in create -f - >/dev/null <<'JOB'
{"apiVersion":"kubeflow.org/v1","kind":"PyTorchJob","metadata":{"name":"gated","annotations":{"ncclguard.io/gate":"pending"}},
 "spec":{"runPolicy":{"suspend":true},"pytorchReplicaSpecs":{"Worker":{"replicas":2,"template":{"spec":{
   "nodeSelector":{"node.kubernetes.io/instance-type":"p5.48xlarge"},
   "containers":[{"name":"pytorch","image":"registry.example/train:1.0","resources":{"limits":{"nvidia.com/gpu":"8","memory":"1000Gi"}}}]}}}}}}
JOB
  POD_NAMESPACE=$ns POD_NAME=ncclguard-controller-test timeout 120 "$ncclguard" controller \
    --kubeconfig "$work/controller.kubeconfig" --leader-elect=true --lease-name=ncclguard-controller \
    >"$work/controller.log" 2>&1 &
  controller_pid=$!
  # eventually <seconds> <command...>: polls until the command succeeds.
  eventually() {
    local deadline=$((SECONDS + $1)); shift
    until "$@" >/dev/null 2>&1; do ((SECONDS < deadline)) || return 1; sleep 0.3; done
  }
  preflight() { [[ $(k -n team-opted-in get pytorchjob gated -o jsonpath='{.status.conditions[?(@.type=="NcclPreflight")].status}') == "$1" ]]; }
  if eventually 30 k -n team-opted-in get service gated && eventually 30 preflight False &&
    eventually 10 bash -c "kubectl -n team-opted-in get events.events.k8s.io -o name --request-timeout=5s | grep -q ."; then
    pass "controller as ncclguard-controller: rendezvous Service created, job held (NcclPreflight=False), Event written"
  else
    fail "controller as ncclguard-controller did not hold the job"
  fi
  # Two nodes pass (as the probe would publish it): the gate lets the job go.
  printf '{"apiVersion":"ncclguard.io/v1alpha1","kind":"NodeValidation","metadata":{"name":"gpu-node-2"}}' | k create -f - >/dev/null
  for node in gpu-node-1 gpu-node-2; do
    k patch nodevalidation "$node" --subresource=status --type=merge \
      -p '{"status":{"summary":"Pass","instanceType":"p5.48xlarge","checks":[]}}' >/dev/null
  done
  released() {
    [[ $(k -n team-opted-in get pytorchjob gated -o jsonpath='{.metadata.annotations.ncclguard\.io/gate} {.spec.runPolicy.suspend}') == "admitted false" ]]
  }
  if eventually 30 released && eventually 10 preflight True; then
    pass "controller as ncclguard-controller: job released (gate=admitted, suspend false, NcclPreflight=True)"
  else
    fail "controller as ncclguard-controller did not release the job"
  fi
  accepted=$(k get ncclpolicy default -o jsonpath='{.status.conditions[?(@.type=="Accepted")].status}')
  if [[ $accepted == True ]]; then pass "NcclPolicy default Accepted=True (status patch)"; else fail "NcclPolicy Accepted '$accepted'"; fi
  kill -TERM "$controller_pid" 2>/dev/null || true
  wait "$controller_pid" || true
  holder=$(k -n "$ns" get lease ncclguard-controller -o jsonpath='{.spec.holderIdentity}' 2>/dev/null || echo missing)
  if [[ -z $holder ]]; then pass "controller took the Lease and released it on SIGTERM"; else fail "Lease holder '$holder' after SIGTERM"; fi
  if grep -Eq 'Forbidden|"httpStatus":403' "$work/controller.log"; then
    fail "the controller hit a 403"; grep -E 'Forbidden|403' "$work/controller.log" | head -5
  else
    pass "no request of the controller was forbidden ($(wc -l <"$work/controller.log") log lines)"
  fi
fi

step "self-managed webhook certificates with the chart's RBAC"
if [[ ! -x $ncclguard ]]; then
  fail "$ncclguard missing"
else
  # The chart's configurations again, pointed at a controller on 127.0.0.1 (the API server
  # cannot reach a Service without a kubelet); their caBundle starts empty.
  k apply --server-side -f "$root/manifests/ncclguard.yaml" >/dev/null
  port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
  point_webhooks_at "https://127.0.0.1:$port"
  mkdir -p "$work/certs"
  # Now with its ServiceAccount as the owner (the chart sets POD_SERVICE_ACCOUNT): the Secret is
  # created owned by it, the Lease the run above created unowned gets it.
  POD_NAMESPACE=$ns POD_NAME=ncclguard-controller-certs POD_SERVICE_ACCOUNT=ncclguard-controller \
    timeout 120 "$ncclguard" controller \
    --kubeconfig "$work/controller.kubeconfig" --leader-elect=true --lease-name=ncclguard-controller \
    --webhook-listen="127.0.0.1:$port" --webhook-cert-secret=ncclguard-webhook-tls --cert-dir="$work/certs" \
    --webhook-service=ncclguard-webhook --webhook-configuration=ncclguard --webhook-host=127.0.0.1 \
    >"$work/controller-certs.log" 2>&1 &
  controller_pid=$!
  # Every entry of both configurations (the audit and enforce ones included) gets the caBundle.
  bundles() {
    local kind entries
    for kind in mutatingwebhookconfiguration validatingwebhookconfiguration; do
      entries=$(k get "$kind" ncclguard -o jsonpath='{range .webhooks[*]}{.name} {.clientConfig.caBundle}{"\n"}{end}')
      [[ -n $entries ]] && awk 'NF < 2 { exit 1 }' <<<"$entries" || return 1
    done
  }
  if eventually 30 k -n "$ns" get secret ncclguard-webhook-tls && eventually 30 bundles; then
    pass "controller as ncclguard-controller: Secret ncclguard-webhook-tls created, caBundle in every entry of both configurations"
  else
    fail "no Secret or caBundle"; cat "$work/controller-certs.log"
  fi
  sa_uid=$(k -n "$ns" get serviceaccount ncclguard-controller -o jsonpath='{.metadata.uid}')
  owned() { [[ $(k -n "$ns" get "$1" -o jsonpath='{.metadata.ownerReferences[*].uid}') == "$sa_uid" ]]; }
  if [[ -n $sa_uid ]] && eventually 30 owned secret/ncclguard-webhook-tls &&
    eventually 30 owned lease.coordination.k8s.io/ncclguard-controller; then
    pass "Secret ncclguard-webhook-tls and Lease ncclguard-controller owned by ServiceAccount ncclguard-controller ($sa_uid)"
  else
    fail "Secret or Lease not owned by ServiceAccount ncclguard-controller ($sa_uid)"; grep -i owner "$work/controller-certs.log" | head -3
  fi
  # kube-apiserver verifies the controller's serving certificate against that bundle.
  mutated() {
    printf '%s' '{"apiVersion":"v1","kind":"Pod","metadata":{"name":"trainer"},"spec":{"nodeSelector":{"node.kubernetes.io/instance-type":"p5.48xlarge"},"containers":[{"name":"pytorch","image":"registry.example/train:1.0","resources":{"limits":{"nvidia.com/gpu":"8","memory":"1000Gi"}}}]}}' |
      kubectl --request-timeout=20s -n team-opted-in create --dry-run=server -f - \
        -o jsonpath='{.spec.containers[0].resources.limits.vpc\.amazonaws\.com/efa}' | grep -qx 32
  }
  if eventually 30 mutated; then
    pass "a pod in team-opted-in is fixed by the webhook (32 EFA devices added) over the self-managed certificate"
  else
    fail "the API server did not get a fixed pod from the webhook"; tail -5 "$work/controller-certs.log"
  fi
  kill -TERM "$controller_pid" 2>/dev/null || true
  wait "$controller_pid" || true
  if grep -Eq 'Forbidden|"httpStatus":403' "$work/controller-certs.log"; then
    fail "the controller hit a 403"; grep -E 'Forbidden|403' "$work/controller-certs.log" | head -5
  else
    pass "no request of the certificate manager was forbidden"
  fi
fi

step "uninstall the manifests, then helm install and uninstall"
if k delete -f "$root/manifests/ncclguard.yaml" --ignore-not-found --wait=false >/dev/null 2>&1 &&
  ! k get mutatingwebhookconfiguration ncclguard >/dev/null 2>&1; then
  pass "manifests/ncclguard.yaml deleted (webhook configurations gone)"
else
  fail "deleting manifests/ncclguard.yaml"
fi
# Without a controller-manager a deleted namespace never finishes terminating: a fresh one.
if helm install "$release" "$chart" --namespace ncclguard-helm --create-namespace --timeout 60s >"$work/helm.log" 2>&1 &&
  [[ $(helm status "$release" -n ncclguard-helm -o json | python3 -c 'import json,sys; print(json.load(sys.stdin)["info"]["status"])') == deployed ]]; then
  pass "helm install: deployed"
  if grep -q 'ncclguard.io/enabled=true' "$work/helm.log"; then
    pass "NOTES tell how to opt a namespace in"
  else
    fail "NOTES lack the opt-in command"; cat "$work/helm.log"
  fi
else
  fail "helm install"; cat "$work/helm.log"
fi
owner=$(k get ncclpolicy default -o jsonpath='{.metadata.annotations.meta\.helm\.sh/release-name}' 2>/dev/null || true)
if [[ $owner == "$release" ]]; then pass "NcclPolicy default created by the release"; else fail "NcclPolicy default not from the release"; fi
if helm uninstall "$release" --namespace ncclguard-helm --timeout 60s >"$work/helm.log" 2>&1 &&
  ! k get validatingwebhookconfiguration ncclguard >/dev/null 2>&1 &&
  ! k get clusterrole ncclguard-controller >/dev/null 2>&1; then
  pass "helm uninstall: webhook configurations and ClusterRoles gone"
else
  fail "helm uninstall"; cat "$work/helm.log"
fi
if k get crd ncclpolicies.ncclguard.io >/dev/null 2>&1; then
  pass "CRDs kept after uninstall (Helm never deletes crds/)"
else
  fail "CRDs removed by helm uninstall"
fi

echo
if ((failures)); then
  echo "check-chart: $failures check(s) failed"
  exit 1
fi
echo "check-chart: all checks passed"
