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

case "${1:-}" in
  install) cmd_install ;;
  uninstall) cmd_uninstall ;;
  render) tmp="$(mktemp -d)"; render "$tmp"; rm -rf "$tmp" ;;
  *) printf 'usage: %s install|uninstall|render\n' "$0" >&2; exit 2 ;;
esac
