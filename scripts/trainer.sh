#!/usr/bin/env bash
# The JobSet controller and Kubeflow Trainer v2 (TrainJob, TrainingRuntime,
# ClusterTrainingRuntime, trainer.kubeflow.org/v1alpha1) on the cluster of $KUBECONFIG, normally
# the test node (scripts/node.sh). The upstream releases' own manifests (config/default of
# sigs.k8s.io/jobset at $JOBSET_VERSION; manifests/base/{crds,manager,rbac,webhook} of
# github.com/kubeflow/trainer/v2 at $TRAINER_VERSION, the layout of its overlays/manager without
# the JobSet release it downloads), read from the Go module cache and never copied here, adapted at
# apply time by a kustomize overlay made in a temp dir:
#   - the images are the ones scripts/node.sh build makes from the modules (no registry), never
#     pulled, run as a non-root uid (the manifests say runAsNonRoot; the images name no user);
#   - each webhook's certificate Secret is filled before its Deployment starts, and its CA is put
#     into the webhook configurations' caBundle: both controllers' cert-controller keeps a valid
#     Secret as it is, so the webhooks serve as soon as the managers start, instead of after a
#     certificate is made, the kubelet's next Secret volume sync and the CA injection;
#   - readiness is probed every 2 s (not 10 or 15 s), the JobSet manager requests 50m CPU.
# Then the torch ClusterTrainingRuntime (manifests/base/runtimes/torch_distributed.yaml; its
# webhook must serve first). The images are imported into the node of $NCCLGUARD_NODE_DIR (as
# scripts/node.sh sees it) when its containerd does not have them yet.
#
#   scripts/trainer.sh install     apply, wait until both controllers' webhooks serve
#   scripts/trainer.sh uninstall   delete what install applied (the CRDs too)
#   scripts/trainer.sh render      print the adapted manifests
#
# Environment: KUBECONFIG (required, kubectl on PATH or in the binary cache), NCCLGUARD_NODE_DIR
#   (the node whose containerd gets the images; default scripts/node.sh's).
set -euo pipefail

script_dir="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=controlplane/versions.sh
source "$script_dir/controlplane/versions.sh"

log() { printf 'trainer: %s\n' "$*" >&2; }
die() { log "error: $*"; exit 1; }

jobset_namespace=jobset-system
trainer_namespace=kubeflow-system
jobset_image=localhost/ncclguard-node/jobset:$JOBSET_VERSION
trainer_image=localhost/ncclguard-node/trainer:$TRAINER_VERSION
cache_root="${XDG_CACHE_HOME:-$HOME/.cache}/ncclguard"
cache_dir="${NCCLGUARD_CONTROLPLANE_CACHE:-$cache_root/controlplane/$KUBERNETES_VERSION}"
# Where scripts/node.sh build leaves the images.
jobset_archive="$cache_root/images/jobset-$JOBSET_VERSION.tar"
trainer_archive="$cache_root/images/trainer-$TRAINER_VERSION.tar"
node_dir="$(realpath -m "${NCCLGUARD_NODE_DIR:-${XDG_RUNTIME_DIR:-/tmp}/ncclguard-node}")"
kubectl_bin="$(command -v kubectl || printf '%s' "$cache_dir/bin/kubectl")"
[[ -x "$kubectl_bin" ]] || die "no kubectl (scripts/controlplane.sh build)"
[[ -n "${KUBECONFIG:-}" ]] || die "KUBECONFIG is not set (eval \"\$(scripts/node.sh start)\")"
k() { "$kubectl_bin" --request-timeout=60s "$@"; }

# The webhook configurations each controller's cert-controller fills (as rendered).
jobset_webhooks=(mutatingwebhookconfiguration/jobset-mutating-webhook-configuration
  validatingwebhookconfiguration/jobset-validating-webhook-configuration)
trainer_webhooks=(mutatingwebhookconfiguration/defaulter.trainer.kubeflow.org
  validatingwebhookconfiguration/validator.trainer.kubeflow.org)

