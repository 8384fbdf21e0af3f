#!/usr/bin/env bash
# ctest node_multi_tests (label node): two nodes (scripts/node.sh with NCCLGUARD_NODE_COUNT=2),
# each in a network namespace of its own, joined by a bridge in a third, nothing leading out.
#
#   1. both Nodes Ready, with the instance-type label; node 2's routes: the other node's pod
#      range via its node IP, the service range on its discard device, no default route
#   2. a pod pinned (nodeName) on each node, the ncclguard image: the pod on node 2 reaches the
#      pod on node 1 over TCP by pod IP, by its name under a headless Service (CoreDNS), and
#      through a ClusterIP Service (node 2's kube-proxy), and node 1's pod reaches node 2's the
#      same way; the API server reaches node 2's kubelet (logs, exec) and a pod there (proxy)
#   3. CoreDNS moved to node 2 (node 1 cordoned, its pod deleted): node 1's pod still resolves
#   4. the checks between nodes (probes/peer_round.h) with ncclguard installed by helm, its probe
#      on both nodes: both NodeValidations Reachable; new TCP connections to the ephemeral range
#      dropped in node 2's namespace (INPUT and FORWARD, established traffic accepted): the
#      peer checks fail naming the port, a two-node Indexed Job is held with the host-firewall
#      message naming both nodes; the rule removed: both Reachable, the Job released, its two
#      ranks (one a node) connect and it completes; the fabric tier's port alone dropped (TCP
#      passing): a job held with the security-group message
#   5. NCCL's RAS while a job runs (probes/ras_watch.h): a two-node Job whose pods serve RAS
#      (tests/ras_standin, a stand-in for NCCL), the probe reading it from inside the reader pod's
#      network namespace every 5 s: NcclHealth Healthy; rank 8's process reported dead on node 2:
#      ProcessDead naming that pod and node, with an Event; healthy again; the same AllReduce
#      counts in two reports: CollectiveStuck; a pod whose RAS never answers (another Job) costs
#      each round its 2 s timeout, not a stall; placement in the network (core/placement.h): the
#      nodes labelled with the EC2 topology in two network-node-layer-3 blocks, the Job's two pods
#      on both: NcclPlacement False Spread naming both blocks, with an Event; node 2 relabelled
#      into node 1's block, another such Job: True OneBlock; two blocks again, a Job of two
#      1-GPU pods: the webhook's preferred pod affinity on network-node-layer-3, and the real
#      scheduler puts both in one block (True OneBlock)
#   6. containment on node 2: 203.0.113.7 unreachable from its namespace and from its pod; the
#      bridge's namespace holds only lo, br0 and the nodes' veths; the host's interfaces,
#      iptables rules and ip_forward are the same during the run and after stop, and stop
#      leaves nothing (stop_node fails the test otherwise)
#
# Exit 77 (ctest: skipped) with the reason where the host cannot run a node.
# Environment: NCCLGUARD_BUILD_DIR (the ncclguard binary for the image), NCCLGUARD_NODE_TEST_KEEP
# (a dir to copy the nodes' logs to).
# shellcheck disable=SC2154 # work, bin, failures and begin are set by lib.sh (start_work, require_node_host)
set -Eeuo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
# shellcheck disable=SC2034 # lib.sh reads it
build="${NCCLGUARD_BUILD_DIR:-$root/build}"
# shellcheck source=lib.sh
source "$root/tests/node/lib.sh"
require_node_host
start_work multi-test

host_forward_before="$(cat /proc/sys/net/ipv4/ip_forward)"
host_links_before="$(ip -o link show | awk -F': ' '{print $2}' | sort)"
host_rules_before="$(iptables-save 2>/dev/null | grep -v '^[#:]' | sort || true)"
# host_unchanged <when>: the host's interfaces, iptables rules and ip_forward are as before.
host_unchanged() {
  local links rules
  links="$(ip -o link show | awk -F': ' '{print $2}' | sort)"
  rules="$(iptables-save 2>/dev/null | grep -v '^[#:]' | sort || true)"
  if [[ "$(cat /proc/sys/net/ipv4/ip_forward)" == "$host_forward_before" && "$links" == "$host_links_before" &&
    "$rules" == "$host_rules_before" ]]; then
    pass "containment $1: the host's interfaces, iptables rules and ip_forward ($host_forward_before) are as before"
  else
    fail "containment $1: the host changed: ip_forward $(cat /proc/sys/net/ipv4/ip_forward) (was $host_forward_before); $(diff <(echo "$host_links_before") <(echo "$links") | tr '\n' ' ')$(diff <(echo "$host_rules_before") <(echo "$rules") | tr '\n' ' ')"
  fi
}

