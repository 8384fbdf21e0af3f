#!/usr/bin/env bash
# A real Kubernetes control plane (etcd + kube-apiserver) for ncclguard's
# integration tests, plus kubectl and helm of pinned versions.
#
#   scripts/controlplane.sh build    build the binaries once per machine (cached)
#   scripts/controlplane.sh build node   also kubelet, kube-scheduler,
#                                    kube-controller-manager and kube-proxy (scripts/node.sh)
#   scripts/controlplane.sh build training   also the Kubeflow training operator and CoreDNS
#                                    (the node's training jobs and cluster DNS, issue 14)
#   scripts/controlplane.sh build kueue  also Kueue's manager (sigs.k8s.io/kueue/cmd/kueue)
#   scripts/controlplane.sh build trainer    also the JobSet controller and Kubeflow Trainer v2's
#                                    controller-manager (scripts/trainer.sh installs them)
#   scripts/controlplane.sh build kwok   kwok (sigs.k8s.io/kwok/cmd/kwok), the scale bench's simulated
#                                    nodes (scripts/kwok.sh); on demand only, not part of `all`
#   scripts/controlplane.sh build all    all of the above but kwok, in as few `go build`s as there are
#                                    modules (the fastest way from nothing: scripts/test.sh);
#                                    several groups may be named at once (`build node training`),
#                                    `controlplane` being the default group
#   scripts/controlplane.sh download Go's module downloads of every build, nothing compiled
#   scripts/controlplane.sh start    start etcd + kube-apiserver; stdout is eval-able
#   scripts/controlplane.sh stop     stop what start started, remove its state
#   scripts/controlplane.sh status   say whether it runs (exit 0) or not (exit 1)
#   scripts/controlplane.sh stop-apiserver | start-apiserver
#                                    stop / start kube-apiserver alone (etcd and the URL stay)
#   scripts/controlplane.sh stop-etcd | start-etcd
#                                    stop / start etcd alone (its data and ports stay)
#   scripts/controlplane.sh source-dir MODULE@VERSION
#                                    download MODULE@VERSION into the Go module cache (once) and
#                                    print its directory there: upstream CRDs and manifests are
#                                    read from it at build/test time, never copied into the repo
#
# Environment:
#   NCCLGUARD_CONTROLPLANE_CACHE   binary cache (default ~/.cache/ncclguard/controlplane/<k8s version>)
#   NCCLGUARD_CONTROLPLANE_DIR     state dir of one instance (default ${XDG_RUNTIME_DIR:-/tmp}/ncclguard-controlplane)
#   NCCLGUARD_CONTROLPLANE_READY_TIMEOUT  seconds to wait for /readyz (default 90)
#   NCCLGUARD_CONTROLPLANE_EXTRA_ETCD_ARGS, NCCLGUARD_CONTROLPLANE_EXTRA_APISERVER_ARGS
#                                  extra flags (word-split), used by tests to force failures
#   NCCLGUARD_CONTROLPLANE_PORTS   test-only: "etcd-client etcd-peer apiserver" first ports to try
# shellcheck source-path=SCRIPTDIR
set -euo pipefail

script_dir="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
modules_dir="$script_dir/controlplane"
# shellcheck source=controlplane/versions.sh
source "$modules_dir/versions.sh"
# shellcheck source=lib/procs.sh
source "$script_dir/lib/procs.sh"

cache_dir="${NCCLGUARD_CONTROLPLANE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/ncclguard/controlplane/$KUBERNETES_VERSION}"
bin_dir="$cache_dir/bin"
state_dir="${NCCLGUARD_CONTROLPLANE_DIR:-${XDG_RUNTIME_DIR:-/tmp}/ncclguard-controlplane}"

log() { printf 'controlplane: %s\n' "$*" >&2; }
die() { log "error: $*"; exit 1; }

# etcd 3.6.16 and helm 3.22 declare go 1.26 in their go.mod.
min_go_minor=26

