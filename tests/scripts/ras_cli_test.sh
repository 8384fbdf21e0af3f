#!/usr/bin/env bash
# `ncclguard ras` against the RAS stand-in (tests/ras_standin: NCCL's RAS client protocol 2 as
# NCCL's src/ras/client_support.cc defines it; a stand-in, since no GPU is here) on 127.0.0.1:
#   1. a healthy 2.28 job over JSON, and the same in text (--text): exit 0, Healthy
#   2. one rank's process dead: exit 1, ProcessDead naming rank, GPU, PID and address
#   3. the same counts read twice (--count 2): CollectiveStuck; counts that move: a straggler
#   4. --raw saved twice, then `ncclguard diagnose` of the file: ras-collective-stuck, exit 1
#   5. a 2.26 server (no JSON): asked for JSON, answered in text on the same connection
#   6. a silent server: exit 2 after --timeout; nothing listening: exit 2
#   tests/scripts/ras_cli_test.sh NCCLGUARD_BINARY STANDIN_BINARY
set -euo pipefail
ncclguard=${1:?usage: $0 NCCLGUARD_BINARY STANDIN_BINARY}
standin=${2:?usage: $0 NCCLGUARD_BINARY STANDIN_BINARY}
work=$(mktemp -d)
server=""
stop() { [[ -z $server ]] || { kill "$server" 2>/dev/null || true; wait "$server" 2>/dev/null || true; }; }
trap 'stop; rm -rf "$work"' EXIT
failures=0
pass() { printf 'ok    %s\n' "$*"; }
fail() { printf 'FAIL  %s\n' "$*"; failures=$((failures + 1)); }

# scenario <version> <state>: 4 ranks on two addresses; dead: rank 3's process; behind N: rank 3
# at AllReduce N (the others at 500).
scenario() {
  local dead=false behind=500 r ranks=""
  [[ $2 == dead ]] && dead=true
  [[ $2 == behind* ]] && behind=${2#behind }
  for r in 0 1 2 3; do
    ranks+="${ranks:+,}{\"rank\":$r,\"gpu\":$r,\"pid\":$((100 + r)),\"node\":\"10.1.0.$((r < 2 ? 6 : 7))\",\"counts\":[0,0,0,0,$([[ $r == 3 ]] && echo "$behind" || echo 500)],\"dead\":$([[ $r == 3 ]] && echo $dead || echo false)}"
  done
  printf '{"version":"%s","silent":%s,"comms":[{"hash":"0x27a079b828ff1a75","ranks":[%s]}]}\n' \
    "$1" "$([[ $2 == silent ]] && echo true || echo false)" "$ranks" >"$work/scenario.json.new"
  mv "$work/scenario.json.new" "$work/scenario.json"
}
serve() { # the stand-in on a free port of 127.0.0.1; sets port
  stop
  "$standin" --scenario "$work/scenario.json" --port 0 2>"$work/standin.log" &
  server=$!
  port=""
  for _ in $(seq 50); do
    port=$(grep -o 'listening on 127.0.0.1:[0-9]*' "$work/standin.log" | grep -o '[0-9]*$' || true)
    [[ -n $port ]] && break
    sleep 0.1
  done
  [[ -n $port ]] || { cat "$work/standin.log"; echo "the stand-in did not listen" >&2; exit 1; }
}
ras() { # ras <args>: sets rc and out
  rc=0
  out=$("$ncclguard" ras --address "127.0.0.1:$port" "$@" 2>&1) || rc=$?
}

scenario 2.28 healthy
serve
ras -o json
if [[ $rc == 0 && $out == *'"health": "Healthy"'* && $out == *'"format": "json"'* ]]; then
  pass "healthy over JSON: exit 0"
else
  fail "healthy over JSON: exit $rc: $out"
fi
ras --text
[[ $rc == 0 && $out == *"(text, "*"Healthy: "* ]] && pass "healthy in text: $out" || fail "healthy in text: exit $rc: $out"

scenario 2.28 dead
ras
[[ $rc == 1 && $out == *"ProcessDead: "*"rank 3 (GPU 3, PID 103, 10.1.0.7)"* ]] &&
  pass "a dead process: exit 1: $out" || fail "a dead process: exit $rc: $out"

scenario 2.28 "behind 499"
ras --count 2 --every 1s
[[ $rc == 1 && $out == *"CollectiveStuck: AllReduce of communicator 27a079b828ff1a75"*"rank 3 (GPU 3, PID 103, 10.1.0.7)"* ]] &&
  pass "the same counts twice: exit 1: $(tail -n1 <<<"$out")" || fail "stuck: exit $rc: $out"
scenario 2.28 "behind 480"
(sleep 0.5 && scenario 2.28 "behind 490") &
mover=$!
ras --count 2 --every 1s --text
wait "$mover"
[[ $rc == 0 && $out == *"moved since the previous report (a straggler, not a hang)"* ]] &&
  pass "counts that move: a straggler, exit 0" || fail "straggler: exit $rc: $out"

scenario 2.28 "behind 497"
rc=0
{ "$ncclguard" ras --address "127.0.0.1:$port" --raw --text && "$ncclguard" ras --address "127.0.0.1:$port" --raw; } >"$work/saved.txt" || rc=$?
drc=0
"$ncclguard" diagnose "$work/saved.txt" >"$work/diagnose.txt" || drc=$?
if [[ $rc == 0 && $drc == 1 ]] && grep -q 'ras-collective-stuck' "$work/diagnose.txt"; then
  pass "--raw twice (text, then JSON), diagnose: $(grep -m1 ras-collective-stuck "$work/diagnose.txt" | cut -c1-160)"
else
  fail "--raw and diagnose: ras exit $rc, diagnose exit $drc: $(cat "$work/diagnose.txt")"
fi

scenario 2.26 healthy
ras -o json
[[ $rc == 0 && $out == *'"format": "text"'* && $out == *'"ncclVersion": "2.26.5"'* ]] &&
  pass "a 2.26 server refuses SET FORMAT json: read in text" || fail "2.26 server: exit $rc: $out"

scenario 2.28 silent
ras --timeout 2s
[[ $rc == 2 && $out == *"TimedOut"* ]] && pass "a silent server: exit 2: $out" || fail "silent: exit $rc: $out"
stop
server=""
ras
[[ $rc == 2 && $out == *"Refused"* ]] && pass "nothing listening: exit 2: $out" || fail "refused: exit $rc: $out"

((failures == 0)) && echo "ras_cli_test: all passed" || { echo "ras_cli_test: $failures failed"; exit 1; }
