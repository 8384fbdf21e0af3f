#!/usr/bin/env bash
# A real Kubernetes cluster of 1 to 4 nodes for ncclguard's tests: etcd, kube-apiserver,
# kube-controller-manager, kube-scheduler, containerd (runc), kubelet and kube-proxy,
# each node inside a network namespace of its own that has no interface leading out of
# it, and a mount namespace of its own whose mounts vanish with it.
#
#   scripts/node.sh build     build/cache the binaries (scripts/controlplane.sh build node and
#                             build training) and the pause, CoreDNS and training-operator images
#   scripts/node.sh start     start the nodes; stdout is eval-able (KUBECONFIG, PATH with
#                             kubectl and helm); returns once every Node is Ready and the
#                             cluster DNS (CoreDNS, kube-system/kube-dns) answers
#   scripts/node.sh stop      stop everything start started, on every node; leaves no process,
#                             mount, network namespace, veth, cgroup or iptables rule
#   scripts/node.sh status    what runs on each node and what is left over (exit 0 only when
#                             every node runs and is Ready)
#   scripts/node.sh import <docker-archive.tar>   load an image into every node's containerd
#   scripts/node.sh registry start|stop|status    a real OCI registry (Debian's docker-registry,
#                             the CNCF distribution registry 2.8) at 127.0.0.1:5000 inside node
#                             1's network namespace, storage in the state dir; node 1's containerd
#                             pulls registry.ncclguard.test:5000/<path>:<tag> from it over plain
#                             HTTP (a hosts.toml under the CRI's config_path); stop stops it too
#   scripts/node.sh exec [--node I] <command...>  run a command inside node I's namespaces
#                                                 (default 1, the node with the control plane)
#
# Nodes: node 1 is "ncclguard-node", 10.233.0.1, pods 10.244.0.0/24, and runs the control
# plane beside its kubelet; node i (2..4) is "ncclguard-node-<i>", 10.233.0.<i>, pods
# 10.244.<i-1>.0/24, with its own containerd, kubelet and kube-proxy (state in node-<i>/ of
# the state dir). Every Node has the label node.kubernetes.io/instance-type.
#
# Network, one node: the namespace holds lo, a dummy "node0" (the node IP, and the service
# range routed onto it, where unanswered packets are discarded), and the CNI bridge "cni0"
# with the pods.
# Network, N nodes: a further namespace "ncclguard-net-<hash>" holds only the bridge "br0"
# joining the nodes: each node's "node0" is a veth to it carrying 10.233.0.<i>/24, each node
# routes the other nodes' pod ranges via their node IPs and forwards (net.ipv4.ip_forward in
# the node namespaces only; the host's is never touched), and a dummy "svc0" takes the
# service range (with the node IP as source) and discards what kube-proxy does not rewrite.
# Either way: no default route, no veth to the host, no interface in the host's namespace.
# The registry (`registry start`) listens on 127.0.0.1 in node 1's namespace: the other nodes'
# containerd cannot reach it, so only node 1 pulls from it.
# The host reaches the API server through scripts/node/forward.py, which listens on
# 127.0.0.1 on the host and connects from inside node 1's namespace.
#
# Environment:
#   NCCLGUARD_NODE_DIR            state dir (default ${XDG_RUNTIME_DIR:-/tmp}/ncclguard-node)
#   NCCLGUARD_NODE_COUNT          nodes start makes, 1 to 4 (default 1); the other commands
#                                 act on as many as the running start made
#   NCCLGUARD_NODE_READY_TIMEOUT  seconds to wait for the Nodes to be Ready (default 120)
#   NCCLGUARD_NODE_INSTANCE_TYPE  the Nodes' node.kubernetes.io/instance-type label
#                                 (default p5.48xlarge: a type of the chart's probe.instanceTypes)
#   NCCLGUARD_CONTROLPLANE_CACHE  binary cache, shared with scripts/controlplane.sh
#   NCCLGUARD_NODE_REGISTRY       1: start also starts the registry (as `registry start`)
# shellcheck source-path=SCRIPTDIR
set -euo pipefail

script_dir="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=controlplane/versions.sh
source "$script_dir/controlplane/versions.sh"
# shellcheck source=lib/procs.sh
source "$script_dir/lib/procs.sh"

cache_root="${XDG_CACHE_HOME:-$HOME/.cache}/ncclguard"
cache_dir="${NCCLGUARD_CONTROLPLANE_CACHE:-$cache_root/controlplane/$KUBERNETES_VERSION}"
bin_dir="$cache_dir/bin"
image_cache="$cache_root/images"
state_dir="${NCCLGUARD_NODE_DIR:-${XDG_RUNTIME_DIR:-/tmp}/ncclguard-node}"
state_dir="$(realpath -m "$state_dir")"
ready_timeout="${NCCLGUARD_NODE_READY_TIMEOUT:-120}"
instance_type="${NCCLGUARD_NODE_INSTANCE_TYPE:-p5.48xlarge}"

# Names derived from the state dir, so that stop and status find what a start
# left even when the state dir is gone, and two instances never share one.
instance_id="$(printf '%s' "$state_dir" | sha256sum | cut -c1-8)"
netns="ncclguard-node-$instance_id"
# The namespace of the bridge that joins the nodes (only when there are several).
bridge_netns="ncclguard-net-$instance_id"
cgroup_name="ncclguard-node-$instance_id"
max_nodes=4
node_count="${NCCLGUARD_NODE_COUNT:-1}"
# Node 1 carries the control plane; the API server listens on its IP.
apiserver_ip=10.233.0.1
cluster_cidr=10.244.0.0/16
service_cidr=10.96.0.0/24
kubernetes_service_ip=10.96.0.1
pause_image="localhost/ncclguard-node/pause:1"
# The cluster DNS (scripts/node/coredns.yaml) and the Kubeflow training operator
# (scripts/training-operator.sh installs it): static binaries in images of their own.
dns_ip=10.96.0.10
coredns_image="localhost/ncclguard-node/coredns:$COREDNS_VERSION"
training_operator_image="localhost/ncclguard-node/training-operator:$TRAINING_OPERATOR_VERSION"
marker_file=".ncclguard-node"
# The registry (cmd_registry): the name pods use (a host with a port, as a real registry has;
# nothing resolves it: containerd's hosts.toml maps it) and where it listens in node 1's namespace.
registry_host="registry.ncclguard.test:5000"
registry_addr="127.0.0.1:5000"

log() { printf 'node: %s\n' "$*" >&2; }
die() { log "error: $*"; exit 1; }

