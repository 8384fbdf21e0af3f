#!/usr/bin/env bash
# Installs every build and test dependency of ncclguard from Debian's packages. Idempotent: a
# package already installed is not fetched again. Needs root (or sudo) for apt.
set -euo pipefail

# Go (>= 1.26, for the control-plane build in scripts/controlplane.sh) is not installed here:
# Debian 12's golang-go is 1.19, too old; the machine image's Go (/usr/local/go) is used.

packages=(
  build-essential cmake ninja-build pkg-config clang-format git ca-certificates curl openssl python3 python3-pip
  nlohmann-json3-dev libyaml-cpp-dev libspdlog-dev libfmt-dev libcli11-dev
  libgtest-dev libgmock-dev libssl-dev libcurl4-openssl-dev libcpprest-dev libboost-dev
  libfabric-dev libfabric-bin libjemalloc-dev prometheus-cpp-dev
)
# The test node (scripts/node.sh, scripts/image.sh): container runtime, CNI plugins, image
# build without a registry. Left out with --no-node (the Dockerfile's build stage). nftables:
# the nft program, for host-firewall's native nft case (tests/scripts/host_firewall_test.sh).
# docker-registry: the CNCF distribution registry (2.8), which `scripts/node.sh registry start`
# runs inside the node's network namespace for the image-pin test; the package's own service
# (a registry on :5000 of every interface) is masked and never runs (quiet_registry_service).
node_packages=(
  containerd runc containernetworking-plugins iptables nftables conntrack buildah debootstrap
  docker-registry
)
# The fuzzers (scripts/fuzz.sh, ctest label fuzz): clang with libFuzzer and the sanitizers.
fuzz_packages=(clang-14 libclang-rt-14-dev)
# The real Prometheus server and promtool the metrics tests run (alert rules, dashboard queries,
# the node's scrape); the package's service is never started (no init system runs it here).
# gnuplot-nox draws the dashboard's picture (scripts/render-dashboard.py): with the packages
# above installed it adds 17 (gnuplot, Lua, libgd and its image codecs: 9 MB to fetch, 40 MB
# installed, about 5 s; python3-matplotlib would add 61 and 65 MB). python3-yaml reads the rules
# and their tests (tests/metrics/check_rules.py).
metrics_packages=(prometheus gnuplot-nox python3-yaml)
case "${1:-}" in
  "") packages+=("${node_packages[@]}" "${fuzz_packages[@]}" "${metrics_packages[@]}") ;;
  --no-node) ;;
  --node-only) packages=("${node_packages[@]}") ;;
  *) echo "usage: $0 [--no-node|--node-only]" >&2; exit 2 ;;
esac

installed() { dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -q "install ok installed"; }
missing=()
for p in "${packages[@]}"; do
  installed "$p" || missing+=("$p")
done

sudo_cmd=()
if [ "$(id -u)" -ne 0 ]; then sudo_cmd=(sudo); fi

# docker-registry's package enables its service (a registry on :5000 of every interface, with the
# package's config) and starts it where systemd or a SysV init runs. The tests run their own, in a
# network namespace; this host's is masked before the package is installed (the mask is the
# admin's: the package's postinst does not lift it), so it is never started, now or at boot, and
# one an init system started anyway is stopped and disabled.
registry_unit=/etc/systemd/system/docker-registry.service
quiet_registry_service() {
  if [ "$(readlink "$registry_unit" 2>/dev/null)" != /dev/null ]; then
    "${sudo_cmd[@]}" mkdir -p "$(dirname "$registry_unit")"
    "${sudo_cmd[@]}" ln -sfn /dev/null "$registry_unit"
    if [ -d /run/systemd/system ]; then "${sudo_cmd[@]}" systemctl daemon-reload; fi
  fi
  if [ -d /run/systemd/system ] && systemctl is-active --quiet docker-registry.service; then
    "${sudo_cmd[@]}" systemctl stop docker-registry.service
  fi
  if [ -x /etc/init.d/docker-registry ] && /etc/init.d/docker-registry status >/dev/null 2>&1; then
    "${sudo_cmd[@]}" /etc/init.d/docker-registry stop >&2 || true
  fi
  if ls /etc/rc[2345].d/S*docker-registry >/dev/null 2>&1; then
    "${sudo_cmd[@]}" update-rc.d docker-registry disable >/dev/null 2>&1 || true
  fi
}
case " ${packages[*]} " in *" docker-registry "*) quiet_registry_service ;; esac

# The CUDA headers the probe compiles against come from NVIDIA's PyPI wheels, not apt.
fetch_cuda_headers() { "$(dirname "$0")/cuda-headers.sh" >/dev/null; }

if [ "${#missing[@]}" -eq 0 ]; then
  echo "bootstrap: all ${#packages[@]} packages present" >&2
  [ "${1:-}" = --node-only ] || fetch_cuda_headers
  exit 0
fi

echo "bootstrap: installing ${missing[*]}" >&2
"${sudo_cmd[@]}" apt-get update -qq >&2
DEBIAN_FRONTEND=noninteractive "${sudo_cmd[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}" >&2
case " ${packages[*]} " in *" docker-registry "*) quiet_registry_service ;; esac
[ "${1:-}" = --node-only ] || fetch_cuda_headers
echo "bootstrap: done" >&2