find_go() {
  local go version minor
  if command -v go >/dev/null 2>&1; then
    go="$(command -v go)"
  elif [[ -x /usr/local/go/bin/go ]]; then
    go=/usr/local/go/bin/go
  else
    die "no Go toolchain: install Go >= 1.$min_go_minor or put it on PATH"
  fi
  version="$("$go" env GOVERSION)"
  minor="${version#go1.}"; minor="${minor%%.*}"
  if ! [[ "$minor" =~ ^[0-9]+$ ]] || ((minor < min_go_minor)); then
    die "$go is $version; the control plane modules need Go >= 1.$min_go_minor"
  fi
  printf '%s' "$go"
}

# ---------------------------------------------------------------- build

# Every binary, the module it is built from and its package there. All but the training
# operator and JobSet come from one module (scripts/controlplane/components), so a package they
# share is compiled once, and one `go build` of several of them keeps both cores busy. The jobset
# module requires the versions components has of what they share, so Go's build cache serves
# those packages to it too.
declare -A binary_module=() binary_package=()
while IFS='|' read -r b m p; do
  binary_module[$b]=$m
  binary_package[$b]=$p
done <<'EOF'
etcd|components|./cmd/etcd
kube-apiserver|components|./cmd/kube-apiserver
kubectl|components|./cmd/kubectl
helm|components|helm.sh/helm/v3/cmd/helm
kubelet|components|./cmd/kubelet
kube-scheduler|components|./cmd/kube-scheduler
kube-controller-manager|components|./cmd/kube-controller-manager
kube-proxy|components|./cmd/kube-proxy
coredns|components|./cmd/coredns
kueue|components|sigs.k8s.io/kueue/cmd/kueue
training-operator.v1|training|github.com/kubeflow/training-operator/cmd/training-operator.v1
trainer-controller-manager|components|github.com/kubeflow/trainer/v2/cmd/trainer-controller-manager
jobset|jobset|sigs.k8s.io/jobset
kwok|kwok|sigs.k8s.io/kwok/cmd/kwok
EOF

# The binaries of each argument of `build`.
binaries_of() {
  case "$1" in
    controlplane) echo etcd kube-apiserver kubectl helm ;;
    node) echo kubelet kube-scheduler kube-controller-manager kube-proxy ;;
    training) echo training-operator.v1 coredns ;;
    kueue) echo kueue ;;
    trainer) echo jobset trainer-controller-manager ;;
    kwok) echo kwok ;;
    # kwok is the scale bench's alone (no CI test runs it): `all` (scripts/test.sh's cold build)
    # leaves it out.
    all) local b; for b in "${!binary_module[@]}"; do [[ $b == kwok ]] || echo "$b"; done ;;
    *) die "build: unknown component '$1' (known: controlplane, node, training, kueue, trainer, kwok, all)" ;;
  esac
}

# Hash of everything that decides a module's binaries, so a stamp goes stale
# when sources, pinned versions, the Go toolchain or this script's flags change.
module_hash() {
  local module="$1" go="$2" on_demand='/^# On-demand modules/,/^# on-demand modules end$/d'
  # An on-demand module (kwok) hashes its own lines; the others hash what they hashed before it.
  [[ $module == kwok ]] && on_demand=''
  {
    "$go" version
    sed -e '/^# Modules whose files the tests only read/,/^# read-only modules end$/d' -e "$on_demand" \
      "$modules_dir/versions.sh"
    declare -f build_module module_ldflags
    (cd "$modules_dir/$module" && find . -type f \( -name '*.go' -o -name go.mod -o -name go.sum \) | LC_ALL=C sort |
      while read -r f; do printf '%s\n' "$f"; cat "$f"; done)
  } | sha256sum | cut -d' ' -f1
}

# Release time of a module version as the proxy reports it; used as buildDate
# so rebuilding the same pins yields the same version output.
release_time() {
  local go="$1" module="$2"
  (cd "$modules_dir/components" && "$go" mod download -json "$module" |
    sed -n 's/^[[:space:]]*"Time": "\(.*\)",\{0,1\}$/\1/p')
}

