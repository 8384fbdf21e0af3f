#!/usr/bin/env python3
"""Writes the seed corpora of fuzz/corpus/ from the project's own examples and fixtures.

Run from the repository root after changing examples/ or the fixtures; the files it writes are
committed. Findings (inputs that once crashed a harness) are committed beside them by hand,
named finding-*, and are never rewritten here."""
import json
import pathlib
import yaml

root = pathlib.Path(__file__).resolve().parent.parent
corpus = root / "fuzz" / "corpus"


def write(target, name, data):
    d = corpus / target
    d.mkdir(parents=True, exist_ok=True)
    (d / name).write_bytes(data if isinstance(data, bytes) else data.encode())


examples = sorted(p for p in (root / "examples").glob("*.yaml") if "policy" not in p.name)
objects = []
for p in examples:
    text = p.read_text()
    write("manifest_fix", "example-" + p.stem, text)
    docs = [d for d in yaml.safe_load_all(text) if d]
    objects += docs
    write("manifest_fix", "example-" + p.stem + ".json", json.dumps(docs[0], indent=1))
write("manifest_fix", "multi-document",
      "\n---\n".join(q.read_text() for q in examples[:2]) + "\n---\n---\n")
write("manifest_fix", "json-array", json.dumps(objects[:2]))
# Issue 23: nested anchors (each alias repeats the one below: 9^3 values from a few lines), and an
# object with many keys (ordered_json's lookup made such objects quadratic).
write("manifest_fix", "alias-levels", "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c}\ndata:\n"
      + "  a: &a [x, x, x, x, x, x, x, x, x]\n"
      + "".join(f"  {c}: &{c} [" + ", ".join([f"*{chr(ord(c) - 1)}"] * 9) + "]\n" for c in "bc"))
write("manifest_fix", "many-keys", json.dumps({"apiVersion": "v1", "kind": "ConfigMap",
                                               "metadata": {"name": "c"},
                                               "data": {f"k{i}": "v" for i in range(1000)}}))
write("manifest_fix", "yaml-edge-scalars",
      "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c}\ndata:\n  a: \"true\"\n  b: '08'\n"
      "  c: |\n    line\n  d: 1_000\n  e: .nan\n  f: 0x1F\n  g: ~\n  h: \"\\x01\"\n")


def pod_of(obj):
    """A pod as the job's controller would create it from the first template found."""
    def find(o):
        if isinstance(o, dict):
            if "template" in o and isinstance(o["template"], dict) and "spec" in o["template"] \
                    and "containers" in o["template"].get("spec", {}):
                return o["template"]
            for v in o.values():
                r = find(v)
                if r:
                    return r
        if isinstance(o, list):
            for v in o:
                r = find(v)
                if r:
                    return r
        return None
    t = find(obj)
    if not t:
        return None
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": dict(t.get("metadata") or {}),
           "spec": t["spec"]}
    pod["metadata"]["name"] = "worker-0"
    pod["metadata"]["namespace"] = "ml"
    return pod


def review(obj, operation="CREATE", old=None, uid="u-1"):
    group, _, version = obj["apiVersion"].rpartition("/")
    req = {"uid": uid, "kind": {"group": group, "version": version, "kind": obj["kind"]},
           "namespace": obj.get("metadata", {}).get("namespace", "ml"),
           "name": obj.get("metadata", {}).get("name", ""), "operation": operation,
           "object": obj}
    if old is not None:
        req["oldObject"] = old
    return json.dumps({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
                       "request": req}, separators=(",", ":"))


write("webhook_review", "bench-worker-pod",
      (root / "bench" / "webhook" / "worker-pod-review.json").read_bytes())
for i, obj in enumerate(objects):
    name = obj["kind"].lower() + "-" + str(i)
    write("webhook_review", "create-" + name, review(obj))
    write("webhook_review", "update-" + name, review(obj, "UPDATE", old=obj))
    pod = pod_of(obj)
    if pod:
        write("webhook_review", "pod-" + name, review(pod))
many = json.loads(json.dumps(pod_of(objects[0])))
many["spec"]["nodeSelector"] = {f"k{i}": "v" for i in range(3000)}
write("webhook_review", "many-keys", review(many))
lists = json.loads(json.dumps(pod_of(objects[0])))
lists["spec"]["lists"] = [[] for _ in range(20000)]
write("webhook_review", "empty-lists", review(lists))
write("webhook_review", "delete", json.dumps({"apiVersion": "admission.k8s.io/v1",
      "kind": "AdmissionReview", "request": {"uid": "d", "kind": {"group": "", "version": "v1",
      "kind": "Pod"}, "operation": "DELETE", "namespace": "ml", "name": "p"}}))

