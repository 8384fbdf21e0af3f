#!/usr/bin/env bash
# The alerts and the dashboard on a real Prometheus (ctest metrics_prometheus):
#  1. tests/metrics/check_dashboard.py on charts/ncclguard/dashboards/ncclguard.json, and the
#     chart's ConfigMap carrying exactly that JSON;
#  2. an hour of every ncclguard metric (tests/metrics/make_openmetrics.py) backfilled with
#     `promtool tsdb create-blocks-from openmetrics` into a fresh TSDB. Backfilled, not scraped:
#     this test is about the queries, and an hour of scrapes would take an hour; the node tests
#     run the dashboard over a real scrape of the real pods;
#  3. `prometheus` on 127.0.0.1 (a free port) over it, with the rules of scripts/render-rules.sh:
#     every rule evaluates without an error;
#  4. scripts/render-dashboard.py --require-data over it: every panel returns series, and the
#     PNG is drawn; then a broken query and a panel without data must fail it.
# Prometheus is stopped by its pid and the temporary directory removed on exit.
# shellcheck source-path=SCRIPTDIR/../..
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
for b in promtool prometheus gnuplot; do
  command -v "$b" >/dev/null ||
    { echo "prometheus_test: FAIL: $b not found: scripts/bootstrap.sh installs it (metrics_packages)"; exit 1; }
done
work=$(mktemp -d)
prometheus_pid=
cleanup() {
  if [[ -n $prometheus_pid ]]; then
    kill "$prometheus_pid" 2>/dev/null || true
    wait "$prometheus_pid" 2>/dev/null || true
  fi
  rm -rf "$work"
}
trap cleanup EXIT

