#!/usr/bin/env bash
# The node check host-firewall against real netfilter rules, each case in a network namespace of
# its own (unshare --net: its rules end with it; the host's are never touched), read as the
# DaemonSet reads the host's: `probe --check host-firewall --firewall-netns /proc/PID/ns/net`
# enters the namespace with setns on a thread of its own.
#   clean       no rules: Pass (read in place with --firewall-netns current, and entered);
#   legacy      iptables-legacy: established accepted, then new connections to the ephemeral
#               range dropped on INPUT, and 29500 rejected in a user chain FORWARD jumps to;
#   unprivileged  the probe as nobody without capabilities: Skip, saying CAP_NET_ADMIN;
#   narrow-range  the namespace's ip_local_port_range is 40000-50000: a DROP of 35000 on INPUT is
#               no finding, one of 45000 is;
#   nft-compat  iptables-nft: 29500 rejected on FORWARD; the legacy filter table is not created
#               by reading;
#   fixed       iptables-nft: INPUT policy DROP with the guide's fix (TCP from the subnet to
#               1024:65535 accepted): Pass;
#   nft         native nft (when the nft program exists): a drop of the ephemeral range on the
#               forward hook of an inet table;
#   nft-sets    native nft: policy drop after a conntrack verdict map, an anonymous set that
#               accepts 29500 and an interval set that accepts part of the ephemeral range;
#   nft-firewalld  firewalld's shape (its public zone with ssh only): the zone chains entered by
#               goto fall back to filter_INPUT's final reject.
# Skipped (77) without root, network namespaces, iptables-legacy or iptables-nft.
#   tests/scripts/host_firewall_test.sh NCCLGUARD_BINARY
set -euo pipefail
ncclguard=${1:?usage: $0 NCCLGUARD_BINARY}
if [[ $EUID != 0 ]] || ! unshare --net true 2>/dev/null ||
  ! command -v iptables-legacy >/dev/null || ! command -v iptables-nft >/dev/null; then
  echo "host_firewall_test: skipped: needs root, network namespaces, iptables-legacy and" \
    "iptables-nft" >&2
  exit 77
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# probe_in NAME NETNS SETUP [RUNNER]: in a new network namespace, runs SETUP, then the check
# reading NETNS ("entered": that namespace through /proc/PID/ns/net; "current": in place), run by
# RUNNER's words if given, into $work/NAME.json, and the namespace's legacy tables into
# $work/NAME.tables.
probe_in() {
  # shellcheck disable=SC2016 # expanded by the inner shell
  unshare --net bash -euo pipefail -c '
    ncclguard=$1 report=$2 netns=$3
    eval "$4"
    [[ $netns == entered ]] && netns=/proc/$$/ns/net
    read -ra runner <<<"$5"
    "${runner[@]}" "$ncclguard" probe --once --check host-firewall --firewall-netns "$netns" \
      -o json >"$report"
    cat /proc/net/ip_tables_names >"${report%.json}.tables" 2>/dev/null || true
  ' _ "$ncclguard" "$work/$1.json" "$2" "$3" "${4:-env}"
}

probe_in clean-current current ''
probe_in clean entered ''
probe_in legacy entered '
  iptables-legacy -A INPUT -m conntrack --ctstate RELATED,ESTABLISHED -j ACCEPT
  iptables-legacy -A INPUT -p tcp --dport 32768:60999 -m conntrack --ctstate NEW -j DROP
  iptables-legacy -N NCCL-BLOCK
  iptables-legacy -A NCCL-BLOCK -p tcp --dport 29500 -j REJECT --reject-with tcp-reset
  iptables-legacy -A FORWARD -j NCCL-BLOCK'
if command -v setpriv >/dev/null; then
  probe_in unprivileged current '
    iptables-legacy -A INPUT -j DROP
    iptables-nft -A INPUT -j DROP' \
    "setpriv --reuid=65534 --regid=65534 --clear-groups --inh-caps=-all --bounding-set=-all"
fi
probe_in narrow-range entered '
  sysctl -qw net.ipv4.ip_local_port_range="40000 50000"
  iptables-legacy -A INPUT -p tcp --dport 35000 -j DROP
  iptables-legacy -A INPUT -p tcp --dport 45000 -j DROP'
probe_in nft-compat entered '
  iptables-nft -A FORWARD -p tcp --dport 29500 -j REJECT --reject-with tcp-reset'
probe_in fixed entered '
  iptables-nft -A INPUT -m conntrack --ctstate RELATED,ESTABLISHED -j ACCEPT
  iptables-nft -A INPUT -p tcp -s 10.0.0.0/8 --dport 1024:65535 -j ACCEPT
  iptables-nft -P INPUT DROP'
