#!/usr/bin/env python3
"""Checks the rendered alerting rules against their unit tests and the docs:
  - every alert is named Ncclguard<UpperCamelCase>, has a severity label (critical or warning)
    and the annotations summary, description and runbook_url;
  - every link in an annotation into docs/*.md (runbook_url into docs/operator.md, "Alerts";
    guide into docs/guide.md) names an anchor that file has;
  - every alert has a unit test in which it fires and one in which it does not, and every
    alertname the tests name is an alert;
  - every ncclguard metric an expression reads is one ncclguard exports (ncclguard_metrics.py).

    check_rules.py RULES.yaml TESTS.yaml REPO_ROOT
"""
import os
import re
import sys

import yaml

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from docs_anchors import anchors  # noqa: E402
from ncclguard_metrics import sample_names  # noqa: E402

NAME = re.compile(r"^Ncclguard[A-Z][A-Za-z0-9]*$")
DOC_LINK = re.compile(r"https://github\.com/ncclguard/ncclguard/blob/main/(docs/[a-z-]+\.md)#([A-Za-z0-9_-]+)")
METRIC = re.compile(r"\bncclguard_[a-z0-9_]+\b")


def main():
    rules_path, tests_path, root = sys.argv[1:4]
    with open(rules_path) as f:
        groups = yaml.safe_load(f)["groups"]
    with open(tests_path) as f:
        tests = yaml.safe_load(f)["tests"]
    problems = []
    alerts = {}
    for group in groups:
        for rule in group["rules"]:
            if "alert" in rule:
                if rule["alert"] in alerts:
                    problems.append("%s: defined twice" % rule["alert"])
                alerts[rule["alert"]] = rule
    known = sample_names()
    doc_anchors = {}
    for name, rule in sorted(alerts.items()):
        if not NAME.match(name):
            problems.append("%s: not Ncclguard<UpperCamelCase>" % name)
        if rule.get("labels", {}).get("severity") not in ("critical", "warning"):
            problems.append("%s: severity label is %r, not critical or warning" % (name, rule.get("labels", {}).get("severity")))
        annotations = rule.get("annotations", {})
        for key in ("summary", "description", "runbook_url"):
            if not str(annotations.get(key, "")).strip():
                problems.append("%s: no %s annotation" % (name, key))
        if not re.search(r"docs/operator\.md#", annotations.get("runbook_url", "")):
            problems.append("%s: runbook_url %r is not a section of docs/operator.md" % (name, annotations.get("runbook_url")))
        for key, value in annotations.items():
            for doc, anchor in DOC_LINK.findall(str(value)):
                if doc not in doc_anchors:
                    doc_anchors[doc] = anchors(os.path.join(root, doc))
                if anchor not in doc_anchors[doc]:
                    problems.append("%s: %s links %s#%s, which %s has no anchor for" % (name, key, doc, anchor, doc))
        for metric in sorted(set(METRIC.findall(rule["expr"])) - known):
            problems.append("%s: reads %s, which ncclguard does not export (tests/metrics/ncclguard_metrics.py)" % (name, metric))

    fires, quiet = set(), set()
    for test in tests:
        for case in test.get("alert_rule_test", []):
            name = case["alertname"]
            if name not in alerts:
                problems.append("tests: %s at %s is not an alert" % (name, case["eval_time"]))
            (fires if case.get("exp_alerts") else quiet).add(name)
    for name in sorted(alerts):
        if name not in fires:
            problems.append("%s: no unit test in which it fires (tests/metrics/alerts.test.yaml)" % name)
        if name not in quiet:
            problems.append("%s: no unit test in which it stays quiet (tests/metrics/alerts.test.yaml)" % name)

    for problem in problems:
        print("FAIL  " + problem)
    if problems:
        print("check_rules: %d problems in %d alerts" % (len(problems), len(alerts)))
        return 1
    print("check_rules: %d alerts, each fires and stays quiet in its tests, links and metrics known" % len(alerts))
    return 0


if __name__ == "__main__":
    sys.exit(main())