# make_certs <dir> <CA name> <service DNS name>: a CA and serving certificate as
# github.com/open-policy-agent/cert-controller's rotator accepts them without making new ones
# (ValidCert): an RSA CA key in PKCS#1, the CA certificate valid for the DNS name <CA name>, the
# serving certificate for <service DNS name> with serverAuth; both valid far beyond its 90-day
# look-ahead.
# Certificates already in <dir> (install's copy of those in the cluster) are kept.
make_certs() {
  local dir="$1" ca_name="$2" dns="$3"
  [[ -s "$dir/ca.crt" && -s "$dir/ca.key" && -s "$dir/tls.crt" && -s "$dir/tls.key" ]] && return 0
  mkdir -p "$dir"
  openssl genrsa -traditional -out "$dir/ca.key" 2048 2>/dev/null &&
    openssl req -x509 -new -key "$dir/ca.key" -days 3650 -subj "/O=$ca_name/CN=$ca_name" \
      -addext "basicConstraints=critical,CA:TRUE" -addext "keyUsage=critical,keyCertSign,digitalSignature,keyEncipherment" \
      -addext "subjectAltName=DNS:$ca_name" -out "$dir/ca.crt" 2>/dev/null &&
    openssl genrsa -traditional -out "$dir/tls.key" 2048 2>/dev/null &&
    openssl req -new -key "$dir/tls.key" -subj "/CN=$dns" -out "$dir/tls.csr" 2>/dev/null &&
    openssl x509 -req -in "$dir/tls.csr" -CA "$dir/ca.crt" -CAkey "$dir/ca.key" -CAcreateserial -days 3650 \
      -extfile <(printf '%s\n' "subjectAltName=DNS:$dns" 'extendedKeyUsage=serverAuth' \
        'keyUsage=critical,digitalSignature,keyEncipherment') \
      -out "$dir/tls.crt" 2>/dev/null || die "openssl: making the certificate of $dns failed"
  rm -f "$dir/tls.csr" "$dir/ca.srl"
}

# ca_bundle_patch <kind> <name> <count> <ca.crt>: a kustomize patch putting the CA into the
# first <count> webhooks of a webhook configuration.
ca_bundle_patch() {
  local kind="$1" name="$2" count="$3" bundle i
  bundle="$(base64 -w0 "$4")"
  printf '  - target: {kind: %s, name: %s}\n    patch: |\n' "$kind" "$name"
  for ((i = 0; i < count; i++)); do
    printf '      - op: add\n        path: /webhooks/%d/clientConfig/caBundle\n        value: %s\n' "$i" "$bundle"
  done
}

# manager_patch <image>: the patch of a manager Deployment: our image (whatever name upstream's
# kustomizations gave theirs), never pulled, a uid for runAsNonRoot, fast readiness probes.
manager_patch() {
  cat <<YAML
      - op: replace
        path: /spec/template/spec/containers/0/image
        value: $1
      - op: add
        path: /spec/template/spec/containers/0/imagePullPolicy
        value: Never
      - op: add
        path: /spec/template/spec/containers/0/securityContext/runAsUser
        value: 65532
      - op: replace
        path: /spec/template/spec/containers/0/readinessProbe/initialDelaySeconds
        value: 1
      - op: replace
        path: /spec/template/spec/containers/0/readinessProbe/periodSeconds
        value: 2
YAML
}

