#!/usr/bin/env bash
# Builds the ncclguard image without any registry and, when a test node runs
# (scripts/node.sh), imports it into the node's containerd under the chart's default
# reference, ghcr.io/ncclguard/ncclguard:<appVersion>, so that a plain
#   helm install ncclguard charts/ncclguard -n ncclguard-system --create-namespace
# runs it with no overrides.
#
#   scripts/image.sh            the Dockerfile's runtime stage (`--target runtime`) around the
#                               ncclguard binary built on this machine (scripts/build.sh):
#                               seconds once the base layers are cached
#   scripts/image.sh --full     the whole Dockerfile, compiling ncclguard inside the build
#                               stage, as `docker build .` does (minutes)
#   scripts/image.sh --prepare  only what needs no ncclguard binary: the Debian base images and
#                               the runtime stage's layers (network-bound, minutes the first
#                               time), so that scripts/test.sh can make them while it compiles
#
# The Debian base images the Dockerfile starts from (debian:bookworm, debian:bookworm-slim)
# are made here with debootstrap from the Debian mirror and cached; the Debian mirror (and,
# for --full, PyPI for the CUDA headers) is all the build reaches.
#
# Environment:
#   NCCLGUARD_BUILD_DIR     the build dir holding cli/ncclguard (default build/)
#   NCCLGUARD_IMAGE_ARCHIVE where to write the image as a docker-archive
#                           (default ~/.cache/ncclguard/images/ncclguard-<appVersion>.tar)
#   NCCLGUARD_NODE_DIR      the node to import into (see scripts/node.sh); no node: no import
set -euo pipefail

script_dir="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$script_dir/.." && pwd)"
cache="${XDG_CACHE_HOME:-$HOME/.cache}/ncclguard/images"

log() { printf 'image: %s\n' "$*" >&2; }
die() { log "error: $*"; exit 1; }

full=0 prepare=0
case "${1:-}" in
  "") ;;
  --full) full=1 ;;
  --prepare) prepare=1 ;;
  *) printf 'usage: %s [--full|--prepare]\n' "$0" >&2; exit 2 ;;
esac