# select_node <i>: makes node i the one the functions below act on: its name, IP, pod range,
# network namespace, dir (node 1's is the state dir itself, as with a single node) and the
# suffix of its pid and log files ("" for node 1, "-<i>" for the others).
select_node() {
  node="$1"
  if ((node == 1)); then
    node_name=ncclguard-node node_netns="$netns" node_dir="$state_dir" sfx=""
  else
    node_name="ncclguard-node-$node" node_netns="$netns-$node" node_dir="$state_dir/node-$node" sfx="-$node"
  fi
  node_ip="10.233.0.$node"
  pod_cidr="10.244.$((node - 1)).0/24"
  pod_gateway="10.244.$((node - 1)).1"
  # Node 1's kubelet has the instance's cgroup as its cgroupRoot (as with a single node); the
  # others one below it each.
  if ((node == 1)); then node_cgroup="$cgroup_name"; else node_cgroup="$cgroup_name/node-$node"; fi
}
select_node 1

# The nodes the running instance has: as many as its start recorded (its env, when no start
# ran, for start itself).
recorded_node_count() {
  local n
  n="$(cat "$state_dir/node-count" 2>/dev/null || true)"
  [[ $n =~ ^[1-4]$ ]] && printf '%s' "$n" || printf '1'
}

# ---------------------------------------------------------------- build

pause_archive="$image_cache/pause-1.tar"

# The sandbox image: a static pause binary in an image of its own (no registry).
build_pause_image() {
  local src="$script_dir/node/pause.c" stamp="$image_cache/pause-1.stamp" hash
  hash="$(cat "$src" "$0" | sha256sum | cut -d' ' -f1)"
  if [[ -f "$pause_archive" && -f "$stamp" && "$(cat "$stamp")" == "$hash" ]]; then
    log "pause image: up to date"
    return 0
  fi
  command -v buildah >/dev/null || die "buildah not found (scripts/bootstrap.sh installs it)"
  mkdir -p "$image_cache"
  local tmp; tmp="$(mktemp -d)"
  gcc -static -O2 -Wall -Wextra -Werror -o "$tmp/pause" "$src" || { rm -rf "$tmp"; die "compiling pause.c failed"; }
  local ctr
  ctr="$(buildah from scratch)"
  buildah copy "$ctr" "$tmp/pause" /pause >/dev/null
  buildah config --entrypoint '["/pause"]' --user 65535:65535 "$ctr"
  buildah commit -q --rm "$ctr" "$pause_image" >/dev/null
  rm -f "$pause_archive.tmp"
  buildah push -q "$pause_image" "docker-archive:$pause_archive.tmp:$pause_image" >/dev/null
  mv -f "$pause_archive.tmp" "$pause_archive"
  rm -rf "$tmp"
  printf '%s\n' "$hash" >"$stamp"
  log "pause image built: $pause_archive"
}

# build_binary_image <archive> <reference> <binary> <path in image>: a static binary alone
# in an image (FROM scratch), saved as a docker-archive; rebuilt when the binary changes.
build_binary_image() {
  local archive="$1" reference="$2" binary="$3" path="$4" hash ctr
  hash="$({ sha256sum "$binary"; printf '%s %s\n' "$reference" "$path"; declare -f build_binary_image; } | sha256sum | cut -d' ' -f1)"
  if [[ -f "$archive" && -f "$archive.stamp" && "$(cat "$archive.stamp")" == "$hash" ]]; then
    log "$reference: up to date"
    return 0
  fi
  mkdir -p "$image_cache"
  ctr="$(buildah from scratch)"
  buildah copy --chmod 0755 "$ctr" "$binary" "$path" >/dev/null
  buildah config --entrypoint "[\"$path\"]" "$ctr"
  buildah commit -q --rm "$ctr" "$reference" >/dev/null
  rm -f "$archive.tmp"
  buildah push -q "$reference" "docker-archive:$archive.tmp:$reference" >/dev/null
  mv -f "$archive.tmp" "$archive"
  printf '%s\n' "$hash" >"$archive.stamp"
  log "$reference built: $archive"
}

coredns_archive="$image_cache/coredns-$COREDNS_VERSION.tar"
training_operator_archive="$image_cache/training-operator-$TRAINING_OPERATOR_VERSION.tar"

cmd_build() {
  "$script_dir/bootstrap.sh" --node-only
  # The node's own control plane, its commands, CoreDNS and the training operator: one
  # `go build` for what they share.
  "$script_dir/controlplane.sh" build controlplane node training trainer
  build_pause_image
  build_binary_image "$coredns_archive" "$coredns_image" "$bin_dir/coredns" /coredns
  build_binary_image "$training_operator_archive" "$training_operator_image" \
    "$bin_dir/training-operator.v1" /manager
  # JobSet and Kubeflow Trainer v2 (scripts/trainer.sh installs them and imports these).
  build_binary_image "$image_cache/jobset-$JOBSET_VERSION.tar" "localhost/ncclguard-node/jobset:$JOBSET_VERSION" \
    "$bin_dir/jobset" /manager
  build_binary_image "$image_cache/trainer-$TRAINER_VERSION.tar" "localhost/ncclguard-node/trainer:$TRAINER_VERSION" \
    "$bin_dir/trainer-controller-manager" /manager
}

# ---------------------------------------------------------------- processes

