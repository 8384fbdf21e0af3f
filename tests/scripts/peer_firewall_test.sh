#!/usr/bin/env bash
# `ncclguard peer` against real netfilter rules, in a network namespace of its own (unshare
# --net: its loopback the only interface, so no packet leaves; its rules end with it):
#   1. one port's new connections dropped (iptables -j DROP on SYNs, as a host firewall does),
#      another's rejected with a TCP reset, a third left open, and the fabric tier (libfabric's
#      tcp provider) open: `peer test` says timed-out, refused, passed, and the fabric passed;
#   2. the fabric endpoint's own port dropped while the TCP tier's stays open, as a security
#      group without its self-referencing rule treats EFA: the fabric fails while TCP passes,
#      and the report links the security-group section.
# Skipped (77) without root, network namespaces or iptables.
#   tests/scripts/peer_firewall_test.sh NCCLGUARD_BINARY
set -euo pipefail
ncclguard=${1:?usage: $0 NCCLGUARD_BINARY}
if [[ $EUID != 0 ]] || ! unshare --net true 2>/dev/null || ! command -v iptables >/dev/null; then
  echo "peer_firewall_test: skipped: needs root, network namespaces and iptables" >&2
  exit 77
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# shellcheck disable=SC2016 # expanded by the inner shell
unshare --net bash -euo pipefail -c '
ncclguard=$1 work=$2 open=29500 dropped=29501 rejected=29502
ip link set lo up
iptables -A INPUT -p tcp --dport "$dropped" --syn -j DROP
iptables -A INPUT -p tcp --dport "$rejected" -j REJECT --reject-with tcp-reset
"$ncclguard" peer serve --address 127.0.0.1 --ports "$open,$dropped,$rejected" --duration 30s \
  --fabric tcp --fabric-source 127.0.0.1 >"$work/serve.out" 2>"$work/serve.err" &
server=$!
trap "kill $server 2>/dev/null || true; wait $server 2>/dev/null || true" EXIT
for _ in $(seq 50); do grep -q "^fabric .* address " "$work/serve.out" && break; sleep 0.1; done
address=$(sed -n "s/^fabric .* address \([0-9a-f]*\)$/\1/p" "$work/serve.out")
[[ -n $address ]] || { cat "$work/serve.out" "$work/serve.err" >&2; echo "no fabric address" >&2; exit 1; }
sleep 0.5

rc=0
"$ncclguard" peer test 127.0.0.1 --ports "$open,$dropped,$rejected" --timeout 2s -o json \
  --fabric tcp --fabric-source 127.0.0.1 --fabric-address "$address" >"$work/first.json" || rc=$?
[[ $rc == 1 ]] || { cat "$work/first.json"; echo "first test: exit $rc, expected 1" >&2; exit 1; }

# The tcp provider'\''s address is a sockaddr_in: its port is bytes 2-3, in network order.
fabric_port=$((16#${address:4:4}))
iptables -A INPUT -p tcp --dport "$fabric_port" --syn -j DROP
rc=0
"$ncclguard" peer test 127.0.0.1 --ports "$open" --timeout 2s --fabric tcp \
  --fabric-source 127.0.0.1 --fabric-address "$address" >"$work/second.txt" || rc=$?
[[ $rc == 1 ]] || { cat "$work/second.txt"; echo "second test: exit $rc, expected 1" >&2; exit 1; }
' _ "$ncclguard" "$work"

python3 - "$work" <<'PY'
import json, pathlib, sys
work = pathlib.Path(sys.argv[1])
first = json.loads((work / "first.json").read_text())
tcp = {r["port"]: r for r in first if r["tier"] == "tcp"}
want = {29500: "passed", 29501: "timed-out", 29502: "refused"}
got = {port: tcp[port]["result"] for port in want}
assert got == want, f"peer test said {got}, the rules say {want}"
assert "#host-firewall" in tcp[29501]["guide"]
fabric = [r for r in first if r["tier"] == "fabric"]
assert len(fabric) == 1 and fabric[0]["result"] == "passed", fabric
second = (work / "second.txt").read_text()
print(second)
assert "1 of 1 port(s) of 127.0.0.1 passed" in second, "the TCP tier still passes"
assert "fabric (tcp" in second and "passed in" not in second.split("fabric (", 1)[1].split("\n")[0]
assert "while TCP passes" in second and "#security-group" in second, second
print("peer_firewall_test: DROP timed out, REJECT refused, open passed; the fabric's DROP is "
      "named as a security group while TCP passes")
PY