# The version stamps of a module's binaries, as their releases set them (kubelet reports its
# version in the Node's status, helm and etcd print theirs). -X of a package a binary does not
# link is ignored, so one set serves every binary of the module.
# kwok gets no version flags: its go.mod pins the version, and a kwok branch here would change
# every module's hash (and rebuild them all) for a binary only the scale bench uses.
module_ldflags() {
  local go="$1" module="$2" ldflags="-s -w"
  if [[ $module == components ]]; then
    local minor="${KUBERNETES_VERSION#v1.}"; minor="${minor%%.*}"
    local date pkg
    date="$(release_time "$go" "k8s.io/kubernetes@$KUBERNETES_VERSION")"
    for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
      ldflags+=" -X $pkg.gitVersion=$KUBERNETES_VERSION -X $pkg.gitMajor=1 -X $pkg.gitMinor=$minor"
      ldflags+=" -X $pkg.gitCommit=unknown -X $pkg.gitTreeState=clean -X $pkg.buildDate=$date"
    done
    ldflags+=" -X helm.sh/helm/v3/internal/version.version=$HELM_VERSION -X helm.sh/helm/v3/internal/version.gitTreeState=clean"
    ldflags+=" -X go.etcd.io/etcd/api/v3/version.GitSHA=$ETCD_VERSION"
  elif [[ $module == jobset ]]; then
    ldflags+=" -X sigs.k8s.io/jobset/pkg/version.GitVersion=$JOBSET_VERSION"
  fi
  printf '%s' "$ldflags"
}

