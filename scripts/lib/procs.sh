# Processes recorded in pid files, shared by scripts/controlplane.sh and scripts/node.sh.
# Sourced; the caller defines log() and $state_dir.
# shellcheck shell=bash disable=SC2154 # $state_dir is the caller's

# pid files hold "<pid> <executable>"; a pid only counts as ours while it
# still runs that executable, so a recycled pid is never signalled.
pid_alive() {
  local pidfile="$1" pid exe
  [[ -f "$pidfile" ]] || return 1
  read -r pid exe <"$pidfile" || return 1
  [[ -n "$pid" ]] && kill -0 "$pid" 2>/dev/null || return 1
  local running
  running="$(readlink "/proc/$pid/exe" 2>/dev/null)" || return 1
  # A rebuild replaces the binary under a running process: "<path> (deleted)".
  [[ -z "$exe" || "$running" == "$exe" || "$running" == "$exe (deleted)" ]]
}

recorded_pid() { local pid _; read -r pid _ <"$1"; printf '%s' "$pid"; }

# stop_recorded <pidfile> [tenths of a second]: ends one recorded process: TERM,
# then KILL after the grace period (default 10 s).
stop_recorded() {
  local pidfile="$1" grace="${2:-100}" name pid i
  name="$(basename "$pidfile" .pid)"
  pid_alive "$pidfile" || { rm -f "$pidfile"; return 0; }
  pid="$(recorded_pid "$pidfile")"
  log "stopping $name (pid $pid)"
  kill -TERM "$pid" 2>/dev/null || true
  for ((i = 0; i < grace; i++)); do
    pid_alive "$pidfile" || { rm -f "$pidfile"; return 0; }
    sleep 0.1
  done
  log "$name (pid $pid) ignored SIGTERM for $((grace / 10))s, sending SIGKILL"
  kill -KILL "$pid" 2>/dev/null || true
  rm -f "$pidfile"
}

# wait_until <name> <timeout> <probe command...>: 0 once the probe succeeds,
# 1 if the process recorded in $state_dir/<name>.pid died, 2 on timeout.
wait_until() {
  local name="$1" timeout="$2"; shift 2
  local deadline=$((SECONDS + timeout))
  while ((SECONDS < deadline)); do
    pid_alive "$state_dir/$name.pid" || return 1
    "$@" >/dev/null 2>&1 && return 0
    sleep 0.2
  done
  return 2
}

# report_processes <name...>: logs whether each recorded process runs; 1 when one does not.
report_processes() {
  local name ok=0
  for name in "$@"; do
    if pid_alive "$state_dir/$name.pid"; then
      log "$name: running (pid $(recorded_pid "$state_dir/$name.pid"))"
    else
      log "$name: not running"
      ok=1
    fi
  done
  return "$ok"
}
