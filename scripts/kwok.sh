#!/usr/bin/env bash
# A control plane that moves pods without nodes (the scale bench, issue 29): on a running
# `scripts/controlplane.sh start` instance (etcd + kube-apiserver on loopback), a real
# kube-scheduler, a kube-controller-manager (the Job and garbage-collector controllers) and kwok
# playing every Node annotated kwok.x-k8s.io/node=fake and the pods bound to them.
#
#   scripts/kwok.sh start   start the three (builds kwok on first use: controlplane.sh build kwok)
#   scripts/kwok.sh start --without-kwok
#                           the scheduler and the controller-manager alone, for nodes a test
#                           writes itself (tests/controlplane/kueue_test.cpp): pods are bound,
#                           never run; needs only `controlplane.sh build node`
#   scripts/kwok.sh stop    stop them by pid, remove their state (before controlplane.sh stop)
#   scripts/kwok.sh status  whether the three run (exit 0) or not (exit 1)
#
# kwok's stages are upstream's, read from kwok's module in the Go module cache (never copied
# here): node-initialize (kustomize/stage/node/fast), node-heartbeat-with-lease and the general
# pod stages (kustomize/stage/pod/general: create, init containers, ready, complete for a Job's
# pods, delete). A pod's annotation pod-complete.stage.kwok.x-k8s.io/delay (e.g. "300s") sets how
# long a Job's pod runs before kwok completes it.
#
# The API server must not taint new nodes not-ready (its TaintNodesByCondition admission): no
# node-lifecycle controller runs to lift the taint, and 5,000 nodes' leases would keep it busy.
# Start the control plane with
#   NCCLGUARD_CONTROLPLANE_EXTRA_APISERVER_ARGS=--disable-admission-plugins=TaintNodesByCondition
# kwok holds each node's Lease (coordination.k8s.io, kube-node-lease): a kwok started again on the
# same cluster takes a node over only once its previous Lease expired.
#
# Client rate limits: kube-scheduler and kube-controller-manager at QPS 5000 / burst 10000 (what
# kwokctl sets with --disable-qps-limits); kwok's client has no limiter at all. Nothing listens:
# both run with --secure-port=0 and kwok with no --server-address.
#
# Environment:
#   NCCLGUARD_CONTROLPLANE_DIR   the control plane instance (as controlplane.sh); state in its kwok/
#   NCCLGUARD_KWOK_LEASE_SECONDS node lease duration (default 600: 5,000 nodes renew ~33 leases/s)
#   NCCLGUARD_SKIP_BUILD         set: use the binaries in the cache as they are (no stamp check)
set -euo pipefail

script_dir="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=controlplane/versions.sh
source "$script_dir/controlplane/versions.sh"
controlplane_dir="${NCCLGUARD_CONTROLPLANE_DIR:-${XDG_RUNTIME_DIR:-/tmp}/ncclguard-controlplane}"
state_dir="$controlplane_dir/kwok"
# shellcheck source=lib/procs.sh
source "$script_dir/lib/procs.sh"

log() { printf 'kwok: %s\n' "$*" >&2; }
die() { log "error: $*"; exit 1; }

env_value() { sed -n "s/^$1=//p" "$controlplane_dir/controlplane.env"; }

# launch <name> <exe> <args...>: in the background, output in <name>.log, pid recorded.
launch() {
  local name="$1" exe="$2" i pid; shift 2
  exe="$(readlink -f "$exe")"
  printf '==== %s %s\n' "$(date -u +%FT%TZ)" "$exe $*" >>"$state_dir/$name.log"
  "$exe" "$@" </dev/null >>"$state_dir/$name.log" 2>&1 &
  pid=$!
  printf '%s %s\n' "$pid" "$exe" >"$state_dir/$name.pid"
  for ((i = 0; i < 100; i++)); do
    [[ "$(readlink "/proc/$pid/exe" 2>/dev/null)" != "$exe" ]] || return 0
    sleep 0.01
  done
}