# build_module <go> <module> <package>... : builds the module's packages in one `go build`
# into a temp dir, then moves them into $bin_dir so a killed build never leaves a binary that
# looks complete.
build_module() {
  local go="$1" module="$2"; shift 2
  local ldflags; ldflags="$(module_ldflags "$go" "$module")"
  local tmp; tmp="$(mktemp -d "$cache_dir/.build-$module.XXXXXX")"
  (cd "$modules_dir/$module" &&
    CGO_ENABLED=0 GOFLAGS="-mod=readonly -buildvcs=false" \
      "$go" build -trimpath -ldflags "$ldflags" -o "$tmp/" "$@") || { rm -rf "$tmp"; return 1; }
  local f
  for f in "$tmp"/*; do mv -f "$f" "$bin_dir/"; done
  rmdir "$tmp"
}

# cmd_build [GROUP...]: the binaries of the groups (controlplane, node, training, kueue, trainer,
# all);
# none: the control plane (etcd, kube-apiserver, kubectl, helm). A binary is rebuilt when it is
# missing or its stamp differs from its module's hash; what is missing of one module is built
# in one `go build`.
cmd_build() {
  local go group wanted=""; go="$(find_go)"
  (($#)) || set -- controlplane
  for group in "$@"; do wanted+=" $(binaries_of "$group")"; done
  mkdir -p "$bin_dir" "$cache_dir/stamps"
  # Several test binaries may call build at once; one builds, the others wait.
  exec 9>"$cache_dir/.build.lock"
  flock 9
  local module
  for module in components training jobset kwok; do
    local hash b stale=() packages=()
    hash="$(module_hash "$module" "$go")"
    for b in $wanted; do
      [[ ${binary_module[$b]} == "$module" ]] || continue
      if [[ -x "$bin_dir/$b" && -f "$cache_dir/stamps/$b" && "$(cat "$cache_dir/stamps/$b")" == "$hash" ]]; then
        log "$b: up to date"
      else
        stale+=("$b")
        packages+=("${binary_package[$b]}")
      fi
    done
    ((${#stale[@]})) || continue
    log "building ${stale[*]} (module scripts/controlplane/$module) ..."
    local start=$SECONDS
    build_module "$go" "$module" "${packages[@]}" || die "building ${stale[*]} failed (see the go output above)"
    for b in "${stale[@]}"; do printf '%s\n' "$hash" >"$cache_dir/stamps/$b"; done
    log "built ${stale[*]} in $((SECONDS - start))s"
  done
  log "binaries in $bin_dir"
}

# cmd_download: every module the builds need, into Go's module cache (network only, no
# compiling), so that scripts/test.sh can fetch them while other stages use the CPUs.
cmd_download() {
  local go module; go="$(find_go)"
  for module in components training jobset; do
    (cd "$modules_dir/$module" && GOFLAGS="-mod=readonly" "$go" mod download) ||
      die "download of scripts/controlplane/$module's modules failed"
  done
  # Modules whose files the tests read, not built: the PolicyReport CRD.
  cmd_source_dir "github.com/kyverno/kyverno@$KYVERNO_VERSION" >/dev/null
  log "modules of scripts/controlplane/{components,training,jobset} and kyverno $KYVERNO_VERSION downloaded"
}

# cmd_source_dir MODULE@VERSION: the module's read-only source tree in the Go
# module cache, downloaded through the module proxy on first use.
cmd_source_dir() {
  local spec="${1:-}" go dir
  [[ "$spec" == *@v* ]] || die "source-dir: want MODULE@VERSION (e.g. sigs.k8s.io/kueue@v0.17.0), got '$spec'"
  go="$(find_go)"
  dir="$(cd / && GOFLAGS=-mod=mod "$go" mod download -json "$spec" |
    sed -n 's/^[[:space:]]*"Dir": "\(.*\)",\{0,1\}$/\1/p')"
  [[ -n "$dir" && -d "$dir" ]] || die "source-dir: the Go module proxy did not give $spec"
  printf '%s\n' "$dir"
}

# ---------------------------------------------------------------- start/stop

marker_file=".ncclguard-controlplane"
ready_timeout="${NCCLGUARD_CONTROLPLANE_READY_TIMEOUT:-90}"

require_binaries() {
  local b
  for b in etcd kube-apiserver kubectl; do
    [[ -x "$bin_dir/$b" ]] || die "control plane not built: run scripts/controlplane.sh build (missing $bin_dir/$b)"
  done
  command -v openssl >/dev/null || die "openssl CLI not found (needed to generate the test PKI)"
  command -v curl >/dev/null || die "curl CLI not found (needed to probe readiness)"
}

any_alive() {
  local f
  for f in "$state_dir"/*.pid; do
    [[ -e "$f" ]] || continue
    pid_alive "$f" && return 0
  done
  return 1
}

# Makes $state_dir a fresh, empty instance dir. A dir left by a crashed run
# (marker present, no recorded process alive) is removed; a dir we did not
# create is never deleted.
prepare_state_dir() {
  if [[ -d "$state_dir" ]]; then
    if [[ ! -f "$state_dir/$marker_file" ]]; then
      [[ -z "$(ls -A "$state_dir")" ]] ||
        die "$state_dir exists and was not created by controlplane.sh; refusing to reuse it"
    elif any_alive; then
      die "a control plane already runs in $state_dir; run 'scripts/controlplane.sh stop' (same NCCLGUARD_CONTROLPLANE_DIR) first"
    else
      log "removing stale state from a previous run in $state_dir"
      rm -rf "$state_dir"
    fi
  fi
  mkdir -p "$state_dir/pki"
  chmod 700 "$state_dir"
  touch "$state_dir/$marker_file"
}

port_in_use() {
  local hex
  hex="$(printf ':%04X ' "$1")"
  cat /proc/net/tcp /proc/net/tcp6 2>/dev/null | awk '{print $2}' | grep -q -- "${hex% }\$"
}

# A random port below the kernel's ephemeral range (so outgoing connections
# do not take it between our check and the bind) that nothing listens on or
# uses. The bind can still race with another process; callers retry.
free_port() {
  local port i
  for ((i = 0; i < 200; i++)); do
    port=$((10000 + RANDOM % 22000))
    port_in_use "$port" || { printf '%s' "$port"; return 0; }
  done
  die "found no free TCP port on 127.0.0.1 after 200 tries"
}

log_tail() {
  local file="$1"
  log "---- last 40 lines of $file ----"
  tail -n 40 "$file" >&2 || true
  log "---- end of $file ----"
}

fail_start() {
  local component_log="$1"; shift
  log "error: $*"
  [[ -n "$component_log" && -f "$component_log" ]] && log_tail "$component_log"
  stop_recorded "$state_dir/kube-apiserver.pid"
  stop_recorded "$state_dir/etcd.pid"
  stop_recorded "$state_dir/watchdog.pid"
  log "logs kept in $state_dir (the next start cleans it up)"
  exit 1
}

generate_pki() {
  local pki="$state_dir/pki"
  log "generating CA, serving, admin and service-account keys in $pki"
  openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 3650 \
    -keyout "$pki/ca.key" -out "$pki/ca.crt" -subj "/CN=ncclguard-test-ca" \
    -addext "basicConstraints=critical,CA:TRUE" -addext "keyUsage=critical,keyCertSign,cRLSign" 2>/dev/null ||
    die "openssl: creating the CA failed"
  # leaf <name> <subject> <extensions>
  leaf() {
    if ! openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes \
      -keyout "$pki/$1.key" -out "$pki/$1.csr" -subj "$2" 2>/dev/null; then
      die "openssl: creating the $1 key failed"
    fi
    if ! openssl x509 -req -in "$pki/$1.csr" -CA "$pki/ca.crt" -CAkey "$pki/ca.key" -CAcreateserial \
      -days 3650 -out "$pki/$1.crt" -extfile <(printf '%s\n' "$3") 2>/dev/null; then
      die "openssl: signing the $1 certificate failed"
    fi
    rm -f "$pki/$1.csr"
  }
  leaf apiserver "/CN=kube-apiserver" \
    "$(printf '%s\n' 'basicConstraints=CA:FALSE' 'keyUsage=critical,digitalSignature,keyEncipherment' \
      'extendedKeyUsage=serverAuth' \
      'subjectAltName=IP:127.0.0.1,DNS:localhost,IP:10.0.0.1,DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc')"
  leaf admin "/O=system:masters/CN=ncclguard-admin" \
    "$(printf '%s\n' 'basicConstraints=CA:FALSE' 'keyUsage=critical,digitalSignature,keyEncipherment' 'extendedKeyUsage=clientAuth')"
  if ! { openssl genpkey -algorithm RSA -pkeyopt rsa_keygen_bits:2048 -out "$pki/sa.key" 2>/dev/null &&
    openssl pkey -in "$pki/sa.key" -pubout -out "$pki/sa.pub" 2>/dev/null; }; then
    die "openssl: creating the service-account key failed"
  fi
  chmod 600 "$pki"/*.key
}

write_kubeconfig() {
  local url="$1" pki="$state_dir/pki"
  cat >"$state_dir/kubeconfig" <<KUBECONFIG
apiVersion: v1
kind: Config
clusters:
- name: ncclguard-test
  cluster:
    server: $url
    certificate-authority: $pki/ca.crt
users:
- name: ncclguard-admin
  user:
    client-certificate: $pki/admin.crt
    client-key: $pki/admin.key
contexts:
- name: ncclguard-test
  context:
    cluster: ncclguard-test
    user: ncclguard-admin
current-context: ncclguard-test
KUBECONFIG
  chmod 600 "$state_dir/kubeconfig"
}

# launch <name> <args...>: starts $bin_dir/<name> in the background with its
# output in <name>.log and records its pid.
# Sets launch_log_offset to where this attempt's output starts in the log.
launch() {
  local name="$1"; shift
  local exe log="$state_dir/$name.log" pid i
  exe="$(readlink -f "$bin_dir/$name")"
  printf '==== %s %s\n' "$(date -u +%FT%TZ)" "$exe $*" >>"$log"
  launch_log_offset="$(stat -c %s "$log")"
  "$exe" "$@" </dev/null >>"$log" 2>&1 &
  pid=$!
  printf '%s %s\n' "$pid" "$exe" >"$state_dir/$name.pid"
  # Until it execs, the pid is a forked shell that pid_alive would take for a
  # dead server; wait for the exec (or for the fork to give up).
  for ((i = 0; i < 100; i++)); do
    [[ "$(readlink "/proc/$pid/exe" 2>/dev/null)" != "$exe" ]] || return 0
    sleep 0.01
  done
}

# Whether the last attempt (log output after launch_log_offset) lost a bind race.
bind_failed() { tail -c "+$((launch_log_offset + 1))" "$1" | grep -q 'address already in use'; }

# After wait_until returned `rc` for COMPONENT: 0 when it is up, 1 when its port
# was taken (the caller retries); any other failure stops the start.
started_or_retry() {
  local component="$1" rc="$2" component_log="$state_dir/$1.log"
  case $rc in
    0) return 0 ;;
    1) bind_failed "$component_log" && { log "$component could not bind (port taken), retrying"; return 1; }
      fail_start "$component_log" "$component exited during startup" ;;
    *) fail_start "$component_log" "$component not ready after ${ready_timeout}s" ;;
  esac
}

# Ports from NCCLGUARD_CONTROLPLANE_PORTS are tried as given (no free check),
# so a test can make the first bind fail and see start retry.
declare -a forced_ports=()
read -r -a forced_ports <<<"${NCCLGUARD_CONTROLPLANE_PORTS:-}"
pick_port() {
  local index="$1" attempt="$2"
  if ((attempt == 1)) && [[ "${forced_ports[$index]:-0}" != 0 ]]; then
    printf '%s' "${forced_ports[$index]}"
  else
    free_port
  fi
}

start_etcd() {
  local attempt client peer rc
  for ((attempt = 1; attempt <= 5; attempt++)); do
    client="$(pick_port 0 "$attempt")"
    peer="$(pick_port 1 "$attempt")"
    [[ $peer != "$client" ]] || peer="$(free_port)"
    log "starting etcd on 127.0.0.1:$client (peer $peer), attempt $attempt"
    stop_recorded "$state_dir/etcd.pid"
    rm -rf "$state_dir/etcd-data"
    launch_etcd "$client" "$peer"
    started_or_retry etcd "$rc" || continue
    etcd_url="http://127.0.0.1:$client"
    etcd_peer_url="http://127.0.0.1:$peer"
    return 0
  done
  fail_start "$state_dir/etcd.log" "etcd could not bind a port in 5 attempts"
}

# launch_etcd <client port> <peer port>: starts etcd on its data dir (kept if there: a restart
# keeps its data) and waits; sets rc like wait_until.
launch_etcd() {
  local client="$1" peer="$2" extra=()
  read -r -a extra <<<"${NCCLGUARD_CONTROLPLANE_EXTRA_ETCD_ARGS:-}"
  launch etcd --name=ncclguard-test --data-dir="$state_dir/etcd-data" \
    --listen-client-urls="http://127.0.0.1:$client" --advertise-client-urls="http://127.0.0.1:$client" \
    --listen-peer-urls="http://127.0.0.1:$peer" --initial-advertise-peer-urls="http://127.0.0.1:$peer" \
    --initial-cluster="ncclguard-test=http://127.0.0.1:$peer" --initial-cluster-state=new \
    --unsafe-no-fsync --log-level=warn "${extra[@]}"
  rc=0
  wait_until etcd "$ready_timeout" curl -fsS --max-time 2 "http://127.0.0.1:$client/health" || rc=$?
}

# launch_apiserver <port>: starts kube-apiserver on <port> against $etcd_url and waits;
# sets rc like wait_until.
launch_apiserver() {
  local port="$1" pki="$state_dir/pki" extra=()
  read -r -a extra <<<"${NCCLGUARD_CONTROLPLANE_EXTRA_APISERVER_ARGS:-}"
  stop_recorded "$state_dir/kube-apiserver.pid"
  # ServiceAccount admission is off because no controller-manager creates
  # token secrets; the endpoint reconciler is off because a loopback
  # advertise address is not a valid Endpoints IP.
  launch kube-apiserver \
    --etcd-servers="$etcd_url" \
    --secure-port="$port" --bind-address=127.0.0.1 --advertise-address=127.0.0.1 \
    --tls-cert-file="$pki/apiserver.crt" --tls-private-key-file="$pki/apiserver.key" \
    --client-ca-file="$pki/ca.crt" \
    --service-account-issuer=https://kubernetes.default.svc.cluster.local \
    --service-account-key-file="$pki/sa.pub" --service-account-signing-key-file="$pki/sa.key" \
    --service-cluster-ip-range=10.0.0.0/24 \
    --authorization-mode=RBAC \
    --disable-admission-plugins=ServiceAccount \
    --allow-privileged=true \
    --endpoint-reconciler-type=none \
    "${extra[@]}"
  rc=0
  wait_until kube-apiserver "$ready_timeout" curl -fsS --max-time 3 --cacert "$pki/ca.crt" \
    --cert "$pki/admin.crt" --key "$pki/admin.key" "https://127.0.0.1:$port/readyz" || rc=$?
}

start_apiserver() {
  local attempt port rc
  for ((attempt = 1; attempt <= 5; attempt++)); do
    port="$(pick_port 2 "$attempt")"
    log "starting kube-apiserver on https://127.0.0.1:$port, attempt $attempt"
    launch_apiserver "$port"
    started_or_retry kube-apiserver "$rc" || continue
    apiserver_url="https://127.0.0.1:$port"
    return 0
  done
  fail_start "$state_dir/kube-apiserver.log" "kube-apiserver could not bind a port in 5 attempts"
}

# Stops this instance when the owning process (a test binary) is gone, so a
# crashed test run does not leave an API server behind.
start_watchdog() {
  local owner="$1"
  kill -0 "$owner" 2>/dev/null || die "NCCLGUARD_CONTROLPLANE_OWNER_PID=$owner is not a running process"
  (
    trap '' INT HUP
    while kill -0 "$owner" 2>/dev/null && [[ -f "$state_dir/$marker_file" ]]; do sleep 1; done
    if [[ -f "$state_dir/$marker_file" ]]; then
      NCCLGUARD_CONTROLPLANE_WATCHDOG=1 NCCLGUARD_CONTROLPLANE_DIR="$state_dir" "$script_dir/controlplane.sh" stop
    fi
  ) </dev/null >>"$state_dir/watchdog.log" 2>&1 &
  printf '%s %s\n' "$!" "$(readlink "/proc/$!/exe")" >"$state_dir/watchdog.pid"
}

# Descriptors inherited from the caller (a test's listening socket, a pipe)
# would otherwise stay open for the servers' whole life.
close_inherited_fds() {
  local fd
  for fd in "/proc/$$/fd"/*; do
    fd="${fd##*/}"
    ((fd > 2 && fd != 255)) || continue # 255: bash reading this script
    eval "exec $fd>&-" 2>/dev/null || true
  done
}