# The cgroup v1 hierarchies (or the v2 root) the node's cgroups live in.
cgroup_hierarchies() {
  local d
  if [[ -f /sys/fs/cgroup/cgroup.controllers ]]; then
    printf '%s\n' /sys/fs/cgroup
    return
  fi
  for d in /sys/fs/cgroup/*/; do
    d="${d%/}"
    [[ -f "$d/cgroup.procs" ]] && printf '%s\n' "$d"
  done
}

# The hierarchy whose cgroup.procs tracks every process of the node.
tracking_hierarchy() {
  if [[ -f /sys/fs/cgroup/cgroup.controllers ]]; then printf '/sys/fs/cgroup'; else printf '/sys/fs/cgroup/pids'; fi
}

# Creates the instance's cgroup (node 1's kubelet's cgroupRoot) in every hierarchy,
# "<it>/daemons" where the daemons of every node run, and "<it>/node-<i>" (node i's
# cgroupRoot) for the other nodes. Everything the nodes start (containerd's shims, the
# containers) is below it, so stop can end them all and remove it.
create_cgroups() {
  local h d i dirs=("$cgroup_name" "$cgroup_name/daemons")
  for ((i = 2; i <= node_count; i++)); do dirs+=("$cgroup_name/node-$i"); done
  while read -r h; do
    for d in "${dirs[@]}"; do
      mkdir -p "$h/$d"
      if [[ -f "$h/cpuset.cpus" ]]; then
        cat "$h/cpuset.cpus" >"$h/$d/cpuset.cpus"
        cat "$h/cpuset.mems" >"$h/$d/cpuset.mems"
      fi
    done
  done < <(cgroup_hierarchies)
}

# Pids of every process in the node's cgroup tree.
cgroup_pids() {
  local root; root="$(tracking_hierarchy)/$cgroup_name"
  [[ -d "$root" ]] || return 0
  find "$root" -name cgroup.procs -exec cat {} + 2>/dev/null | sort -un
}

kill_cgroup_processes() {
  local pids i
  for ((i = 0; i < 50; i++)); do
    pids="$(cgroup_pids)"
    [[ -n "$pids" ]] || return 0
    # shellcheck disable=SC2086 # one pid a word
    kill -KILL $pids 2>/dev/null || true
    sleep 0.2
  done
  log "warning: processes left in the node's cgroup: $(cgroup_pids | tr '\n' ' ')"
}

remove_cgroups() {
  local h d
  while read -r h; do
    [[ -d "$h/$cgroup_name" ]] || continue
    # Deepest first: a cgroup is removed with rmdir once its children are gone.
    while read -r d; do
      rmdir "$d" 2>/dev/null || true
    done < <(find "$h/$cgroup_name" -depth -type d)
    [[ ! -d "$h/$cgroup_name" ]] || log "warning: could not remove $h/$cgroup_name"
  done < <(cgroup_hierarchies)
}

# spawn <name> <where> <exe> <args...>: starts <exe> in the instance's cgroup, inside
# the selected node's namespaces (where=node) or in the caller's (where=host), output in
# log/<name>.log, pid in <name>.pid; returns once it runs <exe>.
spawn() {
  local name="$1" where="$2" exe="$3"; shift 3
  local log_file="$state_dir/log/$name.log" pid i
  exe="$(readlink -f "$exe")"
  local enter=()
  [[ $where == host ]] || enter=(nsenter --target "$(recorded_pid "$state_dir/holder$sfx.pid")" --mount --net --)
  printf '==== %s %s\n' "$(date -u +%FT%TZ)" "$exe $*" >>"$log_file"
  (
    printf '%s\n' "$BASHPID" >"$(tracking_hierarchy)/$cgroup_name/daemons/cgroup.procs"
    exec "${enter[@]}" "$exe" "$@"
  ) </dev/null >>"$log_file" 2>&1 &
  pid=$!
  disown "$pid"
  printf '%s %s\n' "$pid" "$exe" >"$state_dir/$name.pid"
  for ((i = 0; i < 300; i++)); do
    [[ "$(readlink "/proc/$pid/exe" 2>/dev/null)" != "$exe" ]] || return 0
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.01
  done
  fail_start "$name" "$name did not start"
}

launch() { spawn "$1" node "${@:2}"; }

# in_node <command...>: runs a command in the selected node's network and mount namespaces.
in_node() {
  local holder; holder="$(recorded_pid "$state_dir/holder$sfx.pid")"
  nsenter --target "$holder" --mount --net -- "$@"
}

fail_start() {
  local name="$1"; shift
  log "error: $*"
  if [[ -f "$state_dir/log/$name.log" ]]; then
    log "---- last 40 lines of $state_dir/log/$name.log ----"
    tail -n 40 "$state_dir/log/$name.log" >&2 || true
  fi
  exit 1
}

started() {
  local name="$1" rc="$2" what="$3"
  case $rc in
    0) return 0 ;;
    1) fail_start "$name" "$name exited while starting" ;;
    *) fail_start "$name" "$name: $what not reached after ${ready_timeout}s" ;;
  esac
}

# ---------------------------------------------------------------- state

generate_pki() {
  local pki="$state_dir/pki"
  mkdir -p "$pki"
  openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 3650 \
    -keyout "$pki/ca.key" -out "$pki/ca.crt" -subj "/CN=ncclguard-node-ca" \
    -addext "basicConstraints=critical,CA:TRUE" -addext "keyUsage=critical,keyCertSign,cRLSign" 2>/dev/null ||
    die "openssl: creating the CA failed"
  # leaf <name> <subject> <extendedKeyUsage> [subjectAltName]
  leaf() {
    local ext
    ext="$(printf '%s\n' 'basicConstraints=CA:FALSE' 'keyUsage=critical,digitalSignature,keyEncipherment' "extendedKeyUsage=$3")"
    [[ -z "${4:-}" ]] || ext+=$'\n'"subjectAltName=$4"
    openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes \
      -keyout "$pki/$1.key" -out "$pki/$1.csr" -subj "$2" 2>/dev/null || die "openssl: creating the $1 key failed"
    openssl x509 -req -in "$pki/$1.csr" -CA "$pki/ca.crt" -CAkey "$pki/ca.key" -CAcreateserial \
      -days 3650 -out "$pki/$1.crt" -extfile <(printf '%s\n' "$ext") 2>/dev/null || die "openssl: signing the $1 certificate failed"
    rm -f "$pki/$1.csr"
  }
  leaf apiserver "/CN=kube-apiserver" serverAuth \
    "IP:127.0.0.1,IP:$apiserver_ip,IP:$kubernetes_service_ip,DNS:localhost,DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc,DNS:kubernetes.default.svc.cluster.local"
  leaf admin "/O=system:masters/CN=ncclguard-admin" clientAuth
  # Each kubelet its own client certificate (NodeRestriction: it may only write its own Node)
  # and serving certificate (its IP, which the API server dials for logs and exec).
  local i
  for ((i = 1; i <= node_count; i++)); do
    select_node "$i"
    leaf "kubelet$sfx" "/O=system:nodes/CN=system:node:$node_name" clientAuth
    leaf "kubelet-serving$sfx" "/O=system:nodes/CN=system:node:$node_name" serverAuth "IP:$node_ip,DNS:$node_name"
  done
  select_node 1
  leaf apiserver-kubelet-client "/O=system:masters/CN=kube-apiserver-kubelet-client" clientAuth
  leaf kube-scheduler "/CN=system:kube-scheduler" clientAuth
  leaf kube-controller-manager "/CN=system:kube-controller-manager" clientAuth
  leaf kube-proxy "/CN=system:kube-proxy" clientAuth
  openssl genpkey -algorithm RSA -pkeyopt rsa_keygen_bits:2048 -out "$pki/sa.key" 2>/dev/null &&
    openssl pkey -in "$pki/sa.key" -pubout -out "$pki/sa.pub" 2>/dev/null || die "openssl: creating the service-account key failed"
  chmod 600 "$pki"/*.key
}

# kubeconfig <file> <server> <cert name>
write_kubeconfig() {
  local file="$1" server="$2" cert="$3" pki="$state_dir/pki"
  cat >"$file" <<KUBECONFIG
apiVersion: v1
kind: Config
clusters:
- name: ncclguard-node
  cluster:
    server: $server
    certificate-authority: $pki/ca.crt
users:
- name: $cert
  user:
    client-certificate: $pki/$cert.crt
    client-key: $pki/$cert.key
contexts:
- name: ncclguard-node
  context:
    cluster: ncclguard-node
    user: $cert
current-context: ncclguard-node
KUBECONFIG
  chmod 600 "$file"
}

# The control plane's kubeconfigs (node 1's namespace, where it runs).
write_cluster_configs() {
  local c="$state_dir/config" name
  mkdir -p "$c"
  for name in kube-scheduler kube-controller-manager; do
    write_kubeconfig "$c/$name.kubeconfig" "https://$apiserver_ip:6443" "$name"
  done
}

# The selected node's configs, in its dir (node 1's: the state dir, as with a single node).
write_node_configs() {
  local c="$node_dir/config" in_ns="https://$apiserver_ip:6443"
  mkdir -p "$c" "$node_dir/cni/net.d" "$node_dir/cni/ipam" "$node_dir/pod-logs"
  write_kubeconfig "$c/kubelet.kubeconfig" "$in_ns" "kubelet$sfx"
  write_kubeconfig "$c/kube-proxy.kubeconfig" "$in_ns" kube-proxy
  # Pods resolve through the cluster DNS (clusterDNS, CoreDNS); the node itself has no
  # resolver: an empty resolv.conf rather than the host's, unreachable from the namespace.
  : >"$c/resolv.conf"

  cat >"$c/containerd.toml" <<TOML
version = 2
root = "$node_dir/containerd/root"
state = "$node_dir/containerd/state"
disabled_plugins = [
  "io.containerd.snapshotter.v1.aufs", "io.containerd.snapshotter.v1.btrfs",
  "io.containerd.snapshotter.v1.zfs", "io.containerd.snapshotter.v1.devmapper",
  "io.containerd.tracing.processor.v1.otlp", "io.containerd.internal.v1.tracing",
]
[grpc]
  address = "$node_dir/containerd.sock"
[ttrpc]
  address = "$node_dir/containerd.sock.ttrpc"
[plugins."io.containerd.internal.v1.opt"]
  path = "$node_dir/containerd/opt"
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "$pause_image"
  # No CAP_SYS_RESOURCE here: without this every sandbox fails with
  # "can't get final child's PID from pipe: EOF".
  restrict_oom_score_adj = true
  netns_mounts_under_state_dir = true
  disable_apparmor = true
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        BinaryName = "$(command -v runc)"
        Root = "$node_dir/containerd/runc"
        SystemdCgroup = false
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "$cni_bin_dir"
    conf_dir = "$node_dir/cni/net.d"
  # Per-registry hosts (certs.d/<host:port>/hosts.toml): only the test registry, node 1's.
  [plugins."io.containerd.grpc.v1.cri".registry]
    config_path = "$node_dir/certs.d"
TOML
  mkdir -p "$node_dir/certs.d"
  if ((node == 1)); then
    # registry.ncclguard.test:5000 is the registry in this namespace, over plain HTTP.
    mkdir -p "$node_dir/certs.d/$registry_host"
    cat >"$node_dir/certs.d/$registry_host/hosts.toml" <<TOML
server = "http://$registry_addr"

[host."http://$registry_addr"]
  capabilities = ["pull", "resolve"]
TOML
  fi

  # No ipMasq: nothing is translated, and nothing has anywhere to go but the bridge.
  cat >"$node_dir/cni/net.d/10-ncclguard-node.conflist" <<JSON
{
  "cniVersion": "0.4.0",
  "name": "ncclguard-node",
  "plugins": [
    {
      "type": "bridge",
      "bridge": "cni0",
      "isGateway": true,
      "ipMasq": false,
      "hairpinMode": true,
      "ipam": {
        "type": "host-local",
        "dataDir": "$node_dir/cni/ipam",
        "ranges": [[{"subnet": "$pod_cidr", "gateway": "$pod_gateway"}]],
        "routes": [{"dst": "0.0.0.0/0"}]
      }
    }
  ]
}
JSON

  cat >"$c/kubelet.yaml" <<YAML
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
address: $node_ip
port: 10250
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
healthzPort: 10248
authentication:
  anonymous: {enabled: false}
  webhook: {enabled: true}
  x509: {clientCAFile: $state_dir/pki/ca.crt}
authorization: {mode: Webhook}
tlsCertFile: $state_dir/pki/kubelet-serving$sfx.crt
tlsPrivateKeyFile: $state_dir/pki/kubelet-serving$sfx.key
cgroupDriver: cgroupfs
cgroupRoot: /$node_cgroup
failSwapOn: false
failCgroupV1: false
containerRuntimeEndpoint: unix://$node_dir/containerd.sock
podLogsDir: $node_dir/pod-logs
resolvConf: $c/resolv.conf
clusterDomain: cluster.local
clusterDNS: [$dns_ip]
# The images cannot be pulled again (no registry): never collect them, and keep
# the node schedulable on a nearly full disk.
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
evictionHard:
  memory.available: 100Mi
  nodefs.available: "1%"
  imagefs.available: "1%"
  nodefs.inodesFree: "1%"
serializeImagePulls: false
YAML

  cat >"$c/kube-proxy.yaml" <<YAML
apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
mode: iptables
clusterCIDR: $cluster_cidr
hostnameOverride: $node_name
bindAddress: 127.0.0.1
healthzBindAddress: 127.0.0.1:10256
metricsBindAddress: 127.0.0.1:10249
clientConnection:
  kubeconfig: $c/kube-proxy.kubeconfig
# conntrack sysctls are global, not the namespace's: leave them alone.
conntrack:
  maxPerCore: 0
  min: 0
  tcpEstablishedTimeout: 0s
  tcpCloseWaitTimeout: 0s
YAML
}

# ---------------------------------------------------------------- start

# Host paths that hostPath volumes without a type (the chart's probe mounts these) make the
# runtime create on the host. start records which of them are absent; stop removes those
# that are still empty directories, so a node leaves the host's tree as it found it.
host_paths=(/dev/infiniband /opt/amazon/efa /opt/amazon)
record_absent_host_paths() {
  local p
  for p in "${host_paths[@]}"; do [[ -e "$p" ]] || printf '%s\n' "$p"; done >"$state_dir/absent-host-paths"
}
remove_created_host_paths() {
  local p
  [[ -f "$state_dir/absent-host-paths" ]] || return 0
  while read -r p; do
    [[ -d "$p" ]] && rmdir "$p" 2>/dev/null || true
  done <"$state_dir/absent-host-paths"
}

cni_bin_dir=/usr/lib/cni

require() {
  local b
  for b in etcd kube-apiserver kubectl helm kubelet kube-scheduler kube-controller-manager kube-proxy; do
    [[ -x "$bin_dir/$b" ]] || die "not built: run scripts/node.sh build (missing $bin_dir/$b)"
  done
  [[ -f "$pause_archive" ]] || die "no pause image: run scripts/node.sh build"
  [[ -f "$coredns_archive" && -f "$training_operator_archive" ]] ||
    die "no CoreDNS or training-operator image: run scripts/node.sh build"
  for b in containerd ctr runc ip iptables nsenter openssl python3 curl; do
    command -v "$b" >/dev/null || die "$b not found (scripts/bootstrap.sh installs the node's packages)"
  done
  [[ -x "$cni_bin_dir/bridge" && -x "$cni_bin_dir/host-local" && -x "$cni_bin_dir/loopback" ]] ||
    die "CNI plugins not found in $cni_bin_dir (package containernetworking-plugins)"
  ((EUID == 0)) || die "must run as root (network namespace, mounts, cgroups)"
}

# netns_exists <name>: whether a named network namespace exists (the name alone: node 1's
# name is the start of the others').
netns_exists() {
  ip netns list 2>/dev/null | awk '{print $1}' | grep -qxF -- "$1"
}

# The selected node's network namespace: lo, the node IP, the service range, and the
# pods' bridge. One node: the node IP on a dummy device that also swallows the service
# range. Several: the node IP on a veth to the nodes' bridge (create_bridge_netns), routes
# to the other nodes' pod ranges through it, and the service range on a dummy of its own.
# Nothing else, so nothing leaves.
create_netns() {
  ip netns add "$node_netns"
  ip -n "$node_netns" link set lo up
  if ((node_count == 1)); then
    # A dummy device, or where the kernel has none an ifb one (no tc redirect: it
    # drops what it is given, NOARP); either counts what it discards.
    add_discard_device node0
    ip -n "$node_netns" addr add "$node_ip/32" dev node0
    ip -n "$node_netns" link set node0 up
    # A route must exist for a ClusterIP before kube-proxy's DNAT can rewrite it;
    # one nobody answers is discarded by the dummy device.
    ip -n "$node_netns" route add "$service_cidr" dev node0
  else
    # Both ends made from the bridge's namespace: neither ever appears in the host's.
    ip -n "$bridge_netns" link add "n$node" type veth peer name node0 netns "$node_netns"
    ip -n "$bridge_netns" link set "n$node" master br0 up
    ip -n "$node_netns" addr add "$node_ip/24" dev node0
    ip -n "$node_netns" link set node0 up
    add_discard_device svc0
    ip -n "$node_netns" link set svc0 up
    ip -n "$node_netns" route add "$service_cidr" dev svc0 src "$node_ip"
    local j other
    for ((j = 1; j <= node_count; j++)); do
      ((j != node)) || continue
      other="10.244.$((j - 1)).0/24"
      ip -n "$node_netns" route add "$other" via "10.233.0.$j" dev node0
    done
    # Packets between node0 and the pods' bridge are forwarded: set in this namespace
    # (a sysctl of the network namespace of whoever writes it), never the host's.
    nsenter --net="/run/netns/$node_netns" sh -c 'echo 1 >/proc/sys/net/ipv4/ip_forward' ||
      die "enabling ip_forward in $node_netns failed"
  fi
  ip -n "$node_netns" link add cni0 type bridge
  ip -n "$node_netns" addr add "$pod_gateway/${pod_cidr#*/}" dev cni0
  ip -n "$node_netns" link set cni0 up
}

