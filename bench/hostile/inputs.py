"""Writes the hostile inputs of bench/hostile.sh (issue 23) into the folder given."""
import json
import os
import sys

out = sys.argv[1]
digest = "registry.example/train@sha256:" + "a" * 64


def pod(metadata, containers, spec=None):
    body = {"containers": containers}
    body.update(spec or {})
    return {"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": body}


def container(i):
    return {"name": f"c{i}", "image": digest, "resources": {"limits": {"nvidia.com/gpu": 8}}}


def review(obj):
    return {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
            "request": {"uid": "bench-1", "kind": {"group": "", "version": "v1", "kind": "Pod"},
                        "namespace": "ml", "name": "p", "operation": "CREATE", "object": obj}}


def write(name, text):
    with open(os.path.join(out, name), "w") as f:
        f.write(text)


keys = {f"key-{i}": "v" for i in range(100000)}
with_keys = pod({"name": "p", "namespace": "ml", "labels": keys}, [container(0)])
write("keys.json", json.dumps(with_keys))
write("keys.yaml", "apiVersion: v1\nkind: Pod\nmetadata:\n  name: p\n  labels:\n"
      + "".join(f"    key-{i}: v\n" for i in range(100000))
      + "spec:\n  containers:\n  - name: c\n    image: " + digest + "\n")
many = pod({"name": "p", "namespace": "ml"}, [container(i) for i in range(10000)])
write("containers.json", json.dumps(many))
bomb = "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c}\ndata:\n"
bomb += "  a: &a [lol, lol, lol, lol, lol, lol, lol, lol, lol]\n"
for level in "bcdefghij":
    below = chr(ord(level) - 1)
    bomb += f"  {level}: &{level} [" + ", ".join([f"*{below}"] * 9) + "]\n"
write("bomb.yaml", bomb)
selector = pod({"name": "p", "namespace": "ml"}, [container(0)], {"nodeSelector": keys})
write("keys-review.json", json.dumps(review(selector)))
write("containers-review.json", json.dumps(review(many)))
nested = json.dumps(review(pod({"name": "p", "namespace": "ml"}, [container(0)])))
marker = '"spec": {'
lists = "[" + ",".join(["[]"] * 2_300_000) + "]"
at = nested.index(marker) + len(marker)
write("lists-review.json", nested[:at] + '"lists": ' + lists + ", " + nested[at:])