failures=()
pass() { printf 'ok    %s\n' "$*"; }
fail() { printf 'FAIL  %s\n' "$*"; failures+=("$*"); }
finish() {
  if ((${#failures[@]})); then
    printf 'prometheus_test: %d failed: %s\n' "${#failures[@]}" "$(IFS=';'; echo "${failures[*]}")"
    exit 1
  fi
  echo "prometheus_test: all passed"
  exit 0
}
dashboard=$root/charts/ncclguard/dashboards/ncclguard.json

if python3 "$root/tests/metrics/check_dashboard.py" "$dashboard" >"$work/dashboard.log"; then
  pass "$(tail -1 "$work/dashboard.log")"
else
  cat "$work/dashboard.log"; fail "check_dashboard.py"
fi
# The ConfigMap (metrics.dashboard.enabled) holds the file as it is.
# shellcheck source=scripts/controlplane/versions.sh
source "$root/scripts/controlplane/versions.sh"
helm=${NCCLGUARD_CONTROLPLANE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/ncclguard/controlplane/$KUBERNETES_VERSION}/bin/helm
[[ -x $helm ]] || helm=$(command -v helm) || { fail "no helm: run scripts/controlplane.sh build"; finish; }
if "$helm" template ncclguard "$root/charts/ncclguard" --set metrics.dashboard.enabled=true \
  --show-only templates/dashboard-configmap.yaml >"$work/configmap.yaml" 2>"$work/helm.log" &&
  python3 - "$work/configmap.yaml" "$dashboard" <<'PY'
import json, sys, yaml
data = yaml.safe_load(open(sys.argv[1]))["data"]["ncclguard.json"]
sys.exit(0 if json.loads(data) == json.load(open(sys.argv[2])) else 1)
PY
then
  pass "the dashboard ConfigMap holds charts/ncclguard/dashboards/ncclguard.json"
else
  cat "$work/helm.log"; fail "the dashboard ConfigMap differs from charts/ncclguard/dashboards/ncclguard.json"
fi

# An hour of samples every 30 s, ending a little before now (inside the 5-minute lookback).
end=$(($(date +%s) - 30))
python3 "$root/tests/metrics/make_openmetrics.py" --end "$end" --minutes 60 --step 30 >"$work/data.om"
if promtool tsdb create-blocks-from openmetrics "$work/data.om" "$work/tsdb" >"$work/backfill.log" 2>&1; then
  pass "backfilled $(grep -vc "^#" "$work/data.om") samples"
else
  cat "$work/backfill.log"; fail "promtool tsdb create-blocks-from openmetrics"; finish
fi

"$root/scripts/render-rules.sh" >"$work/rules.yaml"
cat >"$work/prometheus.yml" <<EOF
global:
  evaluation_interval: 1s
rule_files: [$work/rules.yaml]
EOF
port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
url=http://127.0.0.1:$port
# Under timeout: should this script be killed before its trap runs (a ctest timeout), Prometheus
# still ends (timeout passes on the TERM that the trap sends).
timeout 300 prometheus --config.file="$work/prometheus.yml" --storage.tsdb.path="$work/tsdb" \
  --web.listen-address="127.0.0.1:$port" >"$work/prometheus.log" 2>&1 &
prometheus_pid=$!
for _ in $(seq 1 60); do
  curl -sf "$url/-/ready" >/dev/null 2>&1 && break
  kill -0 "$prometheus_pid" 2>/dev/null || break
  sleep 0.5
done
if ! curl -sf "$url/-/ready" >/dev/null 2>&1; then
  tail -20 "$work/prometheus.log"; fail "prometheus did not become ready on $url"; finish
fi
pass "prometheus ready on $url (pid $prometheus_pid)"

# Every rule evaluated at least once, none with an error.
rules_state() {
  curl -sf "$url/api/v1/rules" | python3 -c '
import json, sys
rules = [r for g in json.load(sys.stdin)["data"]["groups"] for r in g["rules"]]
pending = [r["name"] for r in rules if r.get("lastEvaluation", "").startswith("0001")]
bad = ["%s: %s" % (r["name"], r.get("lastError")) for r in rules if r["health"] == "err"]
print("%d rules, %d not evaluated yet, errors: %s" % (len(rules), len(pending), "; ".join(bad) or "none"))
sys.exit(2 if pending else 1 if bad or not rules else 0)'
}
rc=2
for _ in $(seq 1 20); do
  state=$(rules_state) && rc=0 || rc=$?
  ((rc != 2)) && break
  sleep 0.5
done
if ((rc == 0)); then pass "rules on a real Prometheus: $state"; else fail "rules on a real Prometheus: $state"; fi

# The dashboard: every panel's queries, and the picture.
if python3 "$root/scripts/render-dashboard.py" --prometheus "$url" --end "$end" --require-data \
  --out "$work/dashboard.png" --report "$work/report.json" >"$work/render.log" 2>&1; then
  pass "render-dashboard.py --require-data: $(tail -1 "$work/render.log")"
else
  cat "$work/render.log"; fail "render-dashboard.py --require-data"
fi
if python3 - "$work/report.json" "$dashboard" "$work/dashboard.png" <<'PY'
import json, struct, sys
report, dashboard = json.load(open(sys.argv[1])), json.load(open(sys.argv[2]))
panels = [p["title"] for p in dashboard["panels"] if p.get("type") != "row"]
empty = [t for t in panels if not report.get(t)]
png = open(sys.argv[3], "rb").read()
width, height = struct.unpack(">II", png[16:24]) if png[:8] == b"\x89PNG\r\n\x1a\n" else (0, 0)
print("%d of %d panels with series (none empty: %s); PNG %dx%d, %d bytes" % (
    len(panels) - len(empty), len(panels), not empty, width, height, len(png)))
sys.exit(0 if not empty and width >= 2000 and height >= 1000 and len(png) > 100000 else 1)
PY
then
  pass "the report and the picture"
else
  fail "the report or the picture"
fi

# A query that does not parse fails the run and names its panel; so does, with --require-data,
# a panel without data, unless --allow-empty names it.
python3 - "$dashboard" "$work" <<'PY'
import json, sys
dashboard = json.load(open(sys.argv[1]))
panels = [p for p in dashboard["panels"] if p.get("type") != "row"]
broken = json.loads(json.dumps(dashboard))
next(p for p in broken["panels"] if p.get("type") != "row")["targets"][0]["expr"] = "sum by (rule (ncclguard_webhook_findings_total"
json.dump(broken, open(sys.argv[2] + "/broken.json", "w"))
empty = json.loads(json.dumps(dashboard))
next(p for p in empty["panels"] if p.get("type") != "row")["targets"] = [
    {"refId": "A", "expr": 'ncclguard_webhook_requests_total{endpoint="nowhere"}', "datasource": panels[0]["datasource"]}]
json.dump(empty, open(sys.argv[2] + "/empty.json", "w"))
PY
first=$(python3 -c 'import json, sys; print(next(p["title"] for p in json.load(open(sys.argv[1]))["panels"] if p.get("type") != "row"))' "$dashboard")
render_rc() { python3 "$root/scripts/render-dashboard.py" --end "$end" "$@" >"$work/neg.log" 2>&1 && echo 0 || echo $?; }
rc=$(render_rc --prometheus "$url" --dashboard "$work/broken.json")
if [[ $rc == 1 ]] && grep -q "^FAIL  $first: bad_data" "$work/neg.log"; then
  pass "a query that does not parse: exit 1, its panel named"
else
  cat "$work/neg.log"; fail "a query that does not parse: exit $rc"
fi
rc=$(render_rc --prometheus "$url" --dashboard "$work/empty.json" --require-data)
if [[ $rc == 1 ]] && grep -q "^FAIL  $first: no series" "$work/neg.log"; then
  pass "--require-data and a panel without data: exit 1, its panel named"
else
  cat "$work/neg.log"; fail "--require-data and a panel without data: exit $rc"
fi
rc=$(render_rc --prometheus "$url" --dashboard "$work/empty.json" --require-data --allow-empty "^$first\$")
if [[ $rc == 0 ]]; then pass "--allow-empty lets that panel be empty"; else cat "$work/neg.log"; fail "--allow-empty: exit $rc"; fi
rc=$(render_rc --prometheus http://127.0.0.1:1)
if [[ $rc == 2 ]]; then pass "no Prometheus: exit 2"; else cat "$work/neg.log"; fail "no Prometheus: exit $rc"; fi

finish
