# The scale cluster of bench/scale.sh and bench/scale_faults.sh: scripts/controlplane.sh's etcd +
# kube-apiserver (with an audit log of the controller's requests alone), the CRDs, a client
# certificate of the controller's own, and scripts/kwok.sh's scheduler, controller-manager and
# kwok. Sourced; the caller sets $root and $NCCLGUARD_CONTROLPLANE_DIR.
# shellcheck shell=bash disable=SC2154 # set by the caller

# shellcheck source=../scripts/controlplane/versions.sh
source "$root/scripts/controlplane/versions.sh"
# The PyTorchJob and JobSet CRDs are their projects' own, from the Go module cache.
training_operator=$("$root/scripts/controlplane.sh" source-dir "github.com/kubeflow/training-operator@$TRAINING_OPERATOR_VERSION")
jobset=$("$root/scripts/controlplane.sh" source-dir "sigs.k8s.io/jobset@$JOBSET_VERSION")

rss_kb() { awk '/^VmRSS:/ {print $2}' "/proc/$1/status"; }
# CPU seconds (user + system) a process has used so far.
cpu_s() { awk -v hz="$(getconf CLK_TCK)" '{printf "%.2f", ($14 + $15) / hz}' "/proc/$1/stat"; }

free_port() {
  python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

# start_scale_cluster <work dir> [nokwok]: sets kubeconfig (admin), controller_kubeconfig and
# kubectl; with nokwok, no scheduler, controller-manager nor kwok.
start_scale_cluster() {
  local dir="$1"
  cat >"$dir/audit-policy.yaml" <<'YAML'
apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: [RequestReceived]
rules:
- level: Metadata
  users: [ncclguard-controller]
- level: None
YAML
  : >"$dir/audit.log"
  : >"$dir/audit.marks"
  export NCCLGUARD_CONTROLPLANE_EXTRA_APISERVER_ARGS="--audit-policy-file=$dir/audit-policy.yaml --audit-log-path=$dir/audit.log --audit-log-mode=blocking --audit-log-maxsize=0 --max-requests-inflight=800 --max-mutating-requests-inflight=400 --disable-admission-plugins=TaintNodesByCondition"
  "$root/scripts/controlplane.sh" start >"$dir/cp.log" 2>&1 || { cat "$dir/cp.log" >&2; return 1; }
  local pki="$NCCLGUARD_CONTROLPLANE_DIR/pki"
  kubeconfig=$NCCLGUARD_CONTROLPLANE_DIR/kubeconfig
  kubectl=$(sed -n 's/^BIN_DIR=//p' "$NCCLGUARD_CONTROLPLANE_DIR/controlplane.env")/kubectl
  # The controller's own user (a cluster admin too), so the audit log holds its requests alone.
  openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout "$pki/controller.key" \
    -out "$pki/controller.csr" -subj "/O=system:masters/CN=ncclguard-controller" 2>/dev/null
  openssl x509 -req -in "$pki/controller.csr" -CA "$pki/ca.crt" -CAkey "$pki/ca.key" -CAcreateserial \
    -days 2 -out "$pki/controller.crt" \
    -extfile <(printf 'extendedKeyUsage=clientAuth\n') 2>/dev/null
  controller_kubeconfig=$NCCLGUARD_CONTROLPLANE_DIR/controller.kubeconfig
  sed -e "s#$pki/admin.crt#$pki/controller.crt#" -e "s#$pki/admin.key#$pki/controller.key#" \
    "$kubeconfig" >"$controller_kubeconfig"
  local crd
  for crd in "$training_operator/manifests/base/crds/kubeflow.org_pytorchjobs.yaml" \
    "$root/tests/controlplane/crds/mpijob-crd.yaml" "$jobset/config/components/crd/bases/jobset.x-k8s.io_jobsets.yaml" \
    "$root"/crds/{nodevalidation,ncclpolicy}.yaml; do
    "$kubectl" --kubeconfig "$kubeconfig" apply --server-side -f "$crd" >/dev/null
  done
  "$kubectl" --kubeconfig "$kubeconfig" wait --for condition=established --timeout=60s crd --all >/dev/null
  [[ ${2:-} == nokwok ]] && return 0
  "$root/scripts/kwok.sh" start >"$dir/kwok.log" 2>&1 || { cat "$dir/kwok.log" >&2; return 1; }
}

stop_scale_cluster() {
  "$root/scripts/kwok.sh" stop >/dev/null 2>&1 || true
  "$root/scripts/controlplane.sh" stop >/dev/null 2>&1 || true
}

scrape() { curl -fsS --max-time 10 "http://127.0.0.1:$1/metrics"; }

wait_metrics() {
  local i
  for i in $(seq 600); do
    scrape "$1" >/dev/null 2>&1 && return 0
    ((i % 100)) || echo "scale: waiting for the controller's metrics on :$1" >&2
    sleep 0.1
  done
  echo "scale: the controller serves no metrics on :$1" >&2
  return 1
}

# audit_mark <work dir> <phase>: where the audit log stands as <phase> ends.
audit_mark() { printf '%s %s\n' "$2" "$(wc -l <"$1/audit.log")" >>"$1/audit.marks"; }

# The pods stored: a LIST of one pod and the remaining count it reports (no LIST of 100,000 pods).
stored_pods() {
  local pki="$NCCLGUARD_CONTROLPLANE_DIR/pki" url
  url=$(sed -n 's/^APISERVER_URL=//p' "$NCCLGUARD_CONTROLPLANE_DIR/controlplane.env")
  curl -fsS --max-time 30 --cacert "$pki/ca.crt" --cert "$pki/admin.crt" --key "$pki/admin.key" \
    "$url/api/v1/pods?limit=1" |
    python3 -c 'import json, sys; d = json.load(sys.stdin); print(len(d["items"]) + d["metadata"].get("remainingItemCount", 0))'
}

# wait_pods_settle <max seconds>: until the stored pod count is the same three samples 5 s
# apart; prints it.
wait_pods_settle() {
  local deadline=$((SECONDS + $1)) last=-1 now same=0
  while ((SECONDS < deadline)); do
    now=$(stored_pods) || now=-1
    if [[ $now == "$last" ]]; then same=$((same + 1)); else same=0; fi
    last=$now
    ((same >= 3)) && break
    sleep 5
  done
  printf '%s' "${last%.*}"
}

# The RSS once it is the same over three 1 s samples (at most 120 s).
stable_rss() {
  local last=0 stable=0 now
  for _ in $(seq 120); do
    now=$(rss_kb "$1")
    if [[ $now == "$last" ]]; then stable=$((stable + 1)); else stable=0; fi
    last=$now
    [[ $stable -ge 3 ]] && break
    sleep 1
  done
  printf '%s' "$last"
}

# sample_controller <pid> <metrics port> <period>: one line per period: seconds, RSS kB, the
# controller's open TCP connections (its watches ride one each), its watch restarts so far, its
# work queues' depth, the bytes its caches hold (all informers) and the Events cache's share, and
# what jemalloc holds: the program's objects (allocated) and its pages in RAM (resident).
sample_controller() {
  local pid="$1" port="$2" period="$3" begin=$SECONDS sockets counts rss
  while kill -0 "$pid" 2>/dev/null; do
    # The RSS before the scrape: the scrape's own memory (its families and text, freed by the time
    # of the next sample) is in the peak (VmHWM), not in every sample.
    rss=$(rss_kb "$pid")
    sockets=$(find "/proc/$pid/fd" -lname 'socket:*' 2>/dev/null | wc -l)
    counts=$(scrape "$port" 2>/dev/null | awk '/^ncclguard_watch_restarts_total/ {r += $2}
      /^ncclguard_workqueue_depth/ {d += $2}
      /^ncclguard_informer_stored_bytes/ {c += $2; if ($0 ~ /resource="events"/) e += $2}
      /^ncclguard_allocator_bytes\{state="allocated"\}/ {a = $2}
      /^ncclguard_allocator_bytes\{state="resident"\}/ {m = $2}
      END {print r + 0, d + 0, c + 0, e + 0, a + 0, m + 0}')
    printf '%s %s %s %s\n' "$((SECONDS - begin))" "$rss" "$sockets" "$counts"
    sleep "$period"
  done
}
