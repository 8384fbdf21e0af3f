# The setup bench/node.sh and bench/training.sh share: sourced after `root` is set.
#   node_bench NAME   a scratch folder for the run (`work`) holding the node's state; on exit the
#                     node is stopped and the folder removed
#   now, elapsed A B, median (stdin, one number a line)
# shellcheck shell=bash
# shellcheck disable=SC2034 # read by the sourcing script
runs=${RUNS:-5}
export NCCLGUARD_BUILD_DIR=${NCCLGUARD_BUILD_DIR:-$root/build}

node_bench() {
  work=$(mktemp -d "/tmp/ncclguard-$1-bench.XXXXXX")
  export NCCLGUARD_NODE_DIR=$work/node
  trap node_bench_cleanup EXIT
}
node_bench_cleanup() {
  "$root/scripts/node.sh" stop >/dev/null 2>&1 || true
  rm -rf "$work"
}

now() { date +%s.%N; }
elapsed() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.1f", b - a }'; }
median() { sort -n | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
