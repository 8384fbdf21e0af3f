#!/usr/bin/env bash
# Scrape benchmark (issue 27): what one scrape of the controller's /metrics costs on a cluster of
# NODES (default 1,000) validated nodes, each NodeValidation carrying the 14 checks the real probe
# reports on this host (`ncclguard probe --once -o json`). On a fresh control plane
# (scripts/controlplane.sh: real etcd + kube-apiserver, loopback only):
#   1. the nodes and their NodeValidations (bench/controller's driver);
#   2. `ncclguard controller --metrics-listen 127.0.0.1:PORT`, until its /metrics holds a
#      ncclguard_node_check_status series for every node and check;
#   3. SCRAPES (default 20) GETs with curl: time and bytes;
#   4. the real Prometheus (Debian's) scraping it every second for SCRAPE_SECONDS (default 20):
#      its own scrape_duration_seconds and scrape_samples_scraped for the target.
# Prints medians, the controller's RSS and how much one scrape adds to it.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${NCCLGUARD_BUILD_DIR:-$root/build}
nodes=${NODES:-1000}
scrapes=${SCRAPES:-20}
scrape_seconds=${SCRAPE_SECONDS:-20}
ncclguard=${NCCLGUARD_BIN:-$build/cli/ncclguard}
driver=$build/bench/controller/ncclguard_controller_bench
[[ -n ${NCCLGUARD_SKIP_BUILD:-} ]] || "$root/scripts/build.sh" ncclguard ncclguard_controller_bench >/dev/null
command -v prometheus >/dev/null || { echo "prometheus not installed (scripts/bootstrap.sh)" >&2; exit 1; }

# shellcheck source=../scripts/controlplane/versions.sh
source "$root/scripts/controlplane/versions.sh"
training_operator=$("$root/scripts/controlplane.sh" source-dir "github.com/kubeflow/training-operator@$TRAINING_OPERATOR_VERSION")
jobset=$("$root/scripts/controlplane.sh" source-dir "sigs.k8s.io/jobset@$JOBSET_VERSION")

work=$(mktemp -d)
controller_pid="" prometheus_pid=""
export NCCLGUARD_CONTROLPLANE_DIR=$work/cp
cleanup() {
  # Every step, whatever the one before returned: under errexit a `wait` answering a killed
  # child's status would end the trap here and leave the rest running.
  set +e
  [[ -n $prometheus_pid ]] && kill "$prometheus_pid" 2>/dev/null && wait "$prometheus_pid" 2>/dev/null
  [[ -n $controller_pid ]] && kill "$controller_pid" 2>/dev/null && wait "$controller_pid" 2>/dev/null
  "$root/scripts/controlplane.sh" stop >/dev/null 2>&1 || true
  rm -rf "$work"
}
trap cleanup EXIT

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }

"$root/scripts/controlplane.sh" start >"$work/cp.log" 2>&1
kubeconfig=$NCCLGUARD_CONTROLPLANE_DIR/kubeconfig
kubectl=$(sed -n 's/^export PATH=\(.*\):"\$PATH"$/\1/p' "$work/cp.log")/kubectl
for crd in "$training_operator/manifests/base/crds/kubeflow.org_pytorchjobs.yaml" \
  "$root/tests/controlplane/crds/mpijob-crd.yaml" "$jobset/config/components/crd/bases/jobset.x-k8s.io_jobsets.yaml" \
  "$root"/crds/{nodevalidation,ncclpolicy}.yaml; do
  "$kubectl" --kubeconfig "$kubeconfig" apply --server-side -f "$crd" >/dev/null
done
"$kubectl" --kubeconfig "$kubeconfig" wait --for condition=established --timeout=60s crd --all >/dev/null

# The real probe's report on this host: its 14 checks as every node's.
"$ncclguard" probe --once -o json --instance-type p5.48xlarge >"$work/report.json" 2>/dev/null || true
checks=$(python3 -c 'import json,sys; print(len(json.load(open(sys.argv[1]))["checks"]))' "$work/report.json")
start=$SECONDS
"$driver" setup "$kubeconfig" bench "$nodes" "$work/report.json"
setup_s=$((SECONDS - start))

port=$(free_port)
"$ncclguard" controller --kubeconfig "$kubeconfig" --leader-elect=false --health-listen 0 \
  --metrics-listen "127.0.0.1:$port" --log-level warn 2>"$work/controller.log" &
controller_pid=$!
url="http://127.0.0.1:$port/metrics"
# RSS before the first scrape, once the caches have the nodes (the first scrape below may wait).
sleep "${SYNC_SECONDS:-15}"
rss_unscraped_kb=$(awk '/^VmRSS:/ {print $2}' "/proc/$controller_pid/status")
series() { curl -sf "$url" | grep -c '^ncclguard_node_check_status{' || true; }
want=$((nodes * checks))
for _ in $(seq 240); do
  [[ "$(series)" == "$want" ]] && break
  sleep 0.5