# render <dir>: writes the overlay into <dir> and prints the adapted manifests (without the
# runtime, which install applies once the webhooks serve).
render() {
  local dir="$1" jobset_src trainer_src
  jobset_src="$("$script_dir/controlplane.sh" source-dir "sigs.k8s.io/jobset@$JOBSET_VERSION")"
  trainer_src="$("$script_dir/controlplane.sh" source-dir "github.com/kubeflow/trainer/v2@$TRAINER_VERSION")"
  [[ -d "$jobset_src/config/default" ]] || die "no config/default in $jobset_src"
  [[ -d "$trainer_src/manifests/base/manager" ]] || die "no manifests/base/manager in $trainer_src"
  mkdir -p "$dir/jobset" "$dir/trainer"

  # JobSet: config/default names everything jobset-* in jobset-system.
  make_certs "$dir/jobset/certs" jobset-ca "jobset-webhook-service.$jobset_namespace.svc"
  local rel
  # kustomize takes a base only by a relative path.
  rel="$(realpath --relative-to="$dir/jobset" "$jobset_src/config/default")"
  {
    cat <<YAML
apiVersion: kustomize.config.k8s.io/v1beta1
kind: Kustomization
resources:
  - $rel
secretGenerator:
  - name: jobset-webhook-server-cert
    namespace: $jobset_namespace
    behavior: replace
    files: [certs/ca.crt, certs/ca.key, certs/tls.crt, certs/tls.key]
    options: {disableNameSuffixHash: true}
patches:
  - target: {kind: Deployment, name: jobset-controller-manager}
    patch: |
$(manager_patch "$jobset_image")
      - op: replace
        path: /spec/template/spec/containers/0/resources/requests/cpu
        value: 50m
YAML
    ca_bundle_patch MutatingWebhookConfiguration jobset-mutating-webhook-configuration 2 "$dir/jobset/certs/ca.crt"
    ca_bundle_patch ValidatingWebhookConfiguration jobset-validating-webhook-configuration 2 "$dir/jobset/certs/ca.crt"
    # The CRD names the manager as its conversion webhook (never called while v1alpha2 is its only
    # version); its CA goes there too.
    printf '  - target: {kind: CustomResourceDefinition, name: jobsets.jobset.x-k8s.io}\n    patch: |\n'
    printf '      - op: add\n        path: /spec/conversion/webhook/clientConfig/caBundle\n        value: %s\n' \
      "$(base64 -w0 "$dir/jobset/certs/ca.crt")"
  } >"$dir/jobset/kustomization.yaml"

  # Trainer: overlays/manager's layout, without its third-party/jobset (a download of the JobSet
  # release; the JobSet above is that).
  make_certs "$dir/trainer/certs" kubeflow-trainer-ca "kubeflow-trainer-controller-manager.$trainer_namespace.svc"
  printf 'apiVersion: v1\nkind: Namespace\nmetadata:\n  name: %s\n' "$trainer_namespace" >"$dir/trainer/namespace.yaml"
  local base
  base="$(realpath --relative-to="$dir/trainer" "$trainer_src/manifests/base")"
  {
    cat <<YAML
apiVersion: kustomize.config.k8s.io/v1beta1
kind: Kustomization
namespace: $trainer_namespace
resources:
  - namespace.yaml
  - $base/crds
  - $base/manager
  - $base/rbac
  - $base/webhook
secretGenerator:
  - name: kubeflow-trainer-webhook-cert
    files: [certs/ca.crt, certs/ca.key, certs/tls.crt, certs/tls.key]
    options: {disableNameSuffixHash: true}
patches:
  - target: {kind: Deployment, name: kubeflow-trainer-controller-manager}
    patch: |
$(manager_patch "$trainer_image")
YAML
    ca_bundle_patch MutatingWebhookConfiguration defaulter.trainer.kubeflow.org 1 "$dir/trainer/certs/ca.crt"
    ca_bundle_patch ValidatingWebhookConfiguration validator.trainer.kubeflow.org 3 "$dir/trainer/certs/ca.crt"
  } >"$dir/trainer/kustomization.yaml"

  printf 'apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources: [jobset, trainer]\n' \
    >"$dir/kustomization.yaml"
  k kustomize "$dir"
}

runtime_file() {
  printf '%s/manifests/base/runtimes/torch_distributed.yaml' \
    "$("$script_dir/controlplane.sh" source-dir "github.com/kubeflow/trainer/v2@$TRAINER_VERSION")"
}

# import_images: the two images into the node's containerd, where a node of scripts/node.sh runs
# in $node_dir and does not have them yet.
import_images() {
  local address ref archive
  address="$(sed -n 's/^CONTAINERD_ADDRESS=//p' "$node_dir/node.env" 2>/dev/null || true)"
  if [[ -z "$address" || ! -S "$address" ]]; then
    log "no scripts/node.sh node in $node_dir: not importing $jobset_image and $trainer_image (the cluster must have them)"
    return 0
  fi
  for ref in "$jobset_image|$jobset_archive" "$trainer_image|$trainer_archive"; do
    archive="${ref#*|}"; ref="${ref%%|*}"
    if [[ -n "$(ctr --address "$address" -n k8s.io images ls -q "name==$ref" 2>/dev/null)" ]]; then
      continue
    fi
    [[ -f "$archive" ]] || die "no $archive: run scripts/node.sh build"
    log "importing $ref into the node"
    NCCLGUARD_NODE_DIR="$node_dir" "$script_dir/node.sh" import "$archive" >/dev/null 2>&1 ||
      die "scripts/node.sh import $archive failed"
  done
}

# The objects a server-side dry run must admit once both webhooks serve.
probe_jobset() {
  cat <<'YAML'
apiVersion: jobset.x-k8s.io/v1alpha2
kind: JobSet
metadata: {name: ncclguard-install-probe, namespace: default}
spec:
  replicatedJobs:
    - name: w
      template:
        spec:
          template:
            spec:
              restartPolicy: Never
              containers: [{name: c, image: x:1}]
YAML
}
probe_trainjob() {
  cat <<'YAML'
apiVersion: trainer.kubeflow.org/v1alpha1
kind: TrainJob
metadata: {name: ncclguard-install-probe, namespace: default}
spec:
  runtimeRef: {name: torch-distributed}
YAML
}

