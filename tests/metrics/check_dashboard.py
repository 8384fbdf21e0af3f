#!/usr/bin/env python3
"""Checks the Grafana dashboard (charts/ncclguard/dashboards/ncclguard.json) without Grafana:
  - schemaVersion 39 or later, a uid, and the data source as the variable ${datasource} of type
    datasource over prometheus, used by every panel and every target;
  - panel ids unique, panels inside the 24 columns and not overlapping, each with a title, a
    description and targets that have a refId (unique in the panel) and a query;
  - every ncclguard metric a query reads is one ncclguard exports (ncclguard_metrics.py).
Whether each query parses and returns data is scripts/render-dashboard.py's part, against a real
Prometheus (tests/metrics/prometheus_test.sh).

    check_dashboard.py DASHBOARD.json
"""
import json
import os
import re
import sys

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from ncclguard_metrics import sample_names  # noqa: E402

DATASOURCE = {"type": "prometheus", "uid": "${datasource}"}
METRIC = re.compile(r"\bncclguard_[a-z0-9_]+\b")


def main():
    with open(sys.argv[1]) as f:
        dashboard = json.load(f)
    problems = []
    if dashboard.get("schemaVersion", 0) < 39:
        problems.append("schemaVersion %s, not 39 or later" % dashboard.get("schemaVersion"))
    if not dashboard.get("uid"):
        problems.append("no uid")
    variables = {v.get("name"): v for v in dashboard.get("templating", {}).get("list", [])}
    source = variables.get("datasource", {})
    if source.get("type") != "datasource" or source.get("query") != "prometheus":
        problems.append("no variable datasource of type datasource over prometheus")

    panels = []
    for panel in dashboard.get("panels", []):
        panels.append(panel)
        panels.extend(panel.get("panels", []))
    known = sample_names()
    ids, boxes = set(), []
    for panel in panels:
        title = panel.get("title") or "panel %s" % panel.get("id")
        if panel.get("id") in ids:
            problems.append("%s: id %s used twice" % (title, panel.get("id")))
        ids.add(panel.get("id"))
        grid = panel.get("gridPos", {})
        if not all(k in grid for k in ("x", "y", "w", "h")) or grid["x"] < 0 or grid["x"] + grid["w"] > 24:
            problems.append("%s: gridPos %s is not inside the 24 columns" % (title, grid))
            continue
        for other, box in boxes:
            if (grid["x"] < box["x"] + box["w"] and box["x"] < grid["x"] + grid["w"]
                    and grid["y"] < box["y"] + box["h"] and box["y"] < grid["y"] + grid["h"]):
                problems.append("%s overlaps %s" % (title, other))
        boxes.append((title, grid))
        if panel.get("type") == "row":
            continue
        if not panel.get("title") or not panel.get("description"):
            problems.append("%s: no title or description" % title)
        if panel.get("datasource") != DATASOURCE:
            problems.append("%s: datasource is %s, not ${datasource}" % (title, panel.get("datasource")))
        targets = panel.get("targets", [])
        if not targets:
            problems.append("%s: no queries" % title)
        refs = [t.get("refId") for t in targets]
        if len(set(refs)) != len(refs) or not all(refs):
            problems.append("%s: refIds %s not unique" % (title, refs))
        for target in targets:
            if target.get("datasource") != DATASOURCE:
                problems.append("%s/%s: datasource is not ${datasource}" % (title, target.get("refId")))
            if not target.get("expr", "").strip():
                problems.append("%s/%s: no query" % (title, target.get("refId")))
            for metric in sorted(set(METRIC.findall(target.get("expr", ""))) - known):
                problems.append("%s/%s: reads %s, which ncclguard does not export" % (title, target.get("refId"), metric))

    for problem in problems:
        print("FAIL  " + problem)
    if problems:
        print("check_dashboard: %d problems" % len(problems))
        return 1
    print("check_dashboard: %d panels, data source ${datasource}, metrics known, no overlaps" % len(panels))
    return 0


if __name__ == "__main__":
    sys.exit(main())
