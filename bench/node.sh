#!/usr/bin/env bash
# The real test node (scripts/node.sh) and the chart on it. Per run, on a fresh node:
#   1. start: `scripts/node.sh start` until the Node is Ready;
#   2. install: `helm install --wait` of charts/ncclguard (image from scripts/image.sh, imported
#      once per run, not timed) until every pod is Ready;
#   3. failover: the Lease holder's pod deleted until the other replica holds the Lease and
#      logs "reconciling".
# Prints each run and the medians of RUNS runs (default 5). The cold `scripts/node.sh build` is
# timed once with COLD=1 (it empties Go's build cache: about 10 minutes on 2 cores).
# Needs root, like the node. Usage: bench/node.sh
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
# shellcheck source=bench/node_lib.sh
source "$root/bench/node_lib.sh"
node_bench node

if [[ -n ${COLD:-} ]]; then
  go="$(command -v go || echo /usr/local/go/bin/go)"
  "$go" clean -cache
  for b in kubelet kube-scheduler kube-controller-manager kube-proxy; do
    rm -f "${XDG_CACHE_HOME:-$HOME/.cache}/ncclguard/controlplane/"*/stamps/"$b"
  done
  t0=$(now)
  "$root/scripts/node.sh" build >/dev/null
  echo "cold scripts/node.sh build: $(elapsed "$t0" "$(now)") s"
fi
"$root/scripts/node.sh" build >/dev/null 2>&1
t0=$(now)
"$root/scripts/node.sh" build >/dev/null 2>&1
echo "warm scripts/node.sh build: $(elapsed "$t0" "$(now)") s"

ns=ncclguard-system
declare -a starts=() installs=() failovers=()
for ((run = 1; run <= runs; run++)); do
  t0=$(now)
  eval "$("$root/scripts/node.sh" start 2>/dev/null)"
  start_s=$(elapsed "$t0" "$(now)")
  "$root/scripts/image.sh" >/dev/null 2>&1
  t0=$(now)
  helm install ncclguard "$root/charts/ncclguard" -n "$ns" --create-namespace --wait --timeout 180s >/dev/null
  install_s=$(elapsed "$t0" "$(now)")
  holder() { kubectl -n "$ns" get lease ncclguard-controller -o jsonpath='{.spec.holderIdentity}' 2>/dev/null; }
  until [[ -n "$(holder)" ]]; do sleep 0.2; done
  leader=$(holder)
  t0=$(now)
  kubectl -n "$ns" delete pod "$leader" --wait=false >/dev/null
  while :; do
    h=$(holder)
    if [[ -n $h && $h != "$leader" ]] &&
      kubectl -n "$ns" logs "$h" 2>/dev/null | grep "\"msg\":\"reconciling\",\"identity\":\"$h\"" >/dev/null; then
      break
    fi
    sleep 0.2
  done
  failover_s=$(elapsed "$t0" "$(now)")
  echo "run $run: start to Ready $start_s s, helm install to Ready $install_s s, leader deleted to the other reconciling $failover_s s"
  starts+=("$start_s") installs+=("$install_s") failovers+=("$failover_s")
  "$root/scripts/node.sh" stop >/dev/null 2>&1
done
echo "median of $runs: start to Ready $(printf '%s\n' "${starts[@]}" | median) s," \
  "helm install to Ready $(printf '%s\n' "${installs[@]}" | median) s," \
  "failover $(printf '%s\n' "${failovers[@]}" | median) s"
