#!/usr/bin/env bash
# `ncclguard peer` against real netfilter rules: in a network namespace of its own (unshare
# --net: its loopback the only interface, so no packet leaves), one port's new connections are
# dropped (iptables -j DROP on SYNs, as a host firewall does) and another's rejected with a TCP
# reset, a third left open; `peer serve` serves all three, `peer test` must say timed-out,
# refused and passed. The rules live and end with the namespace. Skipped (77) without root or
# namespaces.
#   tests/scripts/peer_firewall_test.sh NCCLGUARD_BINARY
set -euo pipefail
ncclguard=${1:?usage: $0 NCCLGUARD_BINARY}
if [[ $EUID != 0 ]] || ! unshare --net true 2>/dev/null || ! command -v iptables >/dev/null; then
  echo "peer_firewall_test: skipped: needs root, network namespaces and iptables" >&2
  exit 77
fi
# shellcheck disable=SC2016 # expanded by the inner shell
exec unshare --net bash -euo pipefail -c '
ncclguard=$1 open=29500 dropped=29501 rejected=29502
ip link set lo up
iptables -A INPUT -p tcp --dport "$dropped" --syn -j DROP
iptables -A INPUT -p tcp --dport "$rejected" -j REJECT --reject-with tcp-reset
"$ncclguard" peer serve --address 127.0.0.1 --ports "$open,$dropped,$rejected" --duration 20s \
  >/dev/null 2>&1 &
server=$!
trap "kill $server 2>/dev/null || true; wait $server 2>/dev/null || true" EXIT
sleep 1
rc=0
out=$("$ncclguard" peer test 127.0.0.1 --ports "$open,$dropped,$rejected" --timeout 2s -o json) ||
  rc=$?
echo "$out"
python3 - "$out" "$rc" <<PY
import json, sys
results = {r["port"]: r for r in json.loads(sys.argv[1])}
want = {29500: "passed", 29501: "timed-out", 29502: "refused"}
got = {port: results[port]["result"] for port in want}
assert got == want, f"peer test said {got}, the rules say {want}"
assert sys.argv[2] == "1", f"exit {sys.argv[2]}, expected 1 (a port failed)"
assert "#host-firewall" in results[29501]["guide"]
print("peer_firewall_test: the DROP timed out, the REJECT was refused, the open port passed")
PY
' _ "$ncclguard"
