#!/usr/bin/env python3
"""Compares the RBAC a chart render grants the controller with what the controller declares.

Usage: compare-rbac.py RENDER_JSON DECLARED_JSON
       compare-rbac.py --args RENDER_JSON
  RENDER_JSON: the chart's controller Deployment, ClusterRole and Role as JSON objects one after
    the other (kubectl create --dry-run=client -o json), or a List of them;
  DECLARED_JSON: `ncclguard controller <the Deployment's args> --print-rbac`.
Every (scope, apiGroup, resource, verb, resourceName) the controller declares must be granted by
the ClusterRole (cluster) or the Role (its own namespace) named as its ServiceAccount, and those
grant nothing it does not declare. Prints what is missing or extra; exit 1 if anything is.
With --args: prints the Deployment's ServiceAccount, then its controller container's args, one a
line.
"""
import json
import sys


def grants(rules, scope):
    out = set()
    for rule in rules or []:
        names = rule.get("resourceNames") or ["*"]
        for group in rule.get("apiGroups", []):
            for resource in rule.get("resources", []):
                for verb in rule.get("verbs", []):
                    for name in names:
                        out.add((scope, group, resource, verb, name))
    return out


def objects(path):
    """The objects in a file of JSON objects one after the other, or of one List."""
    with open(path) as f:
        text = f.read()
    decoder = json.JSONDecoder()
    found, at = [], 0
    while True:
        while at < len(text) and text[at].isspace():
            at += 1
        if at == len(text):
            break
        value, at = decoder.raw_decode(text, at)
        found.extend(value["items"] if value.get("kind") == "List" else [value])
    return found


def main():
    if sys.argv[1] == "--args":
        items = objects(sys.argv[2])
        pod = next(i for i in items if i["kind"] == "Deployment")["spec"]["template"]["spec"]
        print(pod["serviceAccountName"])
        print("\n".join(next(c for c in pod["containers"] if c["name"] == "controller")["args"]))
        return 0
    items = objects(sys.argv[1])
    with open(sys.argv[2]) as f:
        declared = json.load(f)
    deployment = next(i for i in items if i["kind"] == "Deployment")
    account = deployment["spec"]["template"]["spec"]["serviceAccountName"]
    granted = set()
    for item in items:
        if item["metadata"]["name"] != account:
            continue
        if item["kind"] == "ClusterRole":
            granted |= grants(item.get("rules"), "cluster")
        elif item["kind"] == "Role":
            granted |= grants(item.get("rules"), "namespace")
    wanted = grants(declared.get("clusterRules"), "cluster") | grants(
        declared.get("namespaceRules"), "namespace")
    for scope, group, resource, verb, name in sorted(wanted - granted):
        print(f"missing: {scope} {group or 'core'} {resource} {verb} {name}")
    for scope, group, resource, verb, name in sorted(granted - wanted):
        print(f"extra:   {scope} {group or 'core'} {resource} {verb} {name}")
    print(f"{len(wanted)} declared, {len(granted)} granted")
    return 0 if wanted == granted else 1


if __name__ == "__main__":
    sys.exit(main())
