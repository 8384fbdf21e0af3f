#!/usr/bin/env bash
# The test command of the README and of CI: installs what is missing, builds the control-plane
# binaries (cached outside the repo) and ncclguard, then runs every test with ctest: unit tests,
# integration tests against a real kube-apiserver + etcd on 127.0.0.1, and the chart on a real
# node (tests/node, scripts/node.sh) where the host allows it.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${NCCLGUARD_BUILD_DIR:-$root/build}
export NCCLGUARD_BUILD_DIR=$build

"$root/scripts/bootstrap.sh"
"$root/scripts/controlplane.sh" build
# Kueue's manager for kueue_tests (ctest label kueue); where it cannot be built they skip.
"$root/scripts/controlplane.sh" build kueue ||
  echo "test.sh: Kueue could not be built: kueue_tests will be skipped" >&2
# The test node's binaries and pause image (ctest label node), where this host can run a node
# (root, network and mount namespaces); elsewhere node_tests skip with the reason.
if [[ $EUID == 0 ]] && unshare --net --mount true 2>/dev/null; then
  "$root/scripts/node.sh" build
else
  echo "test.sh: this host cannot run the test node (needs root and namespaces): node_tests will be skipped" >&2
fi
"$root/scripts/build.sh"
cd "$build"
rc=0
ctest --output-on-failure --timeout 900 "$@" || rc=$?
if ((rc != 0)); then
  # The last lines of a CI log are often all that is kept: say there what failed.
  # shellcheck source=lib/test-failures.sh
  source "$root/scripts/lib/test-failures.sh"
  echo "test.sh: ctest failed (exit $rc); the failed assertions:" >&2
  failed_assertions "$build" >&2
fi
exit "$rc"
