#!/usr/bin/env bash
# The Kubeflow training operator (PyTorchJob, MPIJob, ... kubeflow.org/v1) on the cluster of
# $KUBECONFIG, normally the test node (scripts/node.sh): the upstream release's own manifests
# (manifests/overlays/standalone of github.com/kubeflow/training-operator at
# $TRAINING_OPERATOR_VERSION, read from the Go module cache, never copied here), adapted at
# apply time by a kustomize overlay made in a temp dir:
#   - the image is the one scripts/node.sh build makes from the module (no registry), never pulled;
#   - the webhook certificate Secret is filled before the Deployment starts (the operator's
#     cert-controller accepts a valid one as it is), so the webhook serves at once instead of
#     after the kubelet's next volume sync, and its readiness is probed every 2 s, not 15 s;
#   - the init container the operator adds to PyTorchJob Workers (it waits until the Master's
#     name resolves) runs `getent hosts` in an image the node has (default: ncclguard's, which
#     scripts/image.sh imports) instead of `nslookup` in alpine:3.10, which no registry serves.
#
#   scripts/training-operator.sh install     apply, wait until the operator's webhook serves
#   scripts/training-operator.sh uninstall   delete what install applied (the CRDs too)
#   scripts/training-operator.sh render      print the adapted manifests
#   scripts/training-operator.sh start-local <dir>
#       the operator as a process of this machine (root), for a cluster whose nodes are simulated
#       (bench/scale.sh: kwok runs no containers): the binary scripts/controlplane.sh build
#       training makes, in a network namespace of its own (scripts/netns_run.py) that reaches
#       the API server's loopback port and nothing else: v1.8.1 binds its webhook to every
#       interface. Its webhook certificate Secret is filled as for install; the certificate files
#       are where its rotator looks, /tmp/k8s-webhook-server/serving-certs (removed by
#       stop-local); its webhook configuration matches no namespace (the API server cannot reach
#       a webhook in that namespace), and exists because the operator starts its controllers only
#       once its CA is in one. PyTorchJob only; its log and pid in <dir>. With
#       TRAINING_OPERATOR_NAMESPACES="ns1 ns2 ...", one operator per namespace (--namespace),
#       each in a network namespace of its own: v1.8.1's client is fixed at 20 requests a second
#       (v1.9 added --kube-api-qps), so at cluster size one operator takes most of an hour to
#       make 25,000 pods and their Services; 8 take a few minutes.
#   scripts/training-operator.sh stop-local <dir>   stops them by their pids
#
# Environment: KUBECONFIG (required, kubectl on PATH or in the binary cache),
#   NCCLGUARD_TRAINING_INIT_IMAGE   image of the Workers' init container
#                                   (default ghcr.io/ncclguard/ncclguard:<chart appVersion>)
set -euo pipefail

script_dir="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$script_dir/.." && pwd)"
# shellcheck source=controlplane/versions.sh
source "$script_dir/controlplane/versions.sh"

log() { printf 'training-operator: %s\n' "$*" >&2; }
die() { log "error: $*"; exit 1; }

namespace=kubeflow
image_name=localhost/ncclguard-node/training-operator
cache_dir="${NCCLGUARD_CONTROLPLANE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/ncclguard/controlplane/$KUBERNETES_VERSION}"
kubectl_bin="$(command -v kubectl || printf '%s' "$cache_dir/bin/kubectl")"
[[ -x "$kubectl_bin" ]] || die "no kubectl (scripts/controlplane.sh build)"
[[ -n "${KUBECONFIG:-}" ]] || die "KUBECONFIG is not set (eval \"\$(scripts/node.sh start)\")"
k() { "$kubectl_bin" --request-timeout=60s "$@"; }

