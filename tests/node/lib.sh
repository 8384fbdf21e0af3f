# What the node tests share (sourced): whether this host can run a node (require_node_host), the
# test's work dir (start_work), PASS/FAIL lines that count failures, `eventually`, and the cleanup
# that stops the node. The caller sets $root and $build first.
# shellcheck shell=bash disable=SC2154 # root, work and begin are the caller's

pass() { printf 'PASS [%3ds]: %s\n' "$((SECONDS - begin))" "$*"; }
fail() { printf 'FAIL [%3ds]: %s\n' "$((SECONDS - begin))" "$*"; failures=$((failures + 1)); }

# eventually <seconds> <command...>: retries until it succeeds (a wait, not a timed assertion).
eventually() {
  local deadline=$((SECONDS + $1)); shift
  until "$@" >/dev/null 2>&1; do
    ((SECONDS < deadline)) || return 1
    sleep 1
  done
}

# stop_node <rc>: keeps the node's logs where NCCLGUARD_NODE_TEST_KEEP says, stops the node (what
# it leaves behind fails the test), removes $work and exits with rc.
stop_node() {
  local rc=$1
  set +e
  if [[ -n "${NCCLGUARD_NODE_TEST_KEEP:-}" && -d "$NCCLGUARD_NODE_DIR/log" ]]; then
    mkdir -p "$NCCLGUARD_NODE_TEST_KEEP" && cp -r "$NCCLGUARD_NODE_DIR/log/." "$NCCLGUARD_NODE_TEST_KEEP/"
  fi
  if ! "$root/scripts/node.sh" stop >"$work/stop.log" 2>&1; then
    cat "$work/stop.log"
    echo "FAIL: scripts/node.sh stop left something behind"
    rc=1
  fi
  rm -rf "$work"
  exit "$rc"
}

skip() { printf 'SKIP: %s\n' "$*"; exit 77; }

# require_node_host [BINARY...]: exits 77 (ctest: skipped), saying why, where this host cannot run
# a test node (not root, a package missing, no namespaces) or the node's binaries and BINARY... are
# not built; fails where the ncclguard binary is missing. Sets bin, the binary cache.
require_node_host() {
  local b
  ((EUID == 0)) || skip "the test node needs root (network namespaces, mounts, cgroups)"
  for b in containerd runc buildah ip iptables nsenter unshare openssl; do
    command -v "$b" >/dev/null || skip "$b not installed (scripts/bootstrap.sh installs the node's packages)"
  done
  unshare --net --mount true 2>/dev/null || skip "cannot create network and mount namespaces here"
  # shellcheck source=../../scripts/controlplane/versions.sh
  source "$root/scripts/controlplane/versions.sh"
  bin="${NCCLGUARD_CONTROLPLANE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/ncclguard/controlplane/$KUBERNETES_VERSION}/bin"
  for b in kubelet kube-proxy kube-scheduler kube-controller-manager kube-apiserver etcd kubectl helm coredns "$@"; do
    [[ -x "$bin/$b" ]] || skip "$bin/$b not built (scripts/node.sh build; scripts/test.sh does it)"
  done
  [[ -x "$build/cli/ncclguard" ]] || { echo "FAIL: no $build/cli/ncclguard (scripts/build.sh ncclguard)"; exit 1; }
}

# start_work <name>: a fresh $work dir (/tmp/ncclguard-<name>.XXXXXX) holding the node's state
# (NCCLGUARD_NODE_DIR); the PASS/FAIL count and clock start.
start_work() {
  work="$(mktemp -d "/tmp/ncclguard-$1.XXXXXX")"
  export NCCLGUARD_NODE_DIR="$work/node"
  failures=0
  begin=$SECONDS
}

# build_image: the ncclguard image of $build, built without a registry and imported into every
# node (scripts/image.sh); sets image to the chart's default reference.
build_image() {
  NCCLGUARD_IMAGE_ARCHIVE="$work/ncclguard.tar" "$root/scripts/image.sh" >"$work/image.log" 2>&1 ||
    { cat "$work/image.log"; echo "FAIL: scripts/image.sh"; exit 1; }
  local app_version
  app_version="$(sed -n 's/^appVersion: *"\{0,1\}\([^"]*\)"\{0,1\}$/\1/p' "$root/charts/ncclguard/Chart.yaml")"
  # shellcheck disable=SC2034 # the caller reads it
  image="ghcr.io/ncclguard/ncclguard:$app_version"
}