# The nodes stopped here (logs kept first where asked), so that the host is compared once they
# are gone; stop_node then finds nothing to stop, checks that nothing is left and exits.
cleanup() {
  local rc=$?
  set +e
  if [[ -n "${NCCLGUARD_NODE_TEST_KEEP:-}" && -d "$NCCLGUARD_NODE_DIR/log" ]]; then
    mkdir -p "$NCCLGUARD_NODE_TEST_KEEP" && cp -r "$NCCLGUARD_NODE_DIR/log/." "$NCCLGUARD_NODE_TEST_KEEP/"
  fi
  local stop_begin=$SECONDS
  if "$root/scripts/node.sh" stop >"$work/stop-first.log" 2>&1; then
    pass "scripts/node.sh stop: both nodes gone in $((SECONDS - stop_begin))s, nothing left (no process, cgroup, namespace, mount, state)"
  else
    cat "$work/stop-first.log"
    fail "scripts/node.sh stop left something behind"
  fi
  host_unchanged "after stop"
  echo "node_multi_tests: $failures failure(s)"
  ((failures == 0)) || rc=1
  stop_node "$rc"
}
trap cleanup EXIT
trap 'echo "FAIL: node_multi_tests stopped at line $LINENO: $BASH_COMMAND"' ERR

# ---------------------------------------------------------------- 1. two nodes and the image
start=$SECONDS
if ! NCCLGUARD_NODE_COUNT=2 "$root/scripts/node.sh" start >"$work/node.env" 2>"$work/node-start.log"; then
  cat "$work/node-start.log"
  echo "FAIL: scripts/node.sh start (NCCLGUARD_NODE_COUNT=2)"
  exit 1
fi
eval "$(cat "$work/node.env")"
# shellcheck disable=SC1091
source "$NCCLGUARD_NODE_DIR/node.env"
k() { kubectl --request-timeout=30s "$@"; }
read -r node1 node2 <<<"$NODE_NAMES"
ready_nodes="$(k get nodes -o jsonpath='{range .items[*]}{.metadata.name}={.status.conditions[?(@.type=="Ready")].status},{.metadata.labels.node\.kubernetes\.io/instance-type} {end}')"
if [[ "$NODE_COUNT" == 2 && "$node1" == ncclguard-node && "$node2" == ncclguard-node-2 &&
  "$ready_nodes" == "ncclguard-node=True,p5.48xlarge ncclguard-node-2=True,p5.48xlarge " ]]; then
  pass "2 nodes Ready in $((SECONDS - start))s, both labelled p5.48xlarge: $ready_nodes"
else
  fail "nodes: NODE_COUNT=$NODE_COUNT NODE_NAMES=$NODE_NAMES; $ready_nodes"
fi
in_node2() { "$root/scripts/node.sh" exec --node 2 "$@"; }
routes2="$(in_node2 ip route show)"
if [[ -z "$(in_node2 ip route show default)" ]] &&
  grep -q '^10.244.0.0/24 via 10.233.0.1 dev node0 *$' <<<"$routes2" &&
  in_node2 ip route get 10.96.0.250 | grep -q 'dev svc0 src 10.233.0.2' &&
  [[ "$(in_node2 cat /proc/sys/net/ipv4/ip_forward)" == 1 ]]; then
  pass "node 2's routes: no default route, node 1's pods via 10.233.0.1, the service range on svc0; it forwards"
else
  fail "node 2's routes: $(tr '\n' ';' <<<"$routes2") ip_forward $(in_node2 cat /proc/sys/net/ipv4/ip_forward)"
fi

if NCCLGUARD_IMAGE_ARCHIVE="$work/ncclguard.tar" "$root/scripts/image.sh" >"$work/image.log" 2>&1; then
  pass "scripts/image.sh: image built and imported into both nodes' containerd"
else
  cat "$work/image.log"; echo "FAIL: scripts/image.sh"; exit 1
