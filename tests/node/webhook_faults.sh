# node_tests' webhook faults (sourced by node_test.sh after helm install): the webhook process of
# one of the 2 replicas killed with SIGTERM, then the other's with SIGKILL, then a replica pod
# deleted, all under a steady admission load (tests/node/admission_load.py: server-side dry-run
# creates in the opted-in namespace `team`, each counted admitted only when the mutating
# webhook's patch is in the answer). failurePolicy is Fail: a failed webhook call is a refused pod.
# Asserted: SIGTERM and the deletion fail nothing, each container restarts (restartCount) and
# serves again; SIGKILL fails at most a second's worth of admissions, each on a connection to
# the killed replica (why: below and docs/limits.md). Printed: the rate reached, the counts per
# fault, the failures by kind and when the faulty replica's endpoint turned not ready.
# Uses node_test.sh's k, ns, trainer, work, root, NODE_IP and CONTAINERD_ADDRESS.
# shellcheck shell=bash disable=SC2154 # the variables above are node_test.sh's

load_rate="${NCCLGUARD_NODE_TEST_ADMISSION_RATE:-100}"
ready_webhook_endpoints() {
  k -n "$ns" get endpointslices -l kubernetes.io/service-name=ncclguard-webhook \
    -o jsonpath='{range .items[*].endpoints[*]}{.conditions.ready}{"\n"}{end}' | grep -c '^true$' || true
}
two_serving() { [[ "$(ready_replicas)" == 2 && "$(ready_webhook_endpoints)" == 2 ]]; }
restarts() { k -n "$ns" get pod "$1" -o jsonpath='{.status.containerStatuses[0].restartCount}'; }
pod_ip() { k -n "$ns" get pod "$1" -o jsonpath='{.status.podIP}'; }
pod_ready() { [[ "$(k -n "$ns" get pod "$1" -o jsonpath='{.status.conditions[?(@.type=="Ready")].status}')" == True ]]; }
# The host pid of a pod's container (containerd's task; the node shares the host's pid namespace).
container_pid() {
  local id
  id="$(k -n "$ns" get pod "$1" -o jsonpath='{.status.containerStatuses[0].containerID}')"
  ctr --address "$CONTAINERD_ADDRESS" -n k8s.io task ls | awk -v id="${id#containerd://}" '$1 == id {print $2}'
}
phase() { printf '%s\n' "$1" >"$work/load.phase"; }

if ! eventually 120 two_serving; then
  fail "webhook faults: 2 replicas never served together ($(ready_replicas) Ready, $(ready_webhook_endpoints) ready endpoints)"
  return
fi
printf '%s' "$trainer" >"$work/trainer.json"
phase steady
echo "steady $(date +%s.%N) -" >"$work/load.events"
"$root/scripts/node.sh" exec python3 "$root/tests/node/admission_load.py" --server "https://$NODE_IP:6443" \
  --ca "$NCCLGUARD_NODE_DIR/pki/ca.crt" --cert "$NCCLGUARD_NODE_DIR/pki/admin.crt" --key "$NCCLGUARD_NODE_DIR/pki/admin.key" \
  --namespace team --pod "$work/trainer.json" --expect '"vpc.amazonaws.com/efa":"32"' --rate "$load_rate" \
  --phase-file "$work/load.phase" --stop-file "$work/load.stop" --out "$work/load.json" --log "$work/load.log" \
  --watch-service "$ns/ncclguard-webhook" --endpoints-log "$work/endpoints.log" &
load_pid=$!
sleep 5

# kill_replica SIGNAL POD: the webhook process of POD gets SIGNAL from the node; the kubelet
# restarts the container (restartCount goes up) and it serves again.
kill_replica() {
  local signal=$1 pod=$2 before pid
  before="$(restarts "$pod")"
  pid="$(container_pid "$pod")"
  if [[ -z "$pid" ]]; then
    fail "webhook faults: no containerd task for $pod"
    return
  fi
  phase "$signal"
  sleep 1 # the loader reads the phase every 100 ms; requests sent before it are done
  echo "$signal $(date +%s.%N) $(pod_ip "$pod")" >>"$work/load.events"
  kill -s "$signal" "$pid"
  restarted() { (($(restarts "$pod") > before)) && pod_ready "$pod" && two_serving; }
  if eventually 120 restarted; then
    pass "$signal to the webhook process of $pod (pid $pid): restartCount $before -> $(restarts "$pod"), Ready and serving again"
  else
    fail "$signal to $pod (pid $pid): restartCount $(restarts "$pod") (was $before), Ready $(pod_ready "$pod" && echo yes || echo no), $(ready_webhook_endpoints) ready endpoints"
  fi
  sleep 3 # admissions against both replicas again, counted in this phase
}
mapfile -t replicas < <(controller_pods)
kill_replica SIGTERM "${replicas[0]}"
# The other replica: a container the kubelet just restarted would wait out its crash backoff.
kill_replica SIGKILL "${replicas[1]}"

phase delete
sleep 1
echo "delete $(date +%s.%N) $(pod_ip "${replicas[0]}")" >>"$work/load.events"
k -n "$ns" delete pod "${replicas[0]}" --wait=false >/dev/null
replaced() { ! is_controller_pod "${replicas[0]}" && two_serving; }
if eventually 120 replaced; then
  pass "replica ${replicas[0]} deleted: a new replica serves beside ${replicas[1]}"