# add_discard_device <name>: a device in the selected node's namespace that takes packets and
# drops them (dummy, or ifb where the kernel has no dummy).
add_discard_device() {
  ip -n "$node_netns" link add "$1" type dummy 2>/dev/null || ip -n "$node_netns" link add "$1" type ifb ||
    die "the kernel offers neither a dummy nor an ifb device"
}

# Several nodes: the namespace of the bridge "br0" that joins their node0 veths, an L2
# switch and nothing else (no address, no route, no other interface).
create_bridge_netns() {
  ip netns add "$bridge_netns"
  ip -n "$bridge_netns" link set lo up
  ip -n "$bridge_netns" link add br0 type bridge
  ip -n "$bridge_netns" link set br0 up
}

# The holder keeps the namespaces alive: it sits in the network namespace and
# in a mount namespace of its own (a slave of the host's: host mounts show,
# ours never reach the host), which every daemon then joins. Paths the daemons
# write to that no flag moves are covered with tmpfs there, so nothing lands on
# the host. (Not `ip netns exec`: its fresh /sys has no cgroup mounts.)
start_holder() {
  (
    printf '%s\n' "$BASHPID" >"$(tracking_hierarchy)/$cgroup_name/daemons/cgroup.procs"
    exec nsenter --net="/run/netns/$node_netns" -- unshare --mount --propagation slave -- sleep infinity
  ) </dev/null >>"$state_dir/log/holder$sfx.log" 2>&1 &
  local pid=$! i exe
  disown "$pid"
  exe="$(readlink -f "$(command -v sleep)")"
  for ((i = 0; i < 200; i++)); do
    [[ "$(readlink "/proc/$pid/exe" 2>/dev/null)" != "$exe" ]] || break
    sleep 0.01
  done
  printf '%s %s\n' "$pid" "$exe" >"$state_dir/holder$sfx.pid"
  local d
  for d in /run/containerd /var/log/containers /var/log/pods /var/lib/cni /run/netns; do
    in_node sh -c "mkdir -p '$d' && mount -t tmpfs -o mode=755 ncclguard-node '$d'" ||
      fail_start "holder$sfx" "mounting a tmpfs on $d in the node's mount namespace failed"
  done
}

