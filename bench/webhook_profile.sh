#!/usr/bin/env bash
# Where a webhook request's instructions go: `ncclguard webhook` under valgrind's callgrind (2
# listener threads), warmed up, its counters zeroed, then REQUESTS mutating reviews
# (bench/webhook/worker-pod-review.json) at RATE a second on 2 TLS keep-alive connections, then
# dumped. Prints the instructions per request of the whole process and of the phases of our
# handler (inclusive). Callgrind counts instructions, which other work on the machine does not
# change; it does not see the kernel or the load generator.
#   bench/webhook_profile.sh            (REQUESTS=400 RATE=40, NCCLGUARD_BIN: another build's binary;
#                                        PROFILE_OUT: keep the annotation, PROFILE_RAW: callgrind's output)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${NCCLGUARD_BUILD_DIR:-$root/build}
requests=${REQUESTS:-400}
rate=${RATE:-40}
ncclguard=${NCCLGUARD_BIN:-$build/cli/ncclguard}
[[ -n ${NCCLGUARD_SKIP_BUILD:-} ]] || "$root/scripts/build.sh" ncclguard ncclguard_loadgen >/dev/null

# shellcheck source=bench/webhook_lib.sh
source "$root/bench/webhook_lib.sh"
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')

valgrind --tool=callgrind --callgrind-out-file="$work/callgrind.out" \
  "$ncclguard" webhook --listen "127.0.0.1:$port" --tls-cert-file "$work/tls.crt" \
  --tls-key-file "$work/tls.key" --threads 2 2>"$work/webhook.log" &
server_pid=$!
ready=false
for _ in $(seq 300); do
  if curl -s -o /dev/null --cacert "$work/tls.crt" "https://127.0.0.1:$port/" 2>/dev/null; then
    ready=true
    break
  fi
  sleep 0.2
done
$ready || { echo "the webhook under callgrind did not answer in 60 s" >&2; exit 1; }
((requests >= rate)) || { echo "REQUESTS must be at least RATE" >&2; exit 2; }
load() {
  "$build/bench/webhook/ncclguard_loadgen" --port "$port" --path /mutate --body "$review" \
    --ca "$work/tls.crt" --connections 2 --seconds "$1" --rate "$rate" \
    --expect '"patchType":"JSONPatch"' >"$work/load.json"
}
load 3  # warm-up: the allocator, the TLS sessions, the lazily built tables
callgrind_control -z "$server_pid" >/dev/null
load $((requests / rate))
callgrind_control -d "$server_pid" >/dev/null
sent=$(python3 -c 'import json, sys; r = json.load(open(sys.argv[1])); print(r["requests"] - r["errors"])' \
  "$work/load.json")
dump=$(ls -t "$work"/callgrind.out.* | head -1)
callgrind_annotate --inclusive=yes --threshold=100 "$dump" >"$work/annotated.txt" 2>/dev/null
[[ -z ${PROFILE_OUT:-} ]] || cp "$work/annotated.txt" "$PROFILE_OUT"
[[ -z ${PROFILE_RAW:-} ]] || cp "$dump" "$PROFILE_RAW"
python3 - "$work/annotated.txt" "$sent" <<'PY'
import re, sys
text, sent = open(sys.argv[1]).read(), int(sys.argv[2])
total = int(re.search(r"^([\d,]+) \(100.0%\)\s+PROGRAM TOTALS", text, re.M).group(1).replace(",", ""))
def inclusive(pattern):
    best = 0
    for line in text.splitlines():
        m = re.match(r"\s*([\d,]+) \([^)]*\)\s+(.*)$", line)
        if m and re.search(pattern, m.group(2)):
            best = max(best, int(m.group(1).replace(",", "")))
    return best
if sent == 0:
    sys.exit("no request was answered while counting")
print(f"requests answered while counted: {sent}")
print(f"server total: {total / sent / 1e3:.0f} K instructions a request")
for name, pattern in [
        ("our handler (WebhookServer::AnswerReview)", r"WebhookServer::AnswerReview\("),
        ("parse (ParseAdmissionReview)", r"ParseAdmissionReview\("),
        ("- read the JSON (core::ReadJson)", r"core::ReadJson\b"),
        ("admit (Mutate)", r"webhook::\(anonymous namespace\)::Mutate\("),
        ("- the fix rules (EvaluateIn)", r"EvaluateIn\("),
        ("-- template facts (ReadTemplateFacts)", r"ReadTemplateFacts\("),
        ("-- the patch: PatchPlan::Add", r"PatchPlan::Add\("),
        ("-- the patch: PatchPlan::Append", r"PatchPlan::Append\("),
        ("trees freed (nlohmann's json_value::destroy)", r"json_value::destroy\("),
        ("encode (EncodeAdmissionReview)", r"EncodeAdmissionReview\b"),
        ("the admission log line (log::Write)", r"log::Write\("),
        ("metrics (CountAdmission)", r"CountAdmission\("),
        ("malloc", r"\bmalloc\b|je_malloc|\bmallocx?\b"),
        ("free", r"\bfree\b|je_free|\bsdallocx\b"),
        ("malloc_usable_size", r"malloc_usable_size"),
]:
    print(f"  {name}: {inclusive(pattern) / sent / 1e3:.0f} K")
PY
