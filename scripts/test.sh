#!/usr/bin/env bash
# The test command of the README and of CI: installs what is missing, builds the cluster's
# components (cached outside the repo) and ncclguard, then runs every test with ctest: unit
# tests, integration tests against a real kube-apiserver + etcd on 127.0.0.1, and the chart on a
# real node (tests/node, scripts/node.sh) where the host allows it.
#
# From nothing, the stages that need the network or the CPUs overlap: Go's module downloads run
# beside the apt packages, and the Go components (one `go build`, scripts/controlplane.sh build
# all) beside the C++ build. The run ends with a table of its stages and their times, also when
# it fails. Arguments are passed to ctest (e.g. `-L unit`, `-R controller`).
set -euo pipefail
# The whole script is one block, read before it runs: editing it during a run is safe.
{
root=$(cd "$(dirname "$0")/.." && pwd)
build=${NCCLGUARD_BUILD_DIR:-$root/build}
export NCCLGUARD_BUILD_DIR=$build

stage_names=() stage_seconds=() stage_results=()
run_start=$SECONDS
# record NAME SECONDS EXIT: one row of the table.
record() {
  stage_names+=("$1")
  stage_seconds+=("$2")
  if [[ $3 == 0 ]]; then stage_results+=(ok); else stage_results+=("failed (exit $3)"); fi
}
print_stages() {
  local i
  printf '\ntest.sh: stages (wall-clock; stages marked & ran beside the next ones)\n'
  printf '  %-50s %7s  %s\n' stage seconds result
  for i in "${!stage_names[@]}"; do
    printf '  %-50s %7s  %s\n' "${stage_names[$i]}" "${stage_seconds[$i]}" "${stage_results[$i]}"
  done
  printf '  %-50s %7s\n' total "$((SECONDS - run_start))"
}
# stage NAME COMMAND...: runs COMMAND in the foreground and records its time and result; a
# failure ends the run (after the table).
stage() {
  local name=$1 start=$SECONDS rc=0
  shift
  "$@" || rc=$?
  record "$name" "$((SECONDS - start))" "$rc"
  ((rc == 0)) || exit "$rc"
}

# Background stages: started with bg_start in a process group of their own (so that one can
# be stopped whole, its `go build` included), collected with bg_wait, which records the time
# the stage itself took (it writes it to a file when it ends).
declare -A bg_pid=() bg_file=()
bg_times=$(mktemp -d "${TMPDIR:-/tmp}/ncclguard-test-stages.XXXXXX")
bg_start() {
  local name=$1
  shift
  bg_file[$name]=$(mktemp "$bg_times/stage.XXXXXX")
  # shellcheck disable=SC2016 # expanded by the inner shell
  setsid bash -c 'rc=0; "${@:2}" || rc=$?; echo "$SECONDS" >"$1"; exit "$rc"' _ "${bg_file[$name]}" "$@" &
  bg_pid[$name]=$!
}
bg_wait() {
  local name=$1 rc=0 took
  wait "${bg_pid[$name]}" || rc=$?
  took=$(cat "${bg_file[$name]}" 2>/dev/null || echo "?")
  record "$name &" "$took" "$rc"
  unset "bg_pid[$name]"
  return "$rc"
}
# A failed foreground stage must not leave a background one running.
stop_background() {
  local name
  for name in "${!bg_pid[@]}"; do
    kill -- "-${bg_pid[$name]}" 2>/dev/null || true
    wait "${bg_pid[$name]}" 2>/dev/null || true
  done
}
trap 'stop_background; print_stages; rm -rf "$bg_times"' EXIT

can_run_node() { [[ $EUID == 0 ]] && unshare --net --mount true 2>/dev/null; }

# Go's module downloads need only Go and the network: beside the apt packages.
bg_start "Go module downloads" "$root/scripts/controlplane.sh" download
stage "apt packages and CUDA headers (bootstrap.sh)" "$root/scripts/bootstrap.sh"
bg_wait "Go module downloads" || exit 1

# The test node's Debian base images and the runtime stage of the ncclguard image need the
# network more than the CPUs (debootstrap, apt-get): beside the builds, where a node can run.
node=false
if can_run_node; then
  node=true
  bg_start "test node's base images (image.sh --prepare)" "$root/scripts/image.sh" --prepare
else
  echo "test.sh: this host cannot run the test node (needs root and namespaces): node_tests will be skipped" >&2
fi

# The Go components (kube-apiserver, etcd, kubectl, helm, the node's commands, CoreDNS, Kueue,
# the training operator) beside the C++ build: both keep the cores busy, and each waits on
# the other's links and downloads less than alone.
bg_start "Go components (controlplane.sh build all)" "$root/scripts/controlplane.sh" build all
stage "C++ build (build.sh)" "$root/scripts/build.sh"
bg_wait "Go components (controlplane.sh build all)" || exit 1

# The test node's images (pause, CoreDNS, training operator), where this host can run a node
# (root, network and mount namespaces); elsewhere node_tests skip with the reason.
if $node; then
  bg_wait "test node's base images (image.sh --prepare)" || exit 1
  stage "test node's images (node.sh build)" "$root/scripts/node.sh" build
fi

# The fuzzers' own build (clang, sanitizers: scripts/fuzz.sh) at the lowest priority beside
# the tests, most of which wait on servers more than they compute; fuzz_regression, later in
# the run, waits for it and finds its targets built.
fuzz_build=false
if [[ $# == 0 ]]; then
  fuzz_build=true
  bg_start "fuzzers' build (fuzz.sh --build, nice 19)" nice -n 19 env \
    NCCLGUARD_FUZZ_BUILD_DIR="$build-fuzz" "$root/scripts/fuzz.sh" --build
fi

# The tests wait on servers, kubelets and pods more than they compute: two run at once (the node
# tests one after the other, RESOURCE_LOCK ncclguard_node), NCCLGUARD_TEST_JOBS to change it.
cd "$build"
rc=0
ctest_start=$SECONDS
ctest --output-on-failure --timeout 900 -j "${NCCLGUARD_TEST_JOBS:-2}" "$@" || rc=$?
record "ctest" "$((SECONDS - ctest_start))" "$rc"
if $fuzz_build; then
  bg_wait "fuzzers' build (fuzz.sh --build, nice 19)" || true # a failure is fuzz_regression's
fi
if ((rc != 0)); then
  # The last lines of a CI log are often all that is kept: the table, then what failed.
  trap - EXIT
  print_stages
  rm -rf "$bg_times"
  # shellcheck source=lib/test-failures.sh
  source "$root/scripts/lib/test-failures.sh"
  echo "test.sh: ctest failed (exit $rc); the failed assertions:" >&2
  failed_assertions "$build" >&2
fi
exit "$rc"
}
