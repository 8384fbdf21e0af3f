# What the node tests share (sourced): PASS/FAIL lines that count failures, `eventually`, and
# the cleanup that stops the node. The caller sets $root, $work, NCCLGUARD_NODE_DIR, failures=0
# and begin=$SECONDS.
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