if command -v nft >/dev/null; then
  probe_in nft entered '
    nft add table inet filter
    nft add chain inet filter forward "{ type filter hook forward priority 0; }"
    nft add rule inet filter forward tcp dport 32768-60999 drop'
  probe_in nft-sets entered '
    nft -f - <<EOF
table inet fw {
  set open { type inet_service; flags interval; elements = { 32768-40000 } }
  chain input {
    type filter hook input priority 0; policy drop;
    ct state vmap { invalid : drop, established : accept, related : accept }
    tcp dport { 29400, 29500 } accept
    tcp dport @open accept
  }
}
EOF'
  probe_in nft-firewalld entered '
    nft -f - <<EOF
table inet firewalld {
  chain filter_INPUT {
    type filter hook input priority filter + 10; policy accept;
    ct state { established, related } accept
    ct status dnat accept
    iifname "lo" accept
    ct state invalid drop
    jump filter_INPUT_ZONES
    reject with icmpx admin-prohibited
  }
  chain filter_INPUT_ZONES {
    iifname "eth0" goto filter_IN_public
    goto filter_IN_public
  }
  chain filter_IN_public {
    jump filter_IN_public_allow
    meta l4proto { icmp, ipv6-icmp } accept
  }
  chain filter_IN_public_allow {
    tcp dport 22 ct state { new, untracked } accept
  }
}
EOF'
else
  echo "host_firewall_test: no nft program: the native nft case is not run" >&2
fi

python3 - "$work" <<'PY'
import json, pathlib, sys
work = pathlib.Path(sys.argv[1])

def check(name):
    report = json.loads((work / f"{name}.json").read_text())
    [result] = report["checks"]
    assert result["id"] == "host-firewall", result
    assert result["guide"].endswith("#host-firewall"), result
    return result

def expect(name, status, *parts):
    result = check(name)
    assert result["status"] == status, f"{name}: {result}"
    for part in parts:
        assert part in result["message"], f"{name}: {part!r} not in {result['message']!r}"
    print(f"{name}: {result['status']}: {result['message']}")

expect("clean-current", "Pass", "no netfilter rule drops or rejects")
expect("clean", "Pass", "no netfilter rule drops or rejects")
expect("legacy", "Warn",
       "iptables (legacy) filter INPUT: -p tcp -m tcp --dport 32768:60999 -m conntrack --ctstate "
       "NEW -j DROP drops new TCP connections to port(s) 32768-60999 on INPUT (host-network pods)",
       "iptables (legacy) filter FORWARD -> NCCL-BLOCK: -p tcp -m tcp --dport 29500 -j REJECT "
       "--reject-with tcp-reset rejects new TCP connections to port(s) 29500 on FORWARD "
       "(pod-network pods)")
if (work / "unprivileged.json").exists():
    expect("unprivileged", "Skip", "cannot read the host's netfilter rules",
           "iptables-legacy", "nftables: netlink error: Operation not permitted (reading "
           "netfilter needs CAP_NET_ADMIN)")
expect("narrow-range", "Warn", "--dport 45000 -j DROP drops new TCP connections to port(s) "
       "45000 on INPUT")
narrow = check("narrow-range")
assert "35000" not in narrow["message"], "35000 is outside the namespace's range"
assert narrow["expected"].endswith("ports 29500, 40000-50000 (INPUT), 29500, 32768-60999 "
                                   "(FORWARD)"), narrow
expect("nft-compat", "Warn", "nft table ip filter chain FORWARD: tcp dport 29500",
       "REJECT", "rejects new TCP connections to port(s) 29500 on FORWARD (pod-network pods)")
assert "filter" not in (work / "nft-compat.tables").read_text().split(), \
    "reading created the legacy filter table"
expect("fixed", "Pass", "no netfilter rule drops or rejects")
if (work / "nft.json").exists():
    expect("nft", "Warn", "nft table inet filter chain forward: tcp dport 32768-60999 drop drops "
           "new TCP connections to port(s) 32768-60999 on FORWARD (pod-network pods)")
    expect("nft-sets", "Warn", "nft table inet fw chain input: policy drop, no rule accepting "
           "them first, drops new TCP connections to port(s) 40001-60999 on INPUT "
           "(host-network pods)")
    expect("nft-firewalld", "Warn", "nft table inet firewalld chain filter_INPUT: reject with "
           "icmpx admin-prohibited rejects new TCP connections to port(s) 29500, 32768-60999 on "
           "INPUT (host-network pods)")
print("host_firewall_test: each rule named with its path; clean and fixed namespaces pass")
PY