apiserver_probe() {
  in_node curl -fsS --max-time 3 --cacert "$state_dir/pki/ca.crt" --cert "$state_dir/pki/admin.crt" \
    --key "$state_dir/pki/admin.key" "https://$apiserver_ip:6443/readyz"
}

start_control_plane() {
  local pki="$state_dir/pki" rc
  launch etcd "$bin_dir/etcd" --name=ncclguard-node --data-dir="$state_dir/etcd" \
    --listen-client-urls=http://127.0.0.1:2379 --advertise-client-urls=http://127.0.0.1:2379 \
    --listen-peer-urls=http://127.0.0.1:2380 --initial-advertise-peer-urls=http://127.0.0.1:2380 \
    --initial-cluster=ncclguard-node=http://127.0.0.1:2380 --initial-cluster-state=new \
    --unsafe-no-fsync --log-level=warn
  rc=0; wait_until etcd "$ready_timeout" in_node curl -fsS --max-time 2 http://127.0.0.1:2379/health || rc=$?
  started etcd "$rc" "health"

  # Webhooks and aggregated APIs are dialled at their endpoints, not through the
  # ClusterIP (--enable-aggregator-routing), so the API server never depends on
  # kube-proxy's rules for them.
  launch kube-apiserver "$bin_dir/kube-apiserver" \
    --etcd-servers=http://127.0.0.1:2379 \
    --bind-address=0.0.0.0 --secure-port=6443 --advertise-address="$apiserver_ip" \
    --tls-cert-file="$pki/apiserver.crt" --tls-private-key-file="$pki/apiserver.key" \
    --client-ca-file="$pki/ca.crt" \
    --kubelet-client-certificate="$pki/apiserver-kubelet-client.crt" \
    --kubelet-client-key="$pki/apiserver-kubelet-client.key" \
    --service-account-issuer=https://kubernetes.default.svc.cluster.local \
    --service-account-key-file="$pki/sa.pub" --service-account-signing-key-file="$pki/sa.key" \
    --service-cluster-ip-range="$service_cidr" \
    --authorization-mode=Node,RBAC --enable-admission-plugins=NodeRestriction \
    --allow-privileged=true --enable-aggregator-routing=true \
    --kubelet-preferred-address-types=InternalIP
  rc=0; wait_until kube-apiserver "$ready_timeout" apiserver_probe || rc=$?
  started kube-apiserver "$rc" "/readyz"

  launch kube-controller-manager "$bin_dir/kube-controller-manager" \
    --kubeconfig="$state_dir/config/kube-controller-manager.kubeconfig" \
    --authentication-kubeconfig="$state_dir/config/kube-controller-manager.kubeconfig" \
    --authorization-kubeconfig="$state_dir/config/kube-controller-manager.kubeconfig" \
    --service-account-private-key-file="$pki/sa.key" --root-ca-file="$pki/ca.crt" \
    --use-service-account-credentials=true --leader-elect=false \
    --cluster-signing-cert-file="$pki/ca.crt" --cluster-signing-key-file="$pki/ca.key" \
    --bind-address=127.0.0.1 --secure-port=10257
  launch kube-scheduler "$bin_dir/kube-scheduler" \
    --kubeconfig="$state_dir/config/kube-scheduler.kubeconfig" \
    --authentication-kubeconfig="$state_dir/config/kube-scheduler.kubeconfig" \
    --authorization-kubeconfig="$state_dir/config/kube-scheduler.kubeconfig" \
    --leader-elect=false --bind-address=127.0.0.1 --secure-port=10259
}