command -v buildah >/dev/null || die "buildah not found (scripts/bootstrap.sh installs it)"
app_version="$(sed -n 's/^appVersion: *"\{0,1\}\([^"]*\)"\{0,1\}$/\1/p' "$repo/charts/ncclguard/Chart.yaml")"
[[ -n "$app_version" ]] || die "no appVersion in charts/ncclguard/Chart.yaml"
repository="$(sed -n 's/^  repository: *//p' "$repo/charts/ncclguard/values.yaml" | head -n1)"
[[ -n "$repository" ]] || die "no image.repository in charts/ncclguard/values.yaml"
reference="$repository:$app_version"
archive="${NCCLGUARD_IMAGE_ARCHIVE:-$cache/ncclguard-$app_version.tar}"
mkdir -p "$cache"

# bud <args...>: buildah build with what every build here needs: only local base
# images, layers cached between builds, chroot isolation (no network namespace, no
# runtime; RUN steps reach the Debian mirror through the host's network).
bud() {
  buildah bud --pull=never --layers --isolation=chroot --ulimit nofile=1024:1024 "$@"
}

# The Debian 12 base images, debootstrapped once (minbase: what the slim image holds).
ensure_base() {
  if buildah inspect --type image docker.io/library/debian:bookworm >/dev/null 2>&1 &&
    buildah inspect --type image docker.io/library/debian:bookworm-slim >/dev/null 2>&1; then
    return 0
  fi
  local rootfs_tar="$cache/debian-bookworm-minbase.tar"
  if [[ ! -f "$rootfs_tar" ]]; then
    command -v debootstrap >/dev/null || die "debootstrap not found (scripts/bootstrap.sh installs it)"
    local tmp; tmp="$(mktemp -d)"
    log "debootstrap of Debian 12 (bookworm, minbase) into $tmp ..."
    local start=$SECONDS
    debootstrap --variant=minbase bookworm "$tmp/rootfs" http://deb.debian.org/debian >"$tmp/debootstrap.log" 2>&1 ||
      { tail -n 20 "$tmp/debootstrap.log" >&2; rm -rf "$tmp"; die "debootstrap failed"; }
    rm -rf "$tmp/rootfs/var/cache/apt/archives/"*.deb "$tmp/rootfs/var/lib/apt/lists/"*
    tar -C "$tmp/rootfs" --numeric-owner -cf "$rootfs_tar.tmp" .
    mv -f "$rootfs_tar.tmp" "$rootfs_tar"
    rm -rf "$tmp"
    log "base root filesystem in $((SECONDS - start))s: $rootfs_tar"
  fi
  local ctr
  ctr="$(buildah from scratch)"
  buildah add "$ctr" "$rootfs_tar" / >/dev/null
  buildah config --cmd '["bash"]' --env PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
    --label org.ncclguard.base=debootstrap-bookworm-minbase "$ctr"
  buildah commit -q --rm "$ctr" docker.io/library/debian:bookworm >/dev/null
  buildah tag docker.io/library/debian:bookworm docker.io/library/debian:bookworm-slim
  log "base images docker.io/library/debian:bookworm and :bookworm-slim (debootstrap, local)"
}

# The Dockerfile's runtime stage (Debian and the shared libraries ncclguard links); its layers
# are cached, so a second build of it takes seconds.
build_runtime_stage() {
  bud --target runtime -t localhost/ncclguard-runtime:latest -f "$repo/Dockerfile" "$repo" >&2
}

build_runtime_only() {
  local build_dir="${NCCLGUARD_BUILD_DIR:-$repo/build}"
  local binary="$build_dir/cli/ncclguard"
  [[ -x "$binary" ]] || die "no $binary: build it first (NCCLGUARD_BUILD_DIR=$build_dir scripts/build.sh ncclguard)"
  build_runtime_stage
  local tmp ctr
  tmp="$(mktemp -d)"
  strip --strip-debug -o "$tmp/ncclguard" "$binary"
  ctr="$(buildah from --pull=never localhost/ncclguard-runtime:latest)"
  buildah copy --chmod 0755 "$ctr" "$tmp/ncclguard" /usr/local/bin/ncclguard >/dev/null
  rm -rf "$tmp"
  # The Dockerfile's last stage checks the same.
  buildah run --isolation=chroot "$ctr" sh -c \
    "! ldd /usr/local/bin/ncclguard | grep 'not found' && /usr/local/bin/ncclguard --help >/dev/null" ||
    { buildah rm "$ctr" >/dev/null; die "the binary does not run in the runtime image (library missing?)"; }
  buildah commit -q --rm "$ctr" "$reference" >/dev/null
}

start=$SECONDS
ensure_base
if ((prepare)); then
  build_runtime_stage
  log "base images and the runtime stage ready in $((SECONDS - start))s"
  exit 0
fi
if ((full)); then
  log "building $reference from the whole Dockerfile (compiles ncclguard) ..."
  bud -t "$reference" -f "$repo/Dockerfile" "$repo" >&2
else
  log "building $reference: the runtime stage around the host-built binary ..."
  build_runtime_only
fi
rm -f "$archive.tmp"
buildah push -q "$reference" "docker-archive:$archive.tmp:$reference" >/dev/null
mv -f "$archive" "$archive.old" 2>/dev/null || true
mv -f "$archive.tmp" "$archive"
rm -f "$archive.old"
log "built $reference in $((SECONDS - start))s: $archive"

if "$script_dir/node.sh" status >/dev/null 2>&1; then
  "$script_dir/node.sh" import "$archive"
  log "imported $reference into the node's containerd (namespace k8s.io)"
else
  log "no test node runs: not imported (scripts/node.sh start, then scripts/node.sh import $archive)"
fi