else
  fail "replica ${replicas[0]} deleted: $(ready_webhook_endpoints) ready endpoints, pods $(controller_pods | tr '\n' ' ')"
fi
sleep 3

touch "$work/load.stop"
wait "$load_pid" || true
load_pid=""
# Per phase: admitted, failed, the failures by kind with their times after the fault, whether
# each was a connection to the faulty replica, and when its endpoint turned not ready.
python3 - "$work/load.json" "$work/load.log" "$work/load.events" "$work/endpoints.log" <<'PY' >"$work/load.txt" 2>"$work/load.other"
import json, re, sys
r = json.load(open(sys.argv[1]))
print(f'rate {r["rate"]} {r["seconds"]}')
faults = {name: (float(at), ip) for name, at, ip in (line.split() for line in open(sys.argv[3]))}
changes = [line.split() for line in open(sys.argv[4])]
# (Every reason holds the webhook's URL, whose query is "?timeout=5s".)
kinds = {"connection reset by peer": "reset", "connection refused": "refused", "EOF": "EOF",
         "server closed idle connection": "idle-closed",
         "broken pipe": "broken-pipe", "deadline exceeded": "timeout", "i/o timeout": "timeout",
         "Client.Timeout": "timeout"}
failures = {}
for line in open(sys.argv[2]):
    at, phase, reason = re.match(r"(\S+) (\S+): (.*)", line).groups()
    kind = next((k for text, k in kinds.items() if text in reason), "other")
    failures.setdefault(phase, []).append((float(at), kind, reason))
for name in ("steady", "SIGTERM", "SIGKILL", "delete"):
    c = r["phases"].get(name, {"ok": 0, "failed": 0})
    at, ip = faults.get(name, (0.0, "-"))
    # Only failures on connections to the faulty replica: its "<ip>:8443" in the API server's
    # error, or a call that failed on a connection without naming an address (Go's bare "EOF":
    # closed before an answer; "server closed idle connection": a pooled connection found
    # closed as it was reused). A denial, or an error naming the other replica, is not.
    only_faulty = all(f"{ip}:8443" in reason or
                      ("failed to call webhook" in reason and
                       not re.search(r"\d+\.\d+\.\d+\.\d+:\d+", reason))
                      for _, kind, reason in failures.get(name, []))
    detail = ""
    if failures.get(name):
        times = [t - at for t, _, _ in failures[name]]
        by_kind = {}
        for _, kind, _ in failures[name]:
            by_kind[kind] = by_kind.get(kind, 0) + 1
        detail += "; " + ", ".join(f"{n} {k}" for k, n in sorted(by_kind.items())) + \
            f", {min(times):+.2f} s to {max(times):+.2f} s after the fault"
    unready = [float(t) - at for t, address, ready in changes if address == ip and ready == "false" and float(t) > at]
    if unready:
        detail += f"; its endpoint not ready {unready[0]:+.2f} s after the fault"
    print(f'{name} {c["ok"]} {c["failed"]} {"yes" if only_faulty else "no"} {detail.removeprefix("; ")}')
    for _, kind, reason in failures.get(name, []):
        if kind in ("timeout", "other"):
            print(f"  {name}, a failure of kind {kind}: {reason}", file=sys.stderr)
PY
read -r _ rate seconds < <(sed -n 1p "$work/load.txt")
echo "[ figure ] webhook faults: admission load $rate dry-run pod creates/s for ${seconds}s (asked: $load_rate/s)"
# SIGKILL: the API server does not retry a failed webhook call (k8s.io/apiserver's admission
# dispatcher calls once; client-go retries only GETs on a reset), so the admissions in flight on
# the killed replica fail, and so do those it sends there (connection refused) until the kubelet
# has seen the container die and the endpoint turns not ready (docs/limits.md, Faults). Bound:
# only connections to the killed replica fail, at most a second's worth of the load.
sigkill_bound="$load_rate"
while read -r name ok failed only_faulty detail; do
  echo "[ figure ] webhook faults, $name: $ok admitted, $failed failed${detail:+ ($detail)}"
  if ((ok == 0)); then
    fail "webhook faults, $name: no admission was counted"
  elif ((failed == 0)); then
    pass "webhook faults, $name: $ok admissions, 0 failed"
  elif [[ "$name" == SIGKILL && "$only_faulty" == yes ]] && ((failed <= sigkill_bound)); then
    pass "webhook faults, $name: $ok admissions, $failed failed (at most $sigkill_bound), each on a connection to the killed replica"
  else
    fail "webhook faults, $name: $ok admissions, $failed failed ($detail): $(grep " $name: " "$work/load.log" | head -2 | cut -d' ' -f2- | tr '\n' ';')"
  fi
done < <(sed 1d "$work/load.txt")
cat "$work/load.other" # in full: the failures that were no connection error
if [[ -n "${NCCLGUARD_NODE_TEST_KEEP:-}" ]]; then
  mkdir -p "$NCCLGUARD_NODE_TEST_KEEP" && cp "$work"/load.{log,events} "$work/endpoints.log" "$NCCLGUARD_NODE_TEST_KEEP/"
fi
