#!/usr/bin/env bash
# What one status write of a Kueue Workload costs kube-apiserver, by the form of the write: the
# controller's server-side apply of its check entry, an RFC 6902 JSON patch guarded by tests, and
# a merge patch of the whole list guarded by the resourceVersion. Per run, a fresh control plane
# (scripts/controlplane.sh, loopback only) with Kueue's CRDs from the Go module cache and no Kueue
# running, WRITES Workloads per form (default 2000; bench/kueue/workload_writes.py). Prints each
# run and, per form, the medians of RUNS runs (default 3) of kube-apiserver's and etcd's CPU
# milliseconds per write. Measures what bench/kueue.sh's 2,000 checks cost the API server.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
# shellcheck source=../scripts/controlplane/versions.sh disable=SC1091
source "$root/scripts/controlplane/versions.sh"
# shellcheck source=bench/kueue_lib.sh
source "$root/bench/kueue_lib.sh"
runs=${RUNS:-3}
writes=${WRITES:-2000}
forms=${FORMS:-apply,json-patch,merge-patch}
"$root/scripts/controlplane.sh" build kueue >/dev/null
kueue_src=$("$root/scripts/controlplane.sh" source-dir "sigs.k8s.io/kueue@$KUEUE_VERSION")

work=$(mktemp -d)
export NCCLGUARD_CONTROLPLANE_DIR=$work/cp
cleanup() {
  "$root/scripts/controlplane.sh" stop >/dev/null 2>&1 || true
  rm -rf "$work"
}
trap cleanup EXIT

: >"$work/results"
for run in $(seq "$runs"); do
  kueue_control_plane
  k create namespace bench >/dev/null
  env_file=$NCCLGUARD_CONTROLPLANE_DIR/controlplane.env
  field() { sed -n "s/^$1=//p" "$env_file"; }
  pid_of() { awk '{print $1}' "$NCCLGUARD_CONTROLPLANE_DIR/$1.pid"; }
  python3 "$root/bench/kueue/workload_writes.py" "$(field APISERVER_URL)" "$(field CA_FILE)" \
    "$(field ADMIN_CERT_FILE)" "$(field ADMIN_KEY_FILE)" "$(pid_of kube-apiserver)" \
    "$(pid_of etcd)" "$writes" "$forms" | sed "s/^{/{\"run\":$run,/" | tee -a "$work/results"
  "$root/scripts/controlplane.sh" stop >/dev/null 2>&1
done

python3 - "$work/results" <<'PY'
import json, statistics, sys
rows = [json.loads(line) for line in open(sys.argv[1])]
print("median of %d runs, %d writes a form:" % (len({r["run"] for r in rows}), rows[0]["writes"]))
for form in dict.fromkeys(r["form"] for r in rows):
    mine = [r for r in rows if r["form"] == form]
    print("  %-11s kube-apiserver %.2f CPU ms a write, etcd %.2f; %.2f s for all" % (
        form, statistics.median(r["apiserver_ms"] for r in mine),
        statistics.median(r["etcd_ms"] for r in mine), statistics.median(r["seconds"] for r in mine)))
PY