write("kubeconfig", "token", """apiVersion: v1
kind: Config
current-context: c
contexts:
- name: c
  context: {cluster: k, user: u, namespace: ml}
clusters:
- name: k
  cluster: {server: "https://127.0.0.1:6443", certificate-authority-data: "LS0tLS1CRUdJTg=="}
users:
- name: u
  user: {token: abc, as: admin, as-groups: [system:masters]}
""")
write("kubeconfig", "client-cert", """apiVersion: v1
kind: Config
current-context: c
contexts:
- {name: c, context: {cluster: k, user: u}}
clusters:
- {name: k, cluster: {server: "https://127.0.0.1:6443", insecure-skip-tls-verify: true}}
users:
- {name: u, user: {client-certificate: cert.pem, client-key-data: "a2V5", tokenFile: t}}
""")

pod = pod_of(objects[0])
write("watch_stream", "events", "\x07" + "\n".join(json.dumps({"type": t, "object": pod})
      for t in ("ADDED", "MODIFIED", "DELETED")) + "\n" +
      json.dumps({"type": "BOOKMARK", "object": {"kind": "Pod", "metadata":
                  {"resourceVersion": "12"}}}) + "\r\n" +
      json.dumps({"type": "ERROR", "object": {"kind": "Status", "code": 410}}) + "\n")

# core::ReadJson against nlohmann's parser: a review, a watch event, and the forms the grammar
# has at its edges (numbers at the limits of their types, escapes, surrogates, raw UTF-8).
write("json_reader", "review", (root / "bench" / "webhook" / "worker-pod-review.json").read_text())
write("json_reader", "event", json.dumps({"type": "ADDED", "object": pod}))
write("json_reader", "numbers", "[0, -0, -0.0, 18446744073709551615, 18446744073709551616, "
      "-9223372036854775808, -9223372036854775809, 1e308, 1e309, 4.9e-324, 1e-400, 1.5E+3, "
      "123.456e-7]")
write("json_reader", "strings", '{"a": "\\u00e9\\ud83d\\ude80\\n\\"\\/", "\u00e9": "\u20ac", '
      '"a": {"repeated": [true, false, null]}, "": ""}')

write("policy", "example-report-only", (root / "examples" / "policy-report-only.yaml").read_text())
write("policy", "every-field", """apiVersion: ncclguard.io/v1alpha1
kind: NcclPolicy
metadata: {name: default}
spec:
  guideBaseURL: https://example.com/guide.md
  socketIfname: eth0
  clusterDomain: cluster.local
  defaultInstanceType: p5.48xlarge
  instanceTypes:
  - {name: p5.48xlarge, efaInterfaces: 32, gpus: 8}
  rules:
    efa-resource-missing: {enabled: true, level: deny}
  gate: {enabled: true, countUnvalidatedNodes: false}
  rendezvousPort: 29500
""")

# image_pin: the first byte picks a reference (0), a job's image-digests annotation (1) or an
# imageID (2).
digest = "sha256:" + "0123456789abcdef" * 4
write("image_pin", "reference", b"\x00registry.ncclguard.test:5000/ml/train:2.4@" + digest.encode())
write("image_pin", "reference-hub", b"\x00pytorch/pytorch:2.4.0-cuda12.4-cudnn9-runtime")
write("image_pin", "annotation", b"\x01" + json.dumps({"pytorch": {
    "image": "registry.ncclguard.test:5000/ml/train:2.4", "digest": digest,
    "pod": "pin-master-0"}}).encode())
write("image_pin", "image-id", b"\x02docker-pullable://busybox@" + digest.encode())

probe = root / "tests" / "fixtures" / "probe"
for i, f in enumerate(sorted(probe.rglob("logind.conf"))):
    write("probe_parsers", f"logind-{i}", b"\x00" + f.read_bytes())
for i, f in enumerate(sorted(probe.rglob("limits"))):
    write("probe_parsers", f"limits-{i}", b"\x01" + f.read_bytes())
for i, f in enumerate(sorted(probe.rglob("config"))[:4]):
    write("probe_parsers", f"pci-config-{i}", b"\x02" + f.read_bytes())
write("probe_parsers", "boolean", b"\x03yes")

# log_matchers: the first byte picks the chunk size, the rest is the log (tests/fixtures/logs).
logs = root / "tests" / "fixtures" / "logs"
for f in sorted(logs.glob("*.log")):
    write("log_matchers", f.stem, b"\x07" + f.read_bytes())
write("log_matchers", "two-ranks",
      b"\x03" + b"|".join((logs / n).read_bytes() for n in ("rank0-peer-closed.log", "rank1-oom.log")))