cmd_start() {
  close_inherited_fds
  require_binaries
  prepare_state_dir
  # Before any server starts, so even a start that is killed midway is cleaned up.
  [[ -z "${NCCLGUARD_CONTROLPLANE_OWNER_PID:-}" ]] || start_watchdog "$NCCLGUARD_CONTROLPLANE_OWNER_PID"
  local begin=$SECONDS
  etcd_url="" etcd_peer_url="" apiserver_url=""
  generate_pki
  start_etcd
  start_apiserver
  write_kubeconfig "$apiserver_url"
  local pki="$state_dir/pki"
  # Everything a harness needs besides the eval lines, one KEY=value a line.
  cat >"$state_dir/controlplane.env" <<ENV
APISERVER_URL=$apiserver_url
ETCD_URL=$etcd_url
ETCD_PEER_URL=$etcd_peer_url
KUBECONFIG=$state_dir/kubeconfig
CA_FILE=$pki/ca.crt
ADMIN_CERT_FILE=$pki/admin.crt
ADMIN_KEY_FILE=$pki/admin.key
BIN_DIR=$bin_dir
ENV
  log "ready in $((SECONDS - begin))s: $apiserver_url (state in $state_dir)"
  printf 'export KUBECONFIG=%q\n' "$state_dir/kubeconfig"
  # shellcheck disable=SC2016 # $PATH is expanded by the eval, not here
  printf 'export PATH=%q:"$PATH"\n' "$bin_dir"
}