start_forwarder() {
  local rc python=/usr/bin/python3
  [[ -x $python ]] || python="$(command -v python3)"
  # The forwarder runs in the host's network namespace (that is the point), but
  # in the node's cgroup so stop ends it with the rest.
  spawn forward host "$python" "$script_dir/node/forward.py" "/run/netns/$netns" 0 "$apiserver_ip" 6443 "$state_dir/forward.port"
  rc=0; wait_until forward 10 test -s "$state_dir/forward.port" || rc=$?
  started forward "$rc" "a listening port"
  forward_port="$(cat "$state_dir/forward.port")"
}

# The selected node's containerd (with the images every node has), kubelet and kube-proxy.
start_node_daemons() {
  local rc sock="$node_dir/containerd.sock"
  launch "containerd$sfx" "$(command -v containerd)" --config "$node_dir/config/containerd.toml"
  rc=0; wait_until "containerd$sfx" "$ready_timeout" ctr --address "$sock" version || rc=$?
  started "containerd$sfx" "$rc" "its socket"
  local archive
  for archive in "$pause_archive" "$coredns_archive" "$training_operator_archive"; do
    ctr --address "$sock" -n k8s.io images import "$archive" >/dev/null ||
      fail_start "containerd$sfx" "importing $archive failed"
  done

  launch "kubelet$sfx" "$bin_dir/kubelet" --config="$node_dir/config/kubelet.yaml" \
    --kubeconfig="$node_dir/config/kubelet.kubeconfig" --root-dir="$node_dir/kubelet" \
    --hostname-override="$node_name" --node-ip="$node_ip" \
    --node-labels="node.kubernetes.io/instance-type=$instance_type"
  launch "kube-proxy$sfx" "$bin_dir/kube-proxy" --config="$node_dir/config/kube-proxy.yaml"
}

# The cluster DNS: CoreDNS (scripts/node/coredns.yaml) behind kube-system/kube-dns at $dns_ip.
start_dns() {
  local kubectl=("$bin_dir/kubectl" --kubeconfig "$state_dir/kubeconfig" --request-timeout=30s)
  sed -e "s|@IMAGE@|$coredns_image|" -e "s|@DNS_IP@|$dns_ip|" "$script_dir/node/coredns.yaml" |
    "${kubectl[@]}" apply -f - >>"$state_dir/log/coredns-apply.log" 2>&1 ||
    fail_start coredns-apply "applying scripts/node/coredns.yaml failed"
  "${kubectl[@]}" -n kube-system rollout status deployment/coredns --timeout="${ready_timeout}s" \
    >>"$state_dir/log/coredns-apply.log" 2>&1 ||
    fail_start coredns-apply "CoreDNS not Ready after ${ready_timeout}s: $("${kubectl[@]}" -n kube-system get pods -l k8s-app=kube-dns -o wide 2>&1 | tail -n1)"
}

# node_ready <name>: whether that Node is Ready.
node_ready() {
  [[ "$("$bin_dir/kubectl" --kubeconfig "$state_dir/kubeconfig" get node "$1" \
    -o jsonpath='{.status.conditions[?(@.type=="Ready")].status}' 2>/dev/null)" == True ]]
}

# The names of the first <count> nodes, space-separated.
node_names() {
  local i names=()
  for ((i = 1; i <= $1; i++)); do
    select_node "$i"
    names+=("$node_name")
  done
  select_node 1
  printf '%s' "${names[*]}"
}