cmd_stop() {
  [[ -d "$state_dir" ]] || { log "nothing to stop in $state_dir"; return 0; }
  local name
  for name in kwok kube-scheduler kube-controller-manager; do stop_recorded "$state_dir/$name.pid"; done
  rm -rf "$state_dir"
  log "stopped; removed $state_dir"
}

cmd_start() {
  [[ -f "$controlplane_dir/controlplane.env" ]] ||
    die "no control plane in $controlplane_dir (run scripts/controlplane.sh start first)"
  [[ ! -d "$state_dir" ]] || die "$state_dir exists: run scripts/kwok.sh stop first"
  local with_kwok=1 components=(kube-controller-manager kube-scheduler kwok)
  if [[ ${1:-} == --without-kwok ]]; then
    with_kwok=0 components=(kube-controller-manager kube-scheduler)
  fi
  [[ -n ${NCCLGUARD_SKIP_BUILD:-} ]] || "$script_dir/controlplane.sh" build node \
    "${components[@]:2}" >&2
  local bin_dir kubeconfig pki kwok_src
  bin_dir="$(env_value BIN_DIR)"
  kubeconfig="$(env_value KUBECONFIG)"
  pki="$controlplane_dir/pki"
  mkdir -p "$state_dir"
  # Whatever started is stopped again when the start fails.
  trap 'cmd_stop' ERR

  # The stages: upstream's files, one multi-document config.
  local stage first=1
  ((with_kwok)) && kwok_src="$("$script_dir/controlplane.sh" source-dir "sigs.k8s.io/kwok@$KWOK_VERSION")"
  ((with_kwok)) && for stage in node/fast/node-initialize.yaml node/heartbeat-with-lease/node-heartbeat-with-lease.yaml \
    pod/general/pod-create.yaml pod/general/pod-init-container-running.yaml \
    pod/general/pod-init-container-completed.yaml pod/general/pod-ready.yaml \
    pod/general/pod-complete.yaml pod/general/pod-delete.yaml; do
    ((first)) || printf -- '---\n'
    first=0
    cat "$kwok_src/kustomize/stage/$stage"
  done >"$state_dir/stages.yaml"

  cat >"$state_dir/scheduler.yaml" <<YAML
apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
clientConnection:
  kubeconfig: $kubeconfig
  qps: 5000
  burst: 10000
leaderElection:
  leaderElect: false
YAML

  launch kube-controller-manager "$bin_dir/kube-controller-manager" \
    --kubeconfig="$kubeconfig" --controllers=job-controller,garbage-collector-controller,ttl-after-finished-controller \
    --service-account-private-key-file="$pki/sa.key" --root-ca-file="$pki/ca.crt" \
    --leader-elect=false --secure-port=0 --kube-api-qps=5000 --kube-api-burst=10000 \
    --concurrent-job-syncs=20
  launch kube-scheduler "$bin_dir/kube-scheduler" --config="$state_dir/scheduler.yaml" --secure-port=0
  ((with_kwok)) && launch kwok "$bin_dir/kwok" --kubeconfig="$kubeconfig" --config="$state_dir/stages.yaml" \
    --manage-nodes-with-annotation-selector=kwok.x-k8s.io/node=fake \
    --node-lease-duration-seconds="${NCCLGUARD_KWOK_LEASE_SECONDS:-600}" --cidr=100.64.0.0/10 \
    --node-ip=127.0.0.1
  sleep 2
  local name
  for name in "${components[@]}"; do
    if ! pid_alive "$state_dir/$name.pid"; then
      tail -n 30 "$state_dir/$name.log" >&2
      cmd_stop
      die "$name exited at start"
    fi
  done
  trap - ERR
  log "${components[*]} run (state and logs in $state_dir)"
}

cmd_status() {
  [[ -d "$state_dir" ]] || { log "not running (no $state_dir)"; return 1; }
  report_processes kube-controller-manager kube-scheduler kwok
}

case "${1:-}" in
  start) cmd_start "${@:2}" ;;
  stop) cmd_stop ;;
  status) cmd_status ;;
  *) printf 'usage: %s start|stop|status\n' "$0" >&2; exit 2 ;;
esac