cmd_stop() {
  if [[ ! -d "$state_dir" ]]; then
    log "nothing to stop in $state_dir"
    return 0
  fi
  if [[ ! -f "$state_dir/$marker_file" ]]; then
    # An empty dir is what a harness hands to a start that failed early.
    rmdir "$state_dir" 2>/dev/null || die "$state_dir was not created by controlplane.sh; not touching it"
    return 0
  fi
  # The API server goes first so it does not log etcd connection errors.
  stop_recorded "$state_dir/kube-apiserver.pid"
  stop_recorded "$state_dir/etcd.pid"
  # When the watchdog itself runs stop, it is this process's parent and
  # exits on its own once the state dir is gone.
  [[ -n "${NCCLGUARD_CONTROLPLANE_WATCHDOG:-}" ]] || stop_recorded "$state_dir/watchdog.pid"
  rm -rf "$state_dir"
  log "stopped; removed $state_dir"
}

cmd_status() {
  if [[ ! -f "$state_dir/$marker_file" ]]; then
    log "not running (no state in $state_dir)"
    return 1
  fi
  local ok=0
  report_processes etcd kube-apiserver || ok=1
  if ((ok == 0)) && [[ -f "$state_dir/controlplane.env" ]]; then
    local url pki="$state_dir/pki"
    url="$(sed -n 's/^APISERVER_URL=//p' "$state_dir/controlplane.env")"
    if curl -fsS --max-time 5 --cacert "$pki/ca.crt" --cert "$pki/admin.crt" --key "$pki/admin.key" \
      "$url/readyz" >/dev/null 2>&1; then
      log "kube-apiserver ready at $url; KUBECONFIG=$state_dir/kubeconfig"
    else
      log "kube-apiserver at $url is not ready"
      ok=1
    fi
  fi
  return "$ok"
}

