#!/usr/bin/env bash
# Times the README's two commands from nothing, as on a fresh machine: a clone of HEAD in a
# temporary folder with every cache the project fills pointed at empty folders there (Go's
# module and build caches, the components' binaries, the CUDA headers, the images and buildah's
# storage, ccache). Only the Debian packages stay installed (scripts/bootstrap.sh's first run on
# a fresh machine: BENCHMARKS.md, "From nothing").
#
#   bench/cold.sh test   CI=true .ci/run (scripts/test.sh): prints its table of stages and the
#                        whole time
#   bench/cold.sh demo   scripts/demo.sh: the time until its first step ("== 1.") is printed,
#                        then the demo runs to its end
#
# Root (the test node, buildah). Everything it makes is removed at the end; nothing of the
# caches outside the temporary folder is read or changed.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
what=${1:-}
[[ $what == test || $what == demo ]] || { echo "usage: $0 test|demo" >&2; exit 2; }

tmp=$(mktemp -d "${TMPDIR:-/var/tmp}/ncclguard-cold.XXXXXX")
cleanup() {
  chmod -R u+w "$tmp" 2>/dev/null || true # Go's module cache is read-only
  rm -rf "$tmp"
}
trap cleanup EXIT

git clone -q "$root" "$tmp/src"
mkdir -p "$tmp/gomod" "$tmp/gocache" "$tmp/xdg" "$tmp/containers"
cat >"$tmp/storage.conf" <<EOF
[storage]
driver = "overlay"
graphroot = "$tmp/containers/storage"
runroot = "$tmp/containers/run"
EOF
export GOMODCACHE=$tmp/gomod GOCACHE=$tmp/gocache XDG_CACHE_HOME=$tmp/xdg
export CONTAINERS_STORAGE_CONF=$tmp/storage.conf CCACHE_DIR=$tmp/xdg/ccache

start=$(date +%s)
cd "$tmp/src"
case $what in
  test)
    rc=0
    CI=true bash .ci/run || rc=$?
    echo "cold .ci/run (scripts/test.sh): $(($(date +%s) - start)) s, exit $rc"
    exit "$rc"
    ;;
  demo)
    first=""
    while IFS= read -r line; do
      printf '%s\n' "$line"
      if [[ -z $first && $line == *"== 1."* ]]; then
        first=$(($(date +%s) - start))
        echo "cold scripts/demo.sh: first step after $first s"
      fi
    done < <(scripts/demo.sh 2>&1)
    echo "cold scripts/demo.sh: first step after ${first:-never} s, whole demo $(($(date +%s) - start)) s"
    [[ -n $first ]]
    ;;
esac
