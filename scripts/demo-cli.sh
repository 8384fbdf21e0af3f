#!/usr/bin/env bash
# The offline CLI demo on the shipped examples: ncclguard finds what breaks NCCL over EFA in a
# PyTorchJob, fixes what can be fixed, and denies what cannot, with links into the guide.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${NCCLGUARD_BUILD_DIR:-$root/build}
ncclguard=$build/cli/ncclguard
examples=examples
cd "$root"

say() { printf '\n\033[1m== %s\033[0m\n' "$*"; }

if [ ! -x "$ncclguard" ]; then
  say "Building ncclguard (first run only)"
  "$root/scripts/bootstrap.sh"
  "$root/scripts/build.sh" ncclguard >&2
fi

say "1. Lint a p5.48xlarge PyTorchJob written the usual way: no EFA devices, no IPC_LOCK, no /dev/shm"
"$ncclguard" lint "$examples/pytorchjob-broken.yaml" || true

say "2. What 'ncclguard fix' changes (diff of the job before and after)"
before=$(mktemp) after=$(mktemp)
trap 'rm -f "$before" "$after"' EXIT
# The report-only policy writes the job back unchanged, in the same layout as the fixed one.
"$ncclguard" fix --policy "$examples/policy-report-only.yaml" "$examples/pytorchjob-broken.yaml" >"$before" 2>/dev/null
"$ncclguard" fix "$examples/pytorchjob-broken.yaml" >"$after"
diff -u --label "pytorchjob-broken.yaml" --label "fixed" "$before" "$after" || true

say "3. The fixed job lints clean"
"$ncclguard" lint - <"$after"

say "4. A job that cannot be fixed: NCCL_PROTO=fast and a WORLD_SIZE that does not match"
set +e
"$ncclguard" lint "$examples/pytorchjob-denied.yaml"
code=$?
set -e
echo "exit code: $code (1 = denied: the admission webhook would reject this job)"

say "5. Every finding links the debugging guide; explain one rule"
"$ncclguard" explain efa-resources-missing

say "Done. Run the tests with: scripts/test.sh"
