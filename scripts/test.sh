#!/usr/bin/env bash
# The test command of the README and of CI: installs what is missing, builds the control-plane
# binaries (cached outside the repo) and ncclguard, then runs every test with ctest: unit tests,
# and integration tests against a real kube-apiserver + etcd on 127.0.0.1.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${NCCLGUARD_BUILD_DIR:-$root/build}
export NCCLGUARD_BUILD_DIR=$build

"$root/scripts/bootstrap.sh"
"$root/scripts/controlplane.sh" build
"$root/scripts/build.sh"
cd "$build"
ctest --output-on-failure --timeout 900 "$@"