app_version="$(sed -n 's/^appVersion: *"\{0,1\}\([^"]*\)"\{0,1\}$/\1/p' "$repo/charts/ncclguard/Chart.yaml")"
init_image="${NCCLGUARD_TRAINING_INIT_IMAGE:-ghcr.io/ncclguard/ncclguard:$app_version}"

# The webhook's CA and serving certificate as the operator's cert-controller wants them: an
# RSA CA key in PKCS#1, a CA certificate valid for the name training-operator-ca, a serving
# certificate for training-operator.kubeflow.svc.
make_certs() {
  local dir="$1"
  openssl genrsa -traditional -out "$dir/ca.key" 2048 2>/dev/null &&
    openssl req -x509 -new -key "$dir/ca.key" -days 3650 -subj "/O=training-operator-ca/CN=training-operator-ca" \
      -addext "basicConstraints=critical,CA:TRUE" -addext "keyUsage=critical,keyCertSign,digitalSignature,keyEncipherment" \
      -addext "subjectAltName=DNS:training-operator-ca" \
      -out "$dir/ca.crt" 2>/dev/null &&
    openssl genrsa -traditional -out "$dir/tls.key" 2048 2>/dev/null &&
    openssl req -new -key "$dir/tls.key" -subj "/CN=training-operator.$namespace.svc" -out "$dir/tls.csr" 2>/dev/null &&
    openssl x509 -req -in "$dir/tls.csr" -CA "$dir/ca.crt" -CAkey "$dir/ca.key" -CAcreateserial -days 3650 \
      -extfile <(printf '%s\n' "subjectAltName=DNS:training-operator.$namespace.svc" \
        'extendedKeyUsage=serverAuth' 'keyUsage=critical,digitalSignature,keyEncipherment') \
      -out "$dir/tls.crt" 2>/dev/null || die "openssl: making the webhook certificate failed"
  rm -f "$dir/tls.csr" "$dir/ca.srl"
}

# render <dir>: writes the overlay into <dir> and prints the adapted manifests.
render() {
  local dir="$1" src rel
  src="$("$script_dir/controlplane.sh" source-dir "github.com/kubeflow/training-operator@$TRAINING_OPERATOR_VERSION")"
  [[ -d "$src/manifests/overlays/standalone" ]] || die "no manifests/overlays/standalone in $src"
  # kustomize takes a base only by a relative path.
  rel="$(realpath --relative-to="$dir" "$src/manifests/overlays/standalone")"
  mkdir -p "$dir/certs"
  make_certs "$dir/certs"
  cat >"$dir/initContainer.yaml" <<YAML
- name: init-pytorch
  image: $init_image
  imagePullPolicy: Never
  resources:
    limits: {cpu: 100m, memory: 20Mi}
    requests: {cpu: 50m, memory: 10Mi}
  command: ['sh', '-c', 'err=1; for i in \$(seq {{.MaxTries}}); do if getent hosts {{.MasterAddr}}; then err=0 && break; fi; echo waiting for master; sleep 1; done; exit \$err']
YAML
  cat >"$dir/kustomization.yaml" <<YAML
apiVersion: kustomize.config.k8s.io/v1beta1
kind: Kustomization
resources:
  - $rel
images:
  - name: kubeflow/training-operator
    newName: $image_name
    newTag: "$TRAINING_OPERATOR_VERSION"
secretGenerator:
  - name: training-operator-webhook-cert
    namespace: $namespace
    behavior: replace
    files: [certs/ca.crt, certs/ca.key, certs/tls.crt, certs/tls.key]
    options: {disableNameSuffixHash: true}
configMapGenerator:
  - name: training-operator-init-container
    namespace: $namespace
    files: [initContainer.yaml]
    options: {disableNameSuffixHash: true}
patches:
  - target: {kind: Deployment, name: training-operator}
    patch: |
      - op: add
        path: /spec/template/spec/containers/0/imagePullPolicy
        value: Never
      - op: add
        path: /spec/template/spec/volumes/-
        value: {name: init-container, configMap: {name: training-operator-init-container}}
      - op: add
        path: /spec/template/spec/containers/0/volumeMounts/-
        value: {name: init-container, mountPath: /etc/config, readOnly: true}
      - op: replace
        path: /spec/template/spec/containers/0/readinessProbe/initialDelaySeconds
        value: 1
      - op: replace
        path: /spec/template/spec/containers/0/readinessProbe/periodSeconds
        value: 2
YAML
  k kustomize "$dir"
}

cmd_install() {
  local tmp start=$SECONDS
  tmp="$(mktemp -d)"
  # shellcheck disable=SC2064 # expand now
  trap "rm -rf '$tmp'" RETURN
  render "$tmp" >"$tmp/all.yaml" 2>"$tmp/render.err" || { cat "$tmp/render.err" >&2; die "rendering the manifests failed"; }
  # Server-side: the CRDs are too large for the last-applied annotation of a client-side apply.
  k apply --server-side --force-conflicts -f "$tmp/all.yaml" >"$tmp/apply.log" 2>&1 ||
    { cat "$tmp/apply.log" >&2; die "kubectl apply failed"; }
  k wait --for=condition=Established --timeout=60s crd/pytorchjobs.kubeflow.org crd/mpijobs.kubeflow.org >/dev/null ||
    die "the CRDs were not established"
  k -n "$namespace" rollout status deployment/training-operator --timeout=180s >&2 ||
    { k -n "$namespace" get pods -o wide >&2; k -n "$namespace" logs deployment/training-operator --tail=20 >&2 || true
      die "the training operator did not become Ready"; }
  # Ready means its webhook serves; the CA reaches the webhook configuration right after.
  local i
  for ((i = 0; i < 120; i++)); do
    [[ -n "$(k get validatingwebhookconfiguration validator.training-operator.kubeflow.org \
      -o jsonpath='{.webhooks[0].clientConfig.caBundle}' 2>/dev/null)" ]] && break
    sleep 0.5
  done
  ((i < 120)) || die "the operator did not put its CA into its webhook configuration"
  log "training operator $TRAINING_OPERATOR_VERSION Ready in namespace $namespace ($((SECONDS - start))s)"
}

cmd_uninstall() {
  local tmp
  tmp="$(mktemp -d)"
  # shellcheck disable=SC2064 # expand now
  trap "rm -rf '$tmp'" RETURN
  render "$tmp" >"$tmp/all.yaml" 2>/dev/null || die "rendering the manifests failed"
  k delete --ignore-not-found --wait=true -f "$tmp/all.yaml" >/dev/null
  log "training operator removed"
}

local_cert_dir=/tmp/k8s-webhook-server/serving-certs  # v1.8.1's pkg/cert, not configurable

cmd_start_local() {
  local dir="$1" bin server port i start=$SECONDS watched name pid
  # One operator for every namespace, or one per namespace named (each its own client and its
  # own 20 requests a second: v1.8.1 has no flag to raise them).
  local -a namespaces
  read -r -a namespaces <<<"${TRAINING_OPERATOR_NAMESPACES:-}"
  ((${#namespaces[@]} > 0)) || namespaces=("")
  [[ -n "$dir" && -d "$dir" ]] || die "start-local <dir>: an existing directory"
  ((EUID == 0)) || die "start-local needs root (a network namespace of its own)"
  bin="$cache_dir/bin/training-operator.v1"
  [[ -x "$bin" ]] || die "no $bin (scripts/controlplane.sh build training)"
  server="$(k config view --minify -o jsonpath='{.clusters[0].cluster.server}')"
  [[ "$server" =~ ^https://127\.0\.0\.1:([0-9]+)$ ]] ||
    die "start-local wants an API server on 127.0.0.1, not '$server'"
  port="${BASH_REMATCH[1]}"
  mkdir -p "$dir/certs"
  make_certs "$dir/certs"
  k create namespace "$namespace" --dry-run=client -o yaml | k apply -f - >/dev/null
  k -n "$namespace" create secret generic training-operator-webhook-cert \
    --from-file="$dir/certs/ca.crt" --from-file="$dir/certs/ca.key" \
    --from-file="$dir/certs/tls.crt" --from-file="$dir/certs/tls.key" \
    --dry-run=client -o yaml | k apply -f - >/dev/null
  k apply -f - >/dev/null <<YAML
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingWebhookConfiguration
metadata:
  name: validator.training-operator.kubeflow.org
webhooks:
  - name: validate-pytorchjob.kubeflow.org
    admissionReviewVersions: [v1]
    sideEffects: None
    failurePolicy: Ignore
    clientConfig:
      service: {name: training-operator, namespace: $namespace, path: /validate-kubeflow-org-v1-pytorchjob}
    namespaceSelector:
      matchLabels: {kubernetes.io/metadata.name: no-namespace-reaches-this-webhook}
    rules:
      - {apiGroups: [kubeflow.org], apiVersions: [v1], operations: [CREATE, UPDATE], resources: [pytorchjobs]}
YAML
  mkdir -p "$local_cert_dir"
  cp "$dir/certs/tls.crt" "$dir/certs/tls.key" "$local_cert_dir/"
  if [[ -s "$dir/training-operator.pids" ]]; then
    while read -r pid; do
      kill -0 "$pid" 2>/dev/null && die "operators of $dir still run (stop-local $dir first)"
    done <"$dir/training-operator.pids"
  fi
  : >"$dir/training-operator.pids"
  for watched in "${namespaces[@]}"; do
    name=training-operator${watched:+-$watched}
    "$script_dir/netns_run.py" "$port" -- "$bin" --enable-scheme=pytorchjob \
      --metrics-bind-address=0 --health-probe-bind-address=0 ${watched:+--namespace="$watched"} \
      --pytorch-init-container-image="$init_image" >"$dir/$name.log" 2>&1 &
    pid=$!
    echo "$pid" >>"$dir/training-operator.pids"
    for ((i = 0; i < 600; i++)); do
      grep -q 'Starting workers.*"controller": "pytorchjob-controller"' "$dir/$name.log" && break
      kill -0 "$pid" 2>/dev/null || { tail -20 "$dir/$name.log" >&2; die "the training operator exited"; }
      sleep 0.1
    done
    ((i < 600)) || { tail -20 "$dir/$name.log" >&2; die "the training operator did not start its PyTorchJob workers in 60 s"; }
    log "training operator $TRAINING_OPERATOR_VERSION running as pid $pid, ${watched:-every namespace} ($((SECONDS - start))s)"
  done
}

cmd_stop_local() {
  local dir="$1" pid
  local -a pids=()
  [[ -f "$dir/training-operator.pids" ]] && mapfile -t pids <"$dir/training-operator.pids"
  for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
  for pid in "${pids[@]}"; do
    for _ in $(seq 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -9 "$pid" 2>/dev/null || true
  done
  rm -f "$dir/training-operator.pids" "$local_cert_dir/tls.crt" "$local_cert_dir/tls.key"
  rmdir "$local_cert_dir" "${local_cert_dir%/*}" 2>/dev/null || true
}

case "${1:-}" in
  install) cmd_install ;;
  uninstall) cmd_uninstall ;;
  render) tmp="$(mktemp -d)"; render "$tmp"; rm -rf "$tmp" ;;
  start-local) cmd_start_local "${2:-}" ;;
  stop-local) cmd_stop_local "${2:-}" ;;
  *) printf 'usage: %s install|uninstall|render|start-local <dir>|stop-local <dir>\n' "$0" >&2; exit 2 ;;
esac