done
have=$(series)
[[ "$have" == "$want" ]] || { echo "the controller exposes $have node check series, not $want" >&2; tail "$work/controller.log" >&2; exit 1; }

# Each GET: its time and size, and the controller's RSS before it and at its highest during it
# (VmHWM, reset before the GET by writing 5 to /proc/PID/clear_refs): what a scrape costs in memory.
: >"$work/curl"
status=/proc/$controller_pid/status
for _ in $(seq "$scrapes"); do
  echo 5 >"/proc/$controller_pid/clear_refs"
  before_kb=$(awk '/^VmRSS:/ {print $2}' "$status")
  took=$(curl -sf -o /dev/null -w '%{time_total} %{size_download}' "$url")
  echo "$took $before_kb $(awk '/^VmHWM:/ {print $2}' "$status")" >>"$work/curl"
  sleep "${GET_GAP_SECONDS:-2}"  # jemalloc's background thread returns the freed pages (1 s)
done
curl -sf "$url" >"$work/metrics.txt"
samples=$(grep -vc '^#' "$work/metrics.txt")
gzip_bytes=$(gzip -c "$work/metrics.txt" | wc -c)

# The real Prometheus, scraping it as a cluster's would.
prom_port=$(free_port)
mkdir -p "$work/prometheus"
cat >"$work/prometheus/prometheus.yml" <<YAML
global: {scrape_interval: ${SCRAPE_INTERVAL:-1s}, scrape_timeout: 1s}
scrape_configs:
  - job_name: controller
    static_configs: [{targets: ["127.0.0.1:$port"]}]
YAML
prometheus --config.file="$work/prometheus/prometheus.yml" --storage.tsdb.path="$work/prometheus/data" \
  --web.listen-address="127.0.0.1:$prom_port" --log.level=warn 2>"$work/prometheus.log" &
prometheus_pid=$!
sleep "$scrape_seconds"
query() {
  curl -sf --get --data-urlencode "query=$1" "http://127.0.0.1:$prom_port/api/v1/query" |
    python3 -c 'import json,sys; r=json.load(sys.stdin)["data"]["result"]; print(r[0]["value"][1] if r else "nan")'
}
window="${scrape_seconds}s"
prom_duration=$(query "quantile_over_time(0.5, scrape_duration_seconds{job=\"controller\"}[$window])")
prom_samples=$(query "max_over_time(scrape_samples_scraped{job=\"controller\"}[$window])")
prom_scrapes=$(query "count_over_time(up{job=\"controller\"}[$window])")
prom_up=$(query "min_over_time(up{job=\"controller\"}[$window])")
rss_kb=$(awk '/^VmRSS:/ {print $2}' "/proc/$controller_pid/status")

python3 - "$work/curl" "$nodes" "$checks" "$samples" "$gzip_bytes" "$prom_duration" "$prom_samples" \
  "$prom_scrapes" "$prom_up" "$rss_kb" "$setup_s" "$rss_unscraped_kb" <<'PY'
import os, statistics, sys
rows = [line.split() for line in open(sys.argv[1])]
times = [float(row[0]) * 1000 for row in rows]
sizes = [int(row[1]) for row in rows]
before = [int(row[2]) / 1024 for row in rows]
growth = [(int(row[3]) - int(row[2])) / 1024 for row in rows]
nodes, checks, samples, gz, pdur, psamples, pscrapes, pup, rss, setup, rss0 = sys.argv[2:]
print(f"scrape benchmark: {nodes} nodes x {checks} checks (NodeValidations made in {setup} s), "
      f"nproc={os.cpu_count()}")
print(f"  curl, {len(times)} GETs: median {statistics.median(times):.1f} ms "
      f"(min {min(times):.1f}, max {max(times):.1f}), {statistics.median(sizes) / 1024:.0f} KiB "
      f"({int(gz) / 1024:.0f} KiB gzipped), {samples} samples")
print(f"  controller RSS during one GET: +{statistics.median(growth):.1f} MB median "
      f"(max +{max(growth):.1f}) over {statistics.median(before):.1f} MB before it")
print(f"  Prometheus, {float(pscrapes):.0f} scrapes: median scrape_duration_seconds "
      f"{float(pdur) * 1000:.1f} ms, scrape_samples_scraped {float(psamples):.0f}, up min {pup}")
print(f"  controller RSS: {int(rss0) / 1024:.1f} MB before the first scrape, "
      f"{int(rss) / 1024:.1f} MB after {len(times) + float(pscrapes):.0f}")
PY