cmd_start() {
  [[ $node_count =~ ^[1-4]$ ]] || die "NCCLGUARD_NODE_COUNT must be 1 to $max_nodes, not '$node_count'"
  require
  if [[ -d "$state_dir" ]]; then
    [[ -f "$state_dir/$marker_file" ]] || [[ -z "$(ls -A "$state_dir")" ]] ||
      die "$state_dir exists and was not created by node.sh; refusing to use it"
    if [[ -f "$state_dir/holder.pid" ]] && pid_alive "$state_dir/holder.pid"; then
      die "a node already runs in $state_dir; run 'scripts/node.sh stop' (same NCCLGUARD_NODE_DIR) first"
    fi
  fi
  # Whatever a crashed run left (processes, cgroups, namespace) goes first.
  cleanup_leftovers
  # A start that fails anywhere from here on takes down what it started.
  trap start_failed EXIT
  mkdir -p "$state_dir/log"
  chmod 700 "$state_dir"
  touch "$state_dir/$marker_file"
  # Before anything of a second node exists, so that stop always knows how many to look for.
  printf '%s\n' "$node_count" >"$state_dir/node-count"
  record_absent_host_paths
  local begin=$SECONDS i
  if ((node_count == 1)); then
    log "starting node $node_name in network namespace $netns (state in $state_dir)"
  else
    log "starting $node_count nodes in network namespaces $netns and $netns-<2..$node_count>, joined in $bridge_netns (state in $state_dir)"
  fi
  generate_pki
  write_cluster_configs
  for ((i = 1; i <= node_count; i++)); do select_node "$i"; write_node_configs; done
  create_cgroups
  ((node_count == 1)) || create_bridge_netns
  for ((i = 1; i <= node_count; i++)); do select_node "$i"; create_netns; start_holder; done
  select_node 1
  start_control_plane
  start_forwarder
  write_kubeconfig "$state_dir/kubeconfig" "https://127.0.0.1:$forward_port" admin
  for ((i = 1; i <= node_count; i++)); do select_node "$i"; start_node_daemons; done
  local deadline=$((SECONDS + ready_timeout)) name
  for ((i = 1; i <= node_count; i++)); do
    select_node "$i"
    until node_ready "$node_name"; do
      for name in "containerd$sfx" "kubelet$sfx" "kube-proxy$sfx" kube-apiserver; do
        pid_alive "$state_dir/$name.pid" || fail_start "$name" "$name exited while node $node_name was coming up"
      done
      ((SECONDS < deadline)) || fail_start "kubelet$sfx" "node $node_name not Ready after ${ready_timeout}s"
      sleep 0.5
    done
  done
  select_node 1
  start_dns
  [[ "${NCCLGUARD_NODE_REGISTRY:-}" != 1 ]] || start_registry
  # Node 1's values under the names a single node always had; NODE_NAMES etc. list them all.
  cat >"$state_dir/node.env" <<ENV
KUBECONFIG=$state_dir/kubeconfig
BIN_DIR=$bin_dir
NETNS=$netns
NODE_NAME=$node_name
NODE_IP=$node_ip
POD_CIDR=$pod_cidr
SERVICE_CIDR=$service_cidr
DNS_IP=$dns_ip
TRAINING_OPERATOR_IMAGE=$training_operator_image
CONTAINERD_ADDRESS=$state_dir/containerd.sock
CGROUP=$cgroup_name
NODE_COUNT=$node_count
NODE_NAMES="$(node_names "$node_count")"
ENV
  trap - EXIT
  local ready="node $node_name"
  ((node_count == 1)) || ready="nodes $(node_names "$node_count")"
  log "$ready Ready, cluster DNS at $dns_ip, in $((SECONDS - begin))s; API server https://127.0.0.1:$forward_port"
  printf 'export KUBECONFIG=%q\n' "$state_dir/kubeconfig"
  # shellcheck disable=SC2016 # $PATH is expanded by the eval, not here
  printf 'export PATH=%q:"$PATH"\n' "$bin_dir"
}

# ---------------------------------------------------------------- stop

start_failed() {
  local rc=$?
  ((rc != 0)) || return 0
  log "start failed: stopping what it started (set NCCLGUARD_NODE_KEEP_LOGS=<dir> to keep the logs)"
  cmd_stop >&2 || true
  exit "$rc"
}

# Mounts of the host's mount namespace under the state dir (there should be none:
# the daemons mount in their own namespace).
host_mounts() {
  awk -v dir="$state_dir" '$5 == dir || index($5, dir "/") == 1 { print $5 }' /proc/self/mountinfo
}

# Every network namespace an instance of this state dir can have, whatever its node count.
all_netns() {
  local i
  printf '%s\n' "$netns"
  for ((i = 2; i <= max_nodes; i++)); do printf '%s\n' "$netns-$i"; done
  printf '%s\n' "$bridge_netns"
}

cleanup_leftovers() {
  local name i
  if [[ -d "$state_dir" ]]; then
    # Daemons first (the kubelets would restart containers), then whatever is
    # left in the instance's cgroup: containerd's shims and the containers.
    for name in kubelet kube-proxy kube-scheduler kube-controller-manager containerd registry forward kube-apiserver etcd; do
      stop_recorded "$state_dir/$name.pid" 50
      if [[ $name == kubelet || $name == kube-proxy || $name == containerd ]]; then
        for ((i = 2; i <= max_nodes; i++)); do stop_recorded "$state_dir/$name-$i.pid" 50; done
      fi
    done
  fi
  kill_cgroup_processes
  if [[ -d "$state_dir" ]]; then
    stop_recorded "$state_dir/holder.pid" 20
    for ((i = 2; i <= max_nodes; i++)); do stop_recorded "$state_dir/holder-$i.pid" 20; done
  fi
  remove_cgroups
  [[ ! -d "$state_dir" ]] || remove_created_host_paths
  # The node namespaces first (their end of each veth goes, and with it the bridge's end),
  # then the bridge's.
  while read -r name; do
    if netns_exists "$name"; then
      ip netns del "$name" || log "warning: could not delete network namespace $name"
    fi
  done < <(all_netns)
  local m
  while read -r m; do
    [[ -n "$m" ]] || continue
    umount -l "$m" 2>/dev/null || log "warning: could not unmount $m"
  done < <(host_mounts | sort -r)
  if [[ -d "$state_dir" ]]; then
    if [[ -n "${NCCLGUARD_NODE_KEEP_LOGS:-}" && -d "$state_dir/log" ]]; then
      mkdir -p "$NCCLGUARD_NODE_KEEP_LOGS" && cp -r "$state_dir/log/." "$NCCLGUARD_NODE_KEEP_LOGS/" || true
    fi
    [[ ! -f "$state_dir/$marker_file" ]] || rm -rf "$state_dir"
  fi
}

