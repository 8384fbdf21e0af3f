# Sourced by scripts/demo.sh and scripts/check-chart.sh: run the chart's objects on the local
# control plane (scripts/controlplane.sh, $NCCLGUARD_CONTROLPLANE_DIR) with ncclguard on this
# machine instead of in pods. Needs kubectl on PATH and KUBECONFIG set to the admin's.
# shellcheck shell=bash

# sa_kubeconfig <namespace> <service account> <file>: a kubeconfig that authenticates with a
# token of that service account (TokenRequest), so the API server applies its RBAC exactly.
sa_kubeconfig() {
  local server token
  server=$(sed -n 's/^APISERVER_URL=//p' "$NCCLGUARD_CONTROLPLANE_DIR/controlplane.env")
  token=$(kubectl --request-timeout=20s -n "$1" create token "$2" --duration=1h) || return
  cat >"$3" <<KUBECONFIG
apiVersion: v1
kind: Config
clusters: [{name: local, cluster: {server: "$server", certificate-authority: "$NCCLGUARD_CONTROLPLANE_DIR/pki/ca.crt"}}]
users: [{name: $2, user: {token: "$token"}}]
contexts: [{name: local, context: {cluster: local, user: $2}}]
current-context: local
KUBECONFIG
}

# point_webhooks_at <https://host:port>: every entry of the chart's webhook configurations calls
# <base><its service path> (/mutate, /validate/audit, ...) instead of the chart's Service, which
# the API server cannot reach without a kubelet and kube-proxy. caBundle is left as it is (the
# controller fills it). The runtimes entry shares /validate.
point_webhooks_at() {
  local kind paths path patch i
  for kind in mutatingwebhookconfiguration validatingwebhookconfiguration; do
    paths=$(kubectl --request-timeout=20s get "$kind" ncclguard \
      -o jsonpath='{range .webhooks[*]}{.clientConfig.service.path}{"\n"}{end}') || return
    patch="" i=0
    while IFS= read -r path; do
      if [[ -n $path ]]; then
        patch+="${patch:+,}{\"op\":\"remove\",\"path\":\"/webhooks/$i/clientConfig/service\"}"
        patch+=",{\"op\":\"add\",\"path\":\"/webhooks/$i/clientConfig/url\",\"value\":\"$1$path\"}"
      fi
      i=$((i + 1))
    done <<<"$paths"
    [[ -z $patch ]] || kubectl --request-timeout=20s patch "$kind" ncclguard --type=json -p "[$patch]" >/dev/null || return
  done
}