fi
app_version="$(sed -n 's/^appVersion: *"\{0,1\}\([^"]*\)"\{0,1\}$/\1/p' "$root/charts/ncclguard/Chart.yaml")"
image="ghcr.io/ncclguard/ncclguard:$app_version"

# ---------------------------------------------------------------- 2. across the nodes
# Each pod answers one HTTP-shaped line per connection (perl is in every Debian image) after
# reading the request up to its empty line, so that both a bare TCP client and the API
# server's pod proxy can talk to it.
k create namespace multi >/dev/null
pod() { # NAME NODE
  cat <<YAML
apiVersion: v1
kind: Pod
metadata: {name: $1, namespace: multi, labels: {app: echo, pod: $1}}
spec:
  nodeName: $2
  hostname: $1
  subdomain: echo
  terminationGracePeriodSeconds: 1
  containers:
  - name: echo
    image: $image
    imagePullPolicy: Never
    command: [perl, -MIO::Socket::INET, -e]
    args:
    - |
      \$| = 1;
      my \$s = IO::Socket::INET->new(LocalPort => 7070, Listen => 8, ReuseAddr => 1) or die "listen: \$!";
      print "listening\n";
      while (my \$c = \$s->accept) {
        while (my \$l = <\$c>) { last if \$l =~ /^\r?\n\$/; }
        print \$c "HTTP/1.0 200 OK\r\nContent-Type: text/plain\r\n\r\nhello from $1 on $2\n";
        close \$c;
      }
---
apiVersion: v1
kind: Service
metadata: {name: $1, namespace: multi}
spec:
  selector: {pod: $1}
  ports: [{port: 7070}]
YAML
}
{
  pod one "$node1"; echo ---; pod two "$node2"; echo ---
  printf '%s\n' 'apiVersion: v1' 'kind: Service' 'metadata: {name: echo, namespace: multi}' \
    'spec: {clusterIP: None, selector: {app: echo}, ports: [{port: 7070}]}'
} | k apply -f - >/dev/null
listening() { k -n multi logs "$1" | grep -q listening; }
if eventually 90 listening one && eventually 90 listening two; then
  pass "a pod on each node Running: $(k -n multi get pods -o jsonpath='{range .items[*]}{.metadata.name}@{.spec.nodeName}={.status.podIP} {end}')"
else
  fail "pods: $(k -n multi get pods -o wide 2>&1 | tr '\n' ';')"
  exit 1
fi
ip_one="$(k -n multi get pod one -o jsonpath='{.status.podIP}')"
ip_two="$(k -n multi get pod two -o jsonpath='{.status.podIP}')"
# dial <from pod> <host>: the answer of the pod listening at <host>:7070, from inside <from>.
dial() {
  k -n multi exec "$1" -- bash -c "exec 3<>/dev/tcp/$2/7070 && printf 'GET / HTTP/1.0\r\n\r\n' >&3 && tail -n1 <&3"
}
answers() { [[ "$(dial "$1" "$2" 2>/dev/null)" == "hello from $3 on "* ]]; }
check_dial() { # FROM HOST TO WHAT
  if eventually 30 answers "$1" "$2" "$3"; then
    pass "$1 -> $4 ($2): $(dial "$1" "$2")"
  else
    fail "$1 -> $4 ($2): $(dial "$1" "$2" 2>&1 | tail -n1)"
  fi
}
[[ "$ip_one" == 10.244.0.* && "$ip_two" == 10.244.1.* ]] && pass "pod IPs from each node's range: $ip_one, $ip_two" ||
  fail "pod IPs: one=$ip_one two=$ip_two"
check_dial two "$ip_one" one "node 1's pod by pod IP"
check_dial two one.echo.multi.svc.cluster.local one "node 1's pod by its headless Service name (CoreDNS)"
check_dial two one.multi.svc.cluster.local one "node 1's pod through a ClusterIP Service (node 2's kube-proxy)"
check_dial one "$ip_two" two "node 2's pod by pod IP"
check_dial one two.echo two "node 2's pod by its headless Service name (CoreDNS)"
check_dial one two two "node 2's pod through a ClusterIP Service (node 1's kube-proxy)"
# The API server (node 1) to node 2: its kubelet (logs; exec ran above) and a pod there, dialled
# at its endpoint as webhooks are.
proxied="$(k get --raw "/api/v1/namespaces/multi/pods/two:7070/proxy/" 2>&1 | tail -n1 || true)"
if [[ "$proxied" == "hello from two on $node2" ]] && listening two; then
  pass "API server -> node 2: the kubelet's logs and exec, and the pod itself through the pod proxy: $proxied"
else
  fail "API server -> node 2's pod: $proxied"
fi

# ---------------------------------------------------------------- 3. CoreDNS on node 2
k cordon "$node1" >/dev/null
k -n kube-system delete pod -l k8s-app=kube-dns --wait=false >/dev/null
dns_on_node2() {
  [[ "$(k -n kube-system get pods -l k8s-app=kube-dns -o jsonpath='{range .items[?(@.metadata.deletionTimestamp)]}x{end}{range .items[*]}{.spec.nodeName}={.status.containerStatuses[0].ready} {end}')" == "$node2=true " ]]
}
if eventually 90 dns_on_node2; then
  check_dial one two.echo.multi.svc.cluster.local two "node 2's pod by name, CoreDNS now on node 2"
else
  fail "CoreDNS did not move to node 2: $(k -n kube-system get pods -l k8s-app=kube-dns -o wide 2>&1 | tr '\n' ';')"
fi
k uncordon "$node1" >/dev/null

# ---------------------------------------------------------------- 4. the checks between nodes
# Both nodes as p5.48xlarge with their device plugins (extended resources in the Node's status),
# ncclguard with its probe passing the checks this host can pass, peer rounds every 10 s (a 1 s
# test timeout; the nodes share this host's clock, so a 0.5 s skew) and the fabric tier
# (libfabric's tcp provider: no EFA device here) on port 29600.
for n in "$node1" "$node2"; do
  k patch node "$n" --subresource=status --type=merge \
    -p '{"status":{"capacity":{"nvidia.com/gpu":"8","vpc.amazonaws.com/efa":"32"}}}' >/dev/null
done
ns=ncclguard-system
start=$SECONDS
# The test nodes share this machine's PID namespace: /proc/1 is its init, not the node's, so the
# probe's host path (which would enter /proc/1/ns/net) is off in every node test.
if helm install ncclguard "$root/charts/ncclguard" -n "$ns" --create-namespace --set probe.peer.hostPath=false \
  --set 'probe.checks={memlock-limit,dev-shm-stale,removeipc}' --set probe.peer.period=10s \
  --set probe.peer.timeout=1s --set 'probe.extraArgs={--peer-fabric-port=29600,--peer-skew=500ms}' \
  --wait --timeout 180s >"$work/helm.log" 2>&1; then
  pass "helm install ncclguard, the probe on both nodes with peer rounds every 10s ($((SECONDS - start))s)"
else
  cat "$work/helm.log"; fail "helm install ncclguard"; exit 1
fi
peer_standing() { k get nodevalidation "$1" -o jsonpath='{.status.peer.standing}'; }
peers_are() { [[ "$(peer_standing "$node1") $(peer_standing "$node2")" == "$1 $1" ]]; }
peer_summary() {
  k get nodevalidations -o jsonpath='{range .items[*]}{.metadata.name}: {.status.peer.standing} ({.status.peer.path}, {.status.peer.address}, fabric {.status.peer.fabric.provider}) {.status.peer.failedDetail}; {end}'
}
if eventually 90 peers_are Reachable; then
  pass "peer checks: both nodes Reachable: $(peer_summary)"
else
  fail "peer checks: $(peer_summary) $(k -n "$ns" logs -l app.kubernetes.io/component=probe --tail=5 2>&1 | tr '\n' ' ')"
fi

k create namespace peers >/dev/null
k label namespace peers ncclguard.io/enabled=true >/dev/null
two_node_job() { # NAME: an Indexed Job of 2 pods x 8 GPUs (one node each); rank 1 reaches rank 0
  cat <<YAML
apiVersion: batch/v1
kind: Job
metadata: {name: $1, namespace: peers, labels: {ncclguard.io/managed: "true"}}
spec:
  completionMode: Indexed
  completions: 2
  parallelism: 2
  backoffLimit: 0
  template:
    spec:
      restartPolicy: Never
      subdomain: $1
      terminationGracePeriodSeconds: 1
      nodeSelector: {node.kubernetes.io/instance-type: p5.48xlarge}
      containers:
        - name: train
          image: $image
          imagePullPolicy: Never
          command: [bash, -c]
          args:
            - |
              if [ "\$JOB_COMPLETION_INDEX" = 0 ]; then
                perl -MIO::Socket::INET -e '\$s = IO::Socket::INET->new(LocalPort => 29500, Listen => 1, ReuseAddr => 1) or die \$!;
                  \$c = \$s->accept; print \$c "rank0\\n"; close \$c' && echo "rank 1 connected"
              else
                until r=\$(perl -MIO::Socket::INET -e '\$c = IO::Socket::INET->new(PeerAddr => "$1-0.$1.peers.svc.cluster.local",
                  PeerPort => 29500) or exit 1; print scalar <\$c>'); do sleep 1; done
                echo "reached rank 0: \$r"
              fi
          resources:
            limits: {nvidia.com/gpu: 8, memory: 256Mi, cpu: 100m}
YAML
}
preflight() { k -n peers get job "$1" -o jsonpath='{range .status.conditions[?(@.type=="NcclPreflight")]}{.status} {.reason}: {.message}{end}'; }
held_for() { [[ "$(preflight "$1")" == "False InsufficientValidatedNodes: "*"$2"* ]]; }
# drop <port range> <add|remove>: new TCP connections to those ports dropped in node 2's network
# namespace, on INPUT (host-network pods) and FORWARD (pods on the pod network).
drop() {
  local op=-I chain
  [[ $2 == remove ]] && op=-D
  for chain in INPUT FORWARD; do
    in_node2 iptables "$op" "$chain" -p tcp --syn --dport "$1" -j DROP
  done
}
drop 32768:60999 add
not_reachable() { [[ "$(peer_standing "$node2")" =~ ^(Undecided|Unreachable|PairFault)$ ]]; }
port_named() { k get nodevalidation "$node2" -o jsonpath='{.status.peer.failedDetail}' | grep -Eq 'TCP from .* port [0-9]+ timed-out'; }
if eventually 90 not_reachable && port_named; then
  pass "peer checks with node 2 dropping new connections to 32768:60999: $(peer_summary)"
else
  fail "peer checks did not see node 2's DROP: $(peer_summary)"
fi
two_node_job ranks >"$work/ranks.yaml"
two_node_job fabric >"$work/fabric.yaml"
eventually 60 k apply -f "$work/ranks.yaml" || fail "Job ranks not admitted: $(k apply -f "$work/ranks.yaml" 2>&1)"
firewall_message="nodes $node1 and $node2 cannot reach each other over TCP"
if eventually 60 held_for ranks "$firewall_message" && [[ "$(preflight ranks)" == *"#host-firewall"* ]] &&
  [[ -z "$(k -n peers get pods -o name)" ]]; then
  pass "Job ranks held, no pods: $(preflight ranks)"
else
  fail "Job ranks not held for the firewall: '$(preflight ranks)'"
fi

drop 32768:60999 remove
released() { [[ "$(preflight "$1")" == "True ValidatedNodesAvailable: "* ]]; }
completed() { [[ "$(k -n peers get job "$1" -o jsonpath='{.status.succeeded}')" == 2 ]]; }
if eventually 90 peers_are Reachable && eventually 60 released ranks && eventually 120 completed ranks; then
  pass "the rule removed: both Reachable, Job ranks released and completed across the nodes: $(k -n peers logs -l batch.kubernetes.io/job-name=ranks --tail=1 2>&1 | tr '\n' ' ')($(k -n peers get pods -o jsonpath='{range .items[*]}{.metadata.name}@{.spec.nodeName} {end}'))"
else
  fail "after the rule was removed: $(peer_summary); '$(preflight ranks)'; $(k -n peers get pods -o wide 2>&1 | tr '\n' ';')"
fi

drop 29600 add
fabric_failed() { [[ "$(k get nodevalidation "$node2" -o jsonpath='{.status.peer.failedTier}')" == fabric ]]; }
if eventually 90 fabric_failed; then
  eventually 60 k apply -f "$work/fabric.yaml" || fail "Job fabric not admitted: $(k apply -f "$work/fabric.yaml" 2>&1)"
  if eventually 60 held_for fabric "over the fabric while TCP passes" && [[ "$(preflight fabric)" == *"#security-group"* ]]; then
    pass "the fabric tier's port dropped, TCP open: Job fabric held: $(preflight fabric)"
  else
    fail "the fabric's DROP: Job fabric '$(preflight fabric)'"
  fi
else
  fail "the fabric's DROP was not seen: $(peer_summary)"
fi
drop 29600 remove
k -n peers delete job fabric --wait=false >/dev/null 2>&1 || true

# ---------------------------------------------------------------- 5. NCCL's RAS while a job runs
# A managed two-node Job whose pods serve NCCL's RAS client protocol 2 on their own localhost:
# tests/ras_standin is a stand-in for NCCL (no GPU here), its reports rendered from NCCL's own
# format strings (2.26 layout), re-read from a scenario file on every query. The probe on the
# reader pod's node reads it from inside the pod's network namespace every 5 s; the job's
# NcclHealth condition and Events say what RAS said, each rank mapped to its pod and node.
ras_dir="$work/ras"
mkdir -p "$ras_dir"
cp "$build/tests/ras_standin/ncclguard-ras-standin" "$ras_dir/"
ras_ip0=10.0.0.1 ras_ip1=10.0.0.2
# ras_scenario <healthy|dead|stuck|silent>: 16 ranks, one GPU a process, 8 in each pod; dead:
# rank 8's process (pod 1, node 2); stuck: ranks 8-10 (pod 1) one AllReduce behind (few enough
# for RAS to name them).
ras_scenario() {
  local r ip pid count dead ranks=""
  for r in $(seq 0 15); do
    if ((r < 8)); then ip=$ras_ip0 pid=$((100 + r)); else ip=$ras_ip1 pid=$((200 + r - 8)); fi
    count=1000 dead=false
    [[ $1 == stuck ]] && ((r >= 8 && r <= 10)) && count=999
    [[ $1 == dead ]] && ((r == 8)) && dead=true
    ranks+="${ranks:+,}{\"rank\":$r,\"gpu\":$((r % 8)),\"pid\":$pid,\"node\":\"$ip\",\"counts\":[0,0,0,0,$count],\"dead\":$dead}"
  done
  printf '{"version":"2.26","silent":%s,"comms":[{"hash":"0x5eed000000000001","ranks":[%s]}]}\n' \
    "$([[ $1 == silent ]] && echo true || echo false)" "$ranks"
}
set_ras() { # <file> <state>: written whole, then renamed (a query reads one or the other)
  ras_scenario "$2" >"$ras_dir/$1.new" && mv "$ras_dir/$1.new" "$ras_dir/$1"
}
set_ras scenario.json healthy
set_ras quiet.json silent
ras_job() { # NAME PODS GPUS SCENARIO
  cat <<YAML
apiVersion: batch/v1
kind: Job
metadata: {name: $1, namespace: ras, labels: {ncclguard.io/managed: "true"}}
spec:
  completionMode: Indexed
  completions: $2
  parallelism: $2
  backoffLimit: 0
  template:
    spec:
      restartPolicy: Never
      subdomain: $1
      terminationGracePeriodSeconds: 1
      containers:
        - name: train
          image: $image
          imagePullPolicy: Never
          command: [/ras/ncclguard-ras-standin, --scenario, /ras/$4]
          resources:
            limits: {nvidia.com/gpu: $3, memory: 128Mi, cpu: 100m}
          volumeMounts: [{name: ras, mountPath: /ras, readOnly: true}]
      volumes: [{name: ras, hostPath: {path: $ras_dir, type: Directory}}]
YAML
}
start=$SECONDS
if helm upgrade ncclguard "$root/charts/ncclguard" -n "$ns" --reuse-values --set probe.ras.enabled=true \
  --set probe.ras.period=5s --set probe.ras.timeout=2s --set probe.ras.initGrace=0s \
  --wait --timeout 180s >"$work/helm-ras.log" 2>&1; then
  pass "helm upgrade: the probes read RAS every 5s ($((SECONDS - start))s)"
else
  cat "$work/helm-ras.log"; fail "helm upgrade with probe.ras.enabled"
fi
k create namespace ras >/dev/null
k label namespace ras ncclguard.io/enabled=true >/dev/null
# The EC2 instance topology as EKS labels it: one spine, two network-node-layer-3 blocks. After
# the probes restarted: they read their peer group (with the block) when they start.
topology() { # NODE LAYER-3 BLOCK
  k label node "$1" --overwrite topology.k8s.aws/network-node-layer-1=nn-spine \
    topology.k8s.aws/network-node-layer-2=nn-agg "topology.k8s.aws/network-node-layer-3=$2" >/dev/null
}
topology "$node1" nn-block-a
topology "$node2" nn-block-b
ras_job ras 2 8 scenario.json >"$work/ras.yaml"
ras_job ras-quiet 1 0 quiet.json >"$work/ras-quiet.yaml"
eventually 90 k apply -f "$work/ras.yaml" -f "$work/ras-quiet.yaml" ||
  fail "Jobs ras, ras-quiet not admitted: $(k apply -f "$work/ras.yaml" 2>&1)"
ras_pod() { k -n ras get pods -l batch.kubernetes.io/job-name=ras,batch.kubernetes.io/job-completion-index="$1" -o jsonpath="{.items[0].$2}"; }
both_running() { [[ "$(k -n ras get pods -l batch.kubernetes.io/job-name=ras --field-selector=status.phase=Running -o name | wc -l)" == 2 ]]; }
if eventually 180 both_running; then
  ras_ip0=$(ras_pod 0 status.podIP) ras_ip1=$(ras_pod 1 status.podIP)
  ras_pod1=$(ras_pod 1 metadata.name) ras_node1=$(ras_pod 1 spec.nodeName)
  set_ras scenario.json healthy
  pass "Job ras runs a RAS stand-in in each pod: $(ras_pod 0 metadata.name)@$(ras_pod 0 spec.nodeName)=$ras_ip0, $ras_pod1@$ras_node1=$ras_ip1"
else
  fail "Job ras's pods: $(k -n ras get pods -o wide 2>&1 | tr '\n' ';') $(k -n ras get job ras -o jsonpath='{.status.conditions}')"
fi
placement() { k -n ras get job "$1" -o jsonpath='{range .status.conditions[?(@.type=="NcclPlacement")]}{.status} {.reason}: {.message}{end}'; }
placement_is() { [[ "$(placement "$1")" == "$2"* ]]; }
job_event() { k -n ras get events --field-selector "involvedObject.name=$1,reason=$2" -o jsonpath='{.items[*].note}{.items[*].message}'; }
if eventually 30 placement_is ras "False Spread: 2 pods on 2 nodes in 2 network-node-layer-3 blocks: nn-block-a 1 node, nn-block-b 1 node (one network-node-layer-2 block, nn-agg)" &&
  eventually 30 job_event ras Spread; then
  pass "Job ras's pods in two blocks: NcclPlacement $(placement ras); Event: $(job_event ras Spread | cut -c1-120)"
else
  fail "Job ras's placement: '$(placement ras)'; Events: $(job_event ras Spread)"
fi
health() { k -n ras get job "$1" -o jsonpath='{range .status.conditions[?(@.type=="NcclHealth")]}{.status} {.reason}: {.message}{end}'; }
health_is() { [[ "$(health "$1")" == "$2"* ]]; }
ras_event() { k -n ras get events --field-selector "involvedObject.name=ras,reason=$1" -o jsonpath='{.items[*].note}{.items[*].message}'; }
reader="$(k -n ras get pods -l ncclguard.io/ras-reader=true -o jsonpath='{range .items[*]}{.metadata.name} {end}')"
if eventually 60 health_is ras "True Healthy"; then
  reader="$(k -n ras get pods -l ncclguard.io/ras-reader=true -o jsonpath='{range .items[*]}{.metadata.name} {end}')"
  pass "NcclHealth True Healthy, read in the one labelled pod of each job (${reader% }): $(health ras)"
else
  fail "NcclHealth of Job ras: '$(health ras)'; readers: $reader; $(k get nodevalidations -o jsonpath='{range .items[*]}{.metadata.name}: {.status.ras}; {end}')"
fi
if eventually 60 health_is ras-quiet "Unknown RasUnanswered"; then
  pass "a pod whose RAS does not answer: Job ras-quiet $(health ras-quiet)"
else
  fail "Job ras-quiet: '$(health ras-quiet)'"
fi
set_ras scenario.json dead
written=$SECONDS
if eventually 60 health_is ras "False ProcessDead" && [[ "$(health ras)" == *"rank 8 (GPU 0, PID 200) in pod $ras_pod1 on node $ras_node1"* ]] &&
  eventually 30 ras_event ProcessDead; then
  pass "rank 8's process dead on node 2: ProcessDead $((SECONDS - written))s after the report changed (reads every 5s; the silent pod's 2s timeout in every round): $(health ras); Event: $(ras_event ProcessDead | cut -c1-160)"
else
  fail "the dead rank: '$(health ras)'; Events: $(ras_event ProcessDead)"
fi
set_ras scenario.json healthy
if eventually 60 health_is ras "True Healthy" && eventually 30 ras_event Healthy; then
  pass "the report healthy again: $(health ras)"
else
  fail "back to healthy: '$(health ras)'"
fi
set_ras scenario.json stuck
if eventually 60 health_is ras "False CollectiveStuck" && [[ "$(health ras)" == *"in pod $ras_pod1 on node $ras_node1"* ]]; then
  pass "the same AllReduce counts in two reports: $(health ras | cut -c1-400)"
else
  fail "the stuck collective: '$(health ras)'"
fi
k -n ras delete job ras ras-quiet --wait=false >/dev/null 2>&1 || true
# Node 2 moved into node 1's block: the next Job's two pods (8 GPUs each, one a node) share it.
topology "$node2" nn-block-a
ras_job placed 2 8 scenario.json >"$work/placed.yaml"
eventually 60 k apply -f "$work/placed.yaml" || fail "Job placed not admitted: $(k apply -f "$work/placed.yaml" 2>&1)"
start=$SECONDS
if eventually 120 placement_is placed "True OneBlock: 2 pods on 2 nodes in one network-node-layer-3 block nn-block-a" &&
  eventually 30 job_event placed OneBlock; then
  pass "node 2 relabelled into nn-block-a: Job placed $(placement placed) ($((SECONDS - start))s)"
else
  fail "Job placed: '$(placement placed)'; $(k -n ras get pods -o wide 2>&1 | tr '\n' ';')"
fi
k -n ras delete job placed --wait=false >/dev/null 2>&1 || true
# Two blocks again, and a Job of two 1-GPU pods that fit one node: the webhook gives each pod a
# preferred pod affinity with the Job's pods on network-node-layer-3 (the layer the controller
# learned the nodes carry), and the real kube-scheduler puts both in one block.
topology "$node2" nn-block-b
ras_job packed 2 1 scenario.json >"$work/packed.yaml"
eventually 60 k apply -f "$work/packed.yaml" || fail "Job packed not admitted: $(k apply -f "$work/packed.yaml" 2>&1)"
start=$SECONDS
affinity() { k -n ras get pods -l batch.kubernetes.io/job-name=packed -o jsonpath='{range .items[*]}{.spec.affinity.podAffinity.preferredDuringSchedulingIgnoredDuringExecution[0].podAffinityTerm.topologyKey}={.spec.affinity.podAffinity.preferredDuringSchedulingIgnoredDuringExecution[0].podAffinityTerm.labelSelector.matchLabels}@{.spec.nodeName} {end}'; }
if eventually 120 placement_is packed "True OneBlock: 2 pods on " &&
  [[ "$(affinity)" == *"topology.k8s.aws/network-node-layer-3="*"batch.kubernetes.io/job-name"*"packed"* ]]; then
  pass "two blocks, a Job of two 1-GPU pods: each pod's affinity $(affinity | cut -d' ' -f1); NcclPlacement $(placement packed) ($((SECONDS - start))s)"
else
  fail "Job packed: '$(placement packed)'; pods: $(affinity); $(k -n ras get pods -o wide 2>&1 | tr '\n' ';')"
fi
k -n ras delete job packed --wait=false >/dev/null 2>&1 || true

# ---------------------------------------------------------------- 6. containment on node 2
if in_node2 bash -c 'exec 3<>/dev/tcp/203.0.113.7/80' 2>"$work/dial.err"; then
  fail "containment: a connection to 203.0.113.7 from node 2 succeeded"
elif grep -q -i 'unreachable\|no route' "$work/dial.err"; then
  pass "containment: 203.0.113.7 from node 2's namespace: $(tail -n1 "$work/dial.err")"
else
  fail "containment: 203.0.113.7 from node 2 failed, but not for lack of a route: $(cat "$work/dial.err")"
fi
if k -n multi exec two -- timeout 5 bash -c 'exec 3<>/dev/tcp/203.0.113.7/80' 2>"$work/pod-dial.err"; then
  fail "containment: a connection to 203.0.113.7 from node 2's pod succeeded"
elif grep -q -i 'unreachable\|no route' "$work/pod-dial.err"; then
  pass "containment: 203.0.113.7 from node 2's pod: $(grep -i 'unreachable\|no route' "$work/pod-dial.err" | tail -n1)"
else
  fail "containment: 203.0.113.7 from node 2's pod failed, but not for lack of a route: $(cat "$work/pod-dial.err")"
fi
bridge_ns="ncclguard-net-${NETNS#ncclguard-node-}"
bridge_links="$(ip -n "$bridge_ns" -o link show | awk -F': ' '{print $2}' | sed 's/@.*//' | sort | tr '\n' ' ')"
if [[ "$bridge_links" == "br0 lo n1 n2 " && -z "$(ip -n "$bridge_ns" route show)" ]]; then
  pass "containment: the bridge's namespace $bridge_ns holds only ${bridge_links% } and no route"
else
  fail "containment: the bridge's namespace: links $bridge_links; routes $(ip -n "$bridge_ns" route show | tr '\n' ';')"
fi
ns_links="$(in_node2 ip -o link show | awk -F': ' '{print $2}' | sed 's/@.*//' | sort | tr '\n' ' ')"
unexpected="$(tr ' ' '\n' <<<"$ns_links" | grep -Ev '^(lo|node0|svc0|cni0|veth[0-9a-f]+|)$' || true)"
[[ -z "$unexpected" ]] && pass "containment: node 2's interfaces: $ns_links" ||
  fail "containment: unexpected interfaces in node 2's namespace: $unexpected"
host_unchanged "with 2 nodes up"