# What would be left behind; empty when every node is gone without a trace.
leftovers() {
  local h pids name
  pids="$(cgroup_pids | tr '\n' ' ')"
  [[ -z "${pids// /}" ]] || printf 'processes in cgroup %s: %s\n' "$cgroup_name" "$pids"
  while read -r h; do
    [[ ! -d "$h/$cgroup_name" ]] || printf 'cgroup %s\n' "$h/$cgroup_name"
  done < <(cgroup_hierarchies)
  while read -r name; do
    ! netns_exists "$name" || printf 'network namespace %s\n' "$name"
  done < <(all_netns)
  host_mounts | sed 's/^/mount /'
  [[ ! -d "$state_dir" ]] || printf 'state dir %s\n' "$state_dir"
}

cmd_stop() {
  if [[ -d "$state_dir" && ! -f "$state_dir/$marker_file" ]]; then
    rmdir "$state_dir" 2>/dev/null || die "$state_dir was not created by node.sh; not touching it"
  fi
  cleanup_leftovers
  local left; left="$(leftovers)"
  if [[ -n "$left" ]]; then
    log "error: left behind:"
    printf '%s\n' "$left" >&2
    return 1
  fi
  log "stopped; nothing left of $netns"
}

cmd_status() {
  local ok=0 i count
  if [[ -f "$state_dir/$marker_file" ]]; then
    count="$(recorded_node_count)"
    report_processes etcd kube-apiserver kube-controller-manager kube-scheduler forward || ok=1
    for ((i = 1; i <= count; i++)); do
      select_node "$i"
      log "node $node_name ($node_ip, network namespace $node_netns):"
      report_processes "holder$sfx" "containerd$sfx" "kubelet$sfx" "kube-proxy$sfx" || ok=1
      if ((ok == 0)) && node_ready "$node_name"; then
        log "node $node_name Ready"
      else
        log "node $node_name is not Ready"
        ok=1
      fi
    done
    select_node 1
    [[ ! -f "$state_dir/registry.pid" ]] || report_processes registry || ok=1
    ((ok != 0)) || log "$count node(s) Ready; KUBECONFIG=$state_dir/kubeconfig"
  else
    log "not running (no state in $state_dir)"
    ok=1
    local left; left="$(leftovers)"
    if [[ -n "$left" ]]; then
      log "left behind by an earlier run (scripts/node.sh stop removes it):"
      printf '%s\n' "$left" >&2
    fi
  fi
  return "$ok"
}

# Into every node's containerd: a pod may land on any of them.
cmd_import() {
  local archive="${1:-}" i count
  [[ -f "$archive" ]] || die "import: no such archive '$archive'"
  count="$(recorded_node_count)"
  for ((i = 1; i <= count; i++)); do
    select_node "$i"
    [[ -S "$node_dir/containerd.sock" ]] || die "no node $node_name runs in $state_dir"
    ctr --address "$node_dir/containerd.sock" -n k8s.io images import "$archive" >&2
  done
}

# ---------------------------------------------------------------- registry

# The registry's config: written here, nothing taken from the package's /etc/docker/registry. No
# auth, no debug or metrics listener, no notifications, no upload purging on a timer: one HTTP
# listener at $registry_addr in node 1's namespace, its blobs in the state dir.
write_registry_config() {
  mkdir -p "$state_dir/registry"
  cat >"$state_dir/config/registry.yml" <<YAML
version: 0.1
log:
  level: info
  formatter: text
storage:
  filesystem:
    rootdirectory: $state_dir/registry
  delete:
    enabled: true
  maintenance:
    uploadpurging:
      enabled: false
http:
  addr: $registry_addr
  headers:
    X-Content-Type-Options: [nosniff]
YAML
}

registry_probe() { in_node curl -fsS --max-time 2 -o /dev/null "http://$registry_addr/v2/"; }

start_registry() {
  local exe=/usr/bin/docker-registry rc
  [[ -x $exe ]] || exe="$(command -v docker-registry)" ||
    die "docker-registry not found (scripts/bootstrap.sh installs the node's packages)"
  select_node 1
  if pid_alive "$state_dir/registry.pid"; then
    log "registry already runs (pid $(recorded_pid "$state_dir/registry.pid")) at $registry_addr in $netns"
    return 0
  fi
  write_registry_config
  launch registry "$exe" serve "$state_dir/config/registry.yml"
  rc=0; wait_until registry "$ready_timeout" registry_probe || rc=$?
  started registry "$rc" "/v2/"
  log "registry $registry_host: $("$exe" --version | awk '{print $NF}') at http://$registry_addr in $netns (pid $(recorded_pid "$state_dir/registry.pid"), storage $state_dir/registry)"
}

# registry start|stop|status
cmd_registry() {
  [[ -f "$state_dir/$marker_file" && -f "$state_dir/holder.pid" ]] && pid_alive "$state_dir/holder.pid" ||
    die "no node runs in $state_dir"
  case "${1:-}" in
    start) start_registry ;;
    stop) stop_recorded "$state_dir/registry.pid" 50 ;;
    status) report_processes registry && registry_probe ;;
    *) die "usage: registry start|stop|status" ;;
  esac
}

# exec [--node I] <command...>
cmd_exec() {
  local i=1
  if [[ "${1:-}" == --node ]]; then
    i="${2:-}"
    shift 2 || die "exec --node needs a node number"
  fi
  [[ $i =~ ^[1-4]$ ]] && ((i <= $(recorded_node_count))) ||
    die "exec --node: no node '$i' (the nodes are 1 to $(recorded_node_count))"
  select_node "$i"
  [[ -f "$state_dir/holder$sfx.pid" ]] && pid_alive "$state_dir/holder$sfx.pid" || die "no node $node_name runs in $state_dir"
  in_node "$@"
}

main() {
  case "${1:-}" in
    build) cmd_build ;;
    start) cmd_start ;;
    stop) cmd_stop ;;
    status) cmd_status ;;
    import) shift; cmd_import "$@" ;;
    exec) shift; cmd_exec "$@" ;;
    registry) shift; cmd_registry "$@" ;;
    *) printf 'usage: %s build|start|stop|status|import <archive>|registry start|stop|status|exec [--node I] <command...>\n' "$0" >&2; exit 2 ;;
  esac
}

main "$@"; exit