# Tests of clients that must survive an API server restart stop and start
# kube-apiserver alone: etcd and its data stay, the URL stays the same.
require_instance() {
  [[ -f "$state_dir/$marker_file" && -f "$state_dir/controlplane.env" ]] ||
    die "no control plane in $state_dir (run 'scripts/controlplane.sh start' first)"
}

cmd_stop_apiserver() {
  require_instance
  stop_recorded "$state_dir/kube-apiserver.pid"
}

cmd_start_apiserver() {
  require_instance
  pid_alive "$state_dir/kube-apiserver.pid" && die "kube-apiserver already runs in $state_dir"
  pid_alive "$state_dir/etcd.pid" || die "etcd is not running in $state_dir"
  local url port rc
  etcd_url="$(sed -n 's/^ETCD_URL=//p' "$state_dir/controlplane.env")"
  url="$(sed -n 's/^APISERVER_URL=//p' "$state_dir/controlplane.env")"
  port="${url##*:}"
  log "starting kube-apiserver again on $url"
  launch_apiserver "$port"
  case $rc in
    0) log "kube-apiserver ready again at $url" ;;
    1) log "error: kube-apiserver exited while starting (port $port taken?)"
      log_tail "$state_dir/kube-apiserver.log"; exit 1 ;;
    *) log "error: kube-apiserver not ready after ${ready_timeout}s"
      log_tail "$state_dir/kube-apiserver.log"; exit 1 ;;
  esac
}