# retry <seconds> <what> <command...>: until the command succeeds; its last output when it never does.
retry() {
  local seconds="$1" what="$2" out deadline; shift 2
  deadline=$((SECONDS + seconds))
  until out="$("$@" 2>&1)"; do
    ((SECONDS < deadline)) || { printf '%s\n' "$out" >&2; die "$what: not done after ${seconds}s"; }
    sleep 0.5
  done
}

# existing_certs <namespace> <secret> <dir>: the certificates of a webhook Secret already in the
# cluster into <dir>, so that installing again keeps them: new ones would reach the webhook
# configurations at once but the running server only after the kubelet's next Secret volume
# sync (a minute or more), and until then the API server could not call it.
existing_certs() {
  local ns="$1" secret="$2" dir="$3" key value
  mkdir -p "$dir"
  for key in ca.crt ca.key tls.crt tls.key; do
    value="$(k -n "$ns" get secret "$secret" -o jsonpath="{.data.${key//./\\.}}" 2>/dev/null)" || value=""
    [[ -n "$value" ]] || { rm -f "$dir"/*; return 0; }
    base64 -d <<<"$value" >"$dir/$key"
  done
}

cmd_install() {
  local tmp start=$SECONDS
  tmp="$(mktemp -d)"
  # shellcheck disable=SC2064 # expand now
  trap "rm -rf '$tmp'" RETURN
  import_images
  existing_certs "$jobset_namespace" jobset-webhook-server-cert "$tmp/jobset/certs"
  existing_certs "$trainer_namespace" kubeflow-trainer-webhook-cert "$tmp/trainer/certs"
  render "$tmp" >"$tmp/all.yaml" 2>"$tmp/render.err" || { cat "$tmp/render.err" >&2; die "rendering the manifests failed"; }
  # Server-side: the CRDs are too large for the last-applied annotation of a client-side apply.
  k apply --server-side --force-conflicts -f "$tmp/all.yaml" >"$tmp/apply.log" 2>&1 ||
    { cat "$tmp/apply.log" >&2; die "kubectl apply failed"; }
  k wait --for=condition=Established --timeout=60s crd/jobsets.jobset.x-k8s.io crd/trainjobs.trainer.kubeflow.org \
    crd/trainingruntimes.trainer.kubeflow.org crd/clustertrainingruntimes.trainer.kubeflow.org >/dev/null ||
    die "the CRDs were not established"
  local ns deployment
  for ns in "$jobset_namespace/jobset-controller-manager" "$trainer_namespace/kubeflow-trainer-controller-manager"; do
    deployment="${ns#*/}"; ns="${ns%/*}"
    k -n "$ns" rollout status "deployment/$deployment" --timeout=180s >&2 ||
      { k -n "$ns" get pods -o wide >&2; k -n "$ns" logs "deployment/$deployment" --tail=30 >&2 || true
        die "$deployment did not become Ready"; }
  done
  # Ready means the webhook servers run; the API server may still be loading the configurations.
  retry 60 "a dry-run JobSet admitted by the JobSet webhooks" \
    k create --dry-run=server -f <(probe_jobset)
  retry 60 "the torch ClusterTrainingRuntime applied through the Trainer's webhook" \
    k apply --server-side --force-conflicts -f "$(runtime_file)"
  retry 60 "a dry-run TrainJob admitted by the Trainer's webhooks" \
    k create --dry-run=server -f <(probe_trainjob)
  local hook
  for hook in "${jobset_webhooks[@]}" "${trainer_webhooks[@]}"; do
    [[ -n "$(k get "$hook" -o jsonpath='{.webhooks[0].clientConfig.caBundle}')" ]] || die "$hook has no caBundle"
  done
  log "JobSet $JOBSET_VERSION ($jobset_namespace) and Kubeflow Trainer $TRAINER_VERSION ($trainer_namespace, ClusterTrainingRuntime torch-distributed) Ready in $((SECONDS - start))s"
}

cmd_uninstall() {
  local tmp
  tmp="$(mktemp -d)"
  # shellcheck disable=SC2064 # expand now
  trap "rm -rf '$tmp'" RETURN
  render "$tmp" >"$tmp/all.yaml" 2>/dev/null || die "rendering the manifests failed"
  k delete --ignore-not-found --wait=true -f "$(runtime_file)" >/dev/null || true
  k delete --ignore-not-found --wait=true -f "$tmp/all.yaml" >/dev/null
  log "JobSet and Kubeflow Trainer removed"
}

case "${1:-}" in
  install) cmd_install ;;
  uninstall) cmd_uninstall ;;
  render) tmp="$(mktemp -d)"; render "$tmp"; rm -rf "$tmp" ;;
  *) printf 'usage: %s install|uninstall|render\n' "$0" >&2; exit 2 ;;
esac
