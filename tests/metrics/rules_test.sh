#!/usr/bin/env bash
# The alerts (ctest metrics_rules): charts/ncclguard/templates/prometheusrule.yaml rendered into
# a plain rules file (scripts/render-rules.sh) with the default values, then
#  1. `promtool check rules` on it, and on renders with other values (webhook and probe off, a
#     scrape-job selector of one's own, other thresholds), which must show those values;
#  2. `promtool test rules` with tests/metrics/alerts.test.yaml;
#  3. tests/metrics/check_rules.py: every alert fires in a test and stays quiet in another, has
#     its severity, summary, description and a runbook_url whose anchor docs/operator.md has,
#     and reads only metrics ncclguard exports.
# Needs promtool (Debian's prometheus, scripts/bootstrap.sh) and the helm of
# scripts/controlplane.sh build.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
command -v promtool >/dev/null ||
  { echo "rules_test: FAIL: promtool not found: scripts/bootstrap.sh installs it (Debian package prometheus)"; exit 1; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

failures=()
pass() { printf 'ok    %s\n' "$*"; }
fail() { printf 'FAIL  %s\n' "$*"; failures+=("$*"); }

"$root/scripts/render-rules.sh" >"$work/rules.yaml"
if promtool check rules "$work/rules.yaml" >"$work/check.log" 2>&1; then
  pass "promtool check rules (default values): $(grep -o '[0-9]* rules found' "$work/check.log")"
else
  fail "promtool check rules (default values)"; cat "$work/check.log"
fi

# render <name> <helm args...>: the rules with other values, checked by promtool.
render() {
  local name=$1; shift
  if "$root/scripts/render-rules.sh" "$@" >"$work/$name.yaml" 2>"$work/$name.log" &&
    promtool check rules "$work/$name.yaml" >>"$work/$name.log" 2>&1; then
    pass "promtool check rules ($name): $(grep -o '[0-9]* rules found' "$work/$name.log")"
  else
    fail "promtool check rules ($name)"; cat "$work/$name.log"
  fi
}
expect_in() { # expect_in <name> <description> <fixed string>
  if grep -qF -- "$3" "$work/$1.yaml"; then pass "$1: $2"; else fail "$1: $2 ($3 not found)"; fi
}
expect_not_in() {
  if grep -qF -- "$3" "$work/$1.yaml"; then fail "$1: $2 ($3 found)"; else pass "$1: $2"; fi
}
render controller-only --set webhook.enabled=false --set probe.enabled=false
expect_not_in controller-only "no webhook alerts without the webhook" "NcclguardWebhookUnavailable"
expect_not_in controller-only "no probe alerts without the probe" "NcclguardProbeNotReporting"
expect_in controller-only "the controller's alerts" "alert: NcclguardNoLeader"
expect_not_in controller-only "no webhook in the down alert's description" "The webhook runs in these pods"
render other-values --namespace gpu-ops --set fullnameOverride=guard \
  --set metrics.prometheusRule.heldJobMinutes=45 --set metrics.prometheusRule.certificateExpiryDays=7 \
  --set metrics.prometheusRule.webhookLatencySeconds=0.25 --set metrics.prometheusRule.probeStaleMinutes=40 \
  --set webhook.failurePolicy=Ignore --set metrics.prometheusRule.runbookBaseURL=https://wiki.example/ncclguard
expect_in other-values "the default job selector follows the release" 'up{job="guard-controller-metrics",namespace="gpu-ops"}'
expect_in other-values "heldJobMinutes" "for: 45m"
expect_in other-values "certificateExpiryDays" "< 7 * 86400"
expect_in other-values "webhookLatencySeconds" "> 0.25"
expect_in other-values "probeStaleMinutes" "> 40 * 60"
expect_in other-values "failurePolicy Ignore in the description" "are admitted unchecked"
expect_in other-values "runbookBaseURL" "runbook_url: https://wiki.example/ncclguard#ncclguardcontrollerdown"
render own-selector --set-string 'metrics.prometheusRule.controllerSelector=job="kubernetes-pods"\,pod=~"ncclguard-controller-.*"'
expect_in own-selector "controllerSelector" 'absent(up{job="kubernetes-pods",pod=~"ncclguard-controller-.*"} == 1)'

cp "$root/tests/metrics/alerts.test.yaml" "$work/"
if promtool test rules "$work/alerts.test.yaml" >"$work/test.log" 2>&1; then
  pass "promtool test rules tests/metrics/alerts.test.yaml"
else
  fail "promtool test rules tests/metrics/alerts.test.yaml"; cat "$work/test.log"
fi

if python3 "$root/tests/metrics/check_rules.py" "$work/rules.yaml" "$root/tests/metrics/alerts.test.yaml" "$root" >"$work/coverage.log"; then
  pass "$(tail -1 "$work/coverage.log")"
else
  cat "$work/coverage.log"; fail "check_rules.py: $(tail -1 "$work/coverage.log")"
fi

if ((${#failures[@]})); then
  printf 'rules_test: %d failed: %s\n' "${#failures[@]}" "$(IFS=';'; echo "${failures[*]}")"
  exit 1
fi
echo "rules_test: all passed"