# etcd alone, the same way: its data dir and both ports stay, so kube-apiserver (left running)
# reconnects to the same URL.
cmd_stop_etcd() {
  require_instance
  stop_recorded "$state_dir/etcd.pid"
}

cmd_start_etcd() {
  require_instance
  pid_alive "$state_dir/etcd.pid" && die "etcd already runs in $state_dir"
  local client peer rc
  client="$(sed -n 's/^ETCD_URL=//p' "$state_dir/controlplane.env")"
  peer="$(sed -n 's/^ETCD_PEER_URL=//p' "$state_dir/controlplane.env")"
  [[ -n $peer ]] || die "$state_dir/controlplane.env has no ETCD_PEER_URL (started by an older controlplane.sh)"
  log "starting etcd again on $client"
  launch_etcd "${client##*:}" "${peer##*:}"
  case $rc in
    0) log "etcd ready again at $client" ;;
    *) log "error: etcd did not start again (exit or timeout, rc $rc)"
      log_tail "$state_dir/etcd.log"; exit 1 ;;
  esac
}

main() {
  case "${1:-}" in
    build) shift; cmd_build "$@" ;;
    download) cmd_download ;;
    start) cmd_start ;;
    stop) cmd_stop ;;
    status) cmd_status ;;
    stop-apiserver) cmd_stop_apiserver ;;
    start-apiserver) cmd_start_apiserver ;;
    stop-etcd) cmd_stop_etcd ;;
    start-etcd) cmd_start_etcd ;;
    source-dir) cmd_source_dir "${2:-}" ;;
    *) printf 'usage: %s build [controlplane|node|training|kueue|trainer|kwok|all]...|download|start|stop|status|stop-apiserver|start-apiserver|stop-etcd|start-etcd|source-dir MODULE@VERSION\n' "$0" >&2; exit 2 ;;
  esac
}

# Read the whole file before running, so editing it under a running build is safe.
main "$@"; exit
