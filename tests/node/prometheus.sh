# The real Prometheus server (Debian's `prometheus`) for the node tests (sourced after lib.sh and
# node.env): it runs in node 1's network namespace, listens on 127.0.0.1:9090 there (nothing on
# the host), scrapes, stores, evaluates rules and answers queries. Its targets are the pods a
# cluster without the Prometheus operator scrapes: those annotated prometheus.io/scrape=true (the
# chart's default), at their prometheus.io/port and /path. Debian builds Prometheus 2.42 without
# its Kubernetes service discovery (`kubernetes_sd_configs` is an unknown field there), so a loop
# here lists the pods from the API server every 2 s and hands them to Prometheus' file discovery,
# as kubernetes_sd_configs with the usual annotation relabelling would.
# shellcheck shell=bash disable=SC2154 # root, work and NCCLGUARD_NODE_DIR are the caller's

prometheus_pid=""
discovery_pid=""
prometheus_url=http://127.0.0.1:9090

# discover_pods <namespace> <file>: until killed, writes the annotated running pods of <namespace>
# as file_sd targets (labels namespace, pod, component), replacing the file whole.
discover_pods() {
  local namespace="$1" file="$2"
  while :; do
    if kubectl --request-timeout=10s -n "$namespace" get pods -o json 2>/dev/null | python3 -c '
import json, sys
targets = []
for pod in json.load(sys.stdin)["items"]:
    notes = pod["metadata"].get("annotations", {})
    ip = pod.get("status", {}).get("podIP")
    if notes.get("prometheus.io/scrape") != "true" or not ip or pod["status"].get("phase") != "Running":
        continue
    labels = {"namespace": pod["metadata"]["namespace"], "pod": pod["metadata"]["name"],
              "component": pod["metadata"].get("labels", {}).get("app.kubernetes.io/component", ""),
              "__metrics_path__": notes.get("prometheus.io/path", "/metrics")}
    targets.append({"targets": [ip + ":" + notes.get("prometheus.io/port", "80")], "labels": labels})
json.dump(targets, sys.stdout)
' >"$file.tmp"; then
      mv -f "$file.tmp" "$file"
    fi
    sleep 2
  done
}

# start_prometheus <namespace> [rules file]: scrapes the annotated pods of <namespace> every 2 s
# and evaluates the rules file's groups (promtool's format) as often.
start_prometheus() {
  local namespace="$1" rules="${2:-}" dir="$work/prometheus"
  mkdir -p "$dir/data"
  echo '[]' >"$dir/targets.json"
  discover_pods "$namespace" "$dir/targets.json" &
  discovery_pid=$!
  local rule_files=""
  [[ -z "$rules" ]] || rule_files="rule_files: [$rules]"
  cat >"$dir/prometheus.yml" <<YAML
global:
  scrape_interval: 2s
  scrape_timeout: 2s
  evaluation_interval: 2s
$rule_files
scrape_configs:
  - job_name: ncclguard
    # As the chart's ServiceMonitor (honorLabels): a held job's namespace label is the job's.
    honor_labels: true
    file_sd_configs:
      - files: [$dir/targets.json]
        refresh_interval: 2s
YAML
  local holder _
  read -r holder _ <"$NCCLGUARD_NODE_DIR/holder.pid"
  # nsenter without --fork execs prometheus: $! is the server's own pid.
  nsenter --target "$holder" --mount --net -- prometheus --config.file="$dir/prometheus.yml" \
    --storage.tsdb.path="$dir/data" --web.listen-address=127.0.0.1:9090 \
    --storage.tsdb.retention.time=1d --log.level=warn >"$dir/prometheus.log" 2>&1 &
  prometheus_pid=$!
  if ! eventually 30 prom_get /-/ready; then
    cat "$dir/prometheus.log"; echo "FAIL: prometheus did not become ready"; return 1
  fi
}

# stop_prometheus: the server and the discovery loop, by their pids (from the cleanup too; it
# never fails, so the cleanup goes on to stop the node).
stop_prometheus() {
  local pid
  for pid in "$discovery_pid" "$prometheus_pid"; do
    [[ -n "$pid" ]] || continue
    kill "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true  # its status is the TERM's
  done
  discovery_pid="" prometheus_pid=""
}

# prom_get <path> [curl args...]: GET on the server (in node 1's namespace).
prom_get() {
  local path="$1"; shift
  "$root/scripts/node.sh" exec curl -sSf --max-time 10 --get "$@" "$prometheus_url$path"
}

# prom_query <PromQL>: the instant query's result as JSON lines, one series a line:
# {"metric": {...}, "value": "..."}; fails when the query fails.
prom_query() {
  prom_get /api/v1/query --data-urlencode "query=$1" | python3 -c '
import json, sys
answer = json.load(sys.stdin)
if answer.get("status") != "success":
    sys.exit("query failed: " + answer.get("error", "?"))
for series in answer["data"]["result"]:
    print(json.dumps({"metric": series["metric"], "value": series["value"][1]}, sort_keys=True))
'
}

# prom_scalar <PromQL>: the value of a query with one series ("" when none).
prom_scalar() {
  prom_query "$1" | python3 -c '
import json, sys
lines = sys.stdin.read().splitlines()
print(json.loads(lines[0])["value"] if len(lines) == 1 else "")
'
}

# prom_has <PromQL>: true when the query returns at least one series.
prom_has() { [[ -n "$(prom_query "$1")" ]]; }
# prom_none <PromQL>: true when it returns none (and did not fail).
prom_none() { local out; out="$(prom_query "$1")" && [[ -z "$out" ]]; }
