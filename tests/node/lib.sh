# What the node tests share (sourced): whether this host can run a node (require_node_host), the
# test's work dir (start_work), PASS/FAIL lines that count failures, `eventually`, the cleanup
# that stops the node, and test images pushed to the node's registry (registry_push_build). The
# caller sets $root and $build first.
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

# ---------------------------------------------------------------- the node's registry
# scripts/node.sh registry start runs it: a real OCI registry (the CNCF distribution registry) at
# $registry_addr inside node 1's network namespace ($NETNS, from the node's node.env); the node's
# containerd pulls $registry_host/<path>:<tag> from it over plain HTTP.
# shellcheck disable=SC2034 # the callers read it
registry_host=registry.ncclguard.test:5000
registry_addr=127.0.0.1:5000

# registry_build <n>: the test image "build <n>", localhost/ncclguard-node/train:build-<n> in
# buildah's storage: FROM scratch, the node's pause program (scripts/node/pause.c, static: it runs
# until it is stopped) as its entrypoint /train, and /build-id holding <n>, so that each build has a
# digest of its own. Its timestamps are 0: a build is the same image whenever it is made. Cached in
# the node's image cache as an oci-archive (rebuilt when pause.c or this function changes), from
# which buildah's storage gets it back with the same digest.
registry_build() {
  local n="$1" cache="${XDG_CACHE_HOME:-$HOME/.cache}/ncclguard/images"
  local ref="localhost/ncclguard-node/train:build-$1" archive="$cache/train-build-$1.tar" hash tmp ctr rc=0
  hash="$({ cat "$root/scripts/node/pause.c"; declare -f registry_build; printf 'build %s\n' "$n"; } | sha256sum | cut -d' ' -f1)"
  if [[ -f "$archive" && "$(cat "$archive.stamp" 2>/dev/null)" == "$hash" ]]; then
    buildah inspect --type image "$ref" >/dev/null 2>&1 || buildah pull -q "oci-archive:$archive" >/dev/null || return 1
    return 0
  fi
  mkdir -p "$cache"
  tmp="$(mktemp -d)"
  {
    gcc -static -O2 -Wall -Wextra -Werror -o "$tmp/train" "$root/scripts/node/pause.c" &&
      printf '%s\n' "$n" >"$tmp/build-id" &&
      ctr="$(buildah from scratch)" &&
      buildah copy --chmod 0755 "$ctr" "$tmp/train" /train >/dev/null &&
      buildah copy --chmod 0644 "$ctr" "$tmp/build-id" /build-id >/dev/null &&
      buildah config --entrypoint '["/train"]' --label "test.ncclguard.io/build=$n" "$ctr" &&
      buildah commit -q --rm --timestamp 0 "$ctr" "$ref" >/dev/null &&
      rm -f "$archive.tmp" &&
      buildah push -q "$ref" "oci-archive:$archive.tmp:$ref" >/dev/null &&
      mv -f "$archive.tmp" "$archive" &&
      printf '%s\n' "$hash" >"$archive.stamp"
  } >&2 || rc=1
  rm -rf "$tmp"
  return "$rc"
}

# registry_push_build <n> <path:tag>: build <n> (registry_build) pushed to the node's registry as
# <path:tag> (e.g. ml/train:2.4: pods then name it $registry_host/ml/train:2.4), from inside the
# node's network namespace, as an OCI manifest; prints the digest pushed (sha256:<hex>).
registry_push_build() {
  local n="$1" dest="$2" digest_file
  registry_build "$n" || return 1
  digest_file="$(mktemp)"
  if ! nsenter --net="/run/netns/$NETNS" buildah push -q --format oci --tls-verify=false --digestfile "$digest_file" \
    "localhost/ncclguard-node/train:build-$n" "docker://$registry_addr/$dest" >&2; then
    rm -f "$digest_file"
    return 1
  fi
  printf '%s\n' "$(cat "$digest_file")"
  rm -f "$digest_file"
}

# registry_digest <path> <tag>: the digest the registry serves for <path>:<tag> (its
# Docker-Content-Digest), asked from inside the node's network namespace.
registry_digest() {
  nsenter --net="/run/netns/$NETNS" curl -fsSI --max-time 5 -H 'Accept: application/vnd.oci.image.manifest.v1+json' \
    -H 'Accept: application/vnd.docker.distribution.manifest.v2+json' "http://$registry_addr/v2/$1/manifests/$2" |
    tr -d '\r' | awk 'tolower($1) == "docker-content-digest:" {print $2}'
}
