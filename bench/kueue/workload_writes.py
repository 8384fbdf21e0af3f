"""kube-apiserver's CPU for one status write of a Kueue Workload, by the form of the write
(bench/kueue_write.sh). Creates N Workloads per form, each with the status Kueue gives a Workload
whose quota is reserved and whose check `preflight` is Pending, then sets every check to Ready
the way that form does it, from 8 connections, and reads the CPU time kube-apiserver and etcd
spent meanwhile from /proc."""
import concurrent.futures
import datetime
import http.client
import json
import os
import ssl
import sys
import time

url, ca, cert, key, apiserver_pid, etcd_pid, count, forms = sys.argv[1:9]
count = int(count)
tick = os.sysconf("SC_CLK_TCK")
context = ssl.create_default_context(cafile=ca)
context.load_cert_chain(cert, key)
host, port = url.split("//")[1].split(":")
base = "/apis/kueue.x-k8s.io/v1beta2/namespaces/bench/workloads"
now = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
READY = {"name": "preflight", "state": "Ready", "message": "4 of 4 p5.48xlarge nodes validated",
         "lastTransitionTime": now}


def cpu_seconds(pid):
    fields = open("/proc/%s/stat" % pid).read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / tick


def call(conn, method, path, body, content_type, want):
    conn.request(method, path, body, {"Content-Type": content_type})
    response = conn.getresponse()
    text = response.read()
    if response.status != want:
        raise RuntimeError("%s %s: %d %s" % (method, path, response.status, text[:300]))
    return text


def create(conn, name):
    workload = {
        "apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Workload",
        "metadata": {"name": name, "namespace": "bench"},
        "spec": {"queueName": "lq", "podSets": [{"name": "main", "count": 4, "template": {"spec": {
            "restartPolicy": "Never", "containers": [{
                "name": "t", "image": "registry.invalid/t:1",
                "resources": {"requests": {"cpu": "1", "nvidia.com/gpu": "8"},
                              "limits": {"nvidia.com/gpu": "8"}}}]}}}]}}
    call(conn, "POST", base, json.dumps(workload), "application/json", 201)
    status = {"status": {
        "conditions": [{"type": "QuotaReserved", "status": "True", "reason": "QuotaReserved",
                        "message": "Quota reserved in ClusterQueue cq", "lastTransitionTime": now,
                        "observedGeneration": 1}],
        "admission": {"clusterQueue": "cq", "podSetAssignments": [{
            "name": "main", "count": 4, "flavors": {"cpu": "p5", "nvidia.com/gpu": "p5"},
            "resourceUsage": {"cpu": "4", "nvidia.com/gpu": "32"}}]},
        "admissionChecks": [{"name": "preflight", "state": "Pending", "lastTransitionTime": now,
                             "message": "waiting: 3 of 4 p5.48xlarge nodes validated"}]}}
    call(conn, "PATCH", base + "/" + name + "/status?fieldManager=kueue-admission",
         json.dumps(status), "application/merge-patch+json", 200)


def write(conn, form, name):
    path = base + "/" + name + "/status?fieldManager=ncclguard"
    if form == "apply":  # server-side apply of our entry alone: what the controller does
        body = {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Workload",
                "metadata": {"name": name, "namespace": "bench"},
                "status": {"admissionChecks": [READY]}}
        call(conn, "PATCH", path + "&force=true", json.dumps(body), "application/apply-patch+yaml", 200)
    elif form == "json-patch":  # RFC 6902, guarded by tests of the entry it replaces
        body = [{"op": "test", "path": "/status/admissionChecks/0/name", "value": "preflight"},
                {"op": "test", "path": "/status/admissionChecks/0/state", "value": "Pending"},
                {"op": "replace", "path": "/status/admissionChecks/0", "value": READY}]
        call(conn, "PATCH", path, json.dumps(body), "application/json-patch+json", 200)
    elif form == "merge-patch":  # the whole list, guarded by the resourceVersion read before
        current = json.loads(call(conn, "GET", base + "/" + name, None, "application/json", 200))
        body = {"metadata": {"resourceVersion": current["metadata"]["resourceVersion"]},
                "status": {"admissionChecks": [READY]}}
        call(conn, "PATCH", path, json.dumps(body), "application/merge-patch+json", 200)
    else:
        sys.exit("unknown form " + form)


def in_parallel(work, names, connections=8):
    # A failure in any thread fails the run: a thread that stopped early would leave the CPU
    # divided by writes that were never made.
    def run(chunk):
        conn = http.client.HTTPSConnection(host, int(port), context=context, timeout=120)
        for name in chunk:
            work(conn, name)
    with concurrent.futures.ThreadPoolExecutor(connections) as pool:
        futures = [pool.submit(run, names[i::connections]) for i in range(connections)]
        for future in futures:
            future.result()


for form in forms.split(","):
    names = ["%s-%d" % (form, i) for i in range(count)]
    in_parallel(create, names)
    api0, etcd0, start = cpu_seconds(apiserver_pid), cpu_seconds(etcd_pid), time.monotonic()
    in_parallel(lambda conn, name: write(conn, form, name), names)
    seconds = time.monotonic() - start
    print(json.dumps({"form": form, "writes": count, "seconds": round(seconds, 2),
                      "apiserver_ms": round((cpu_seconds(apiserver_pid) - api0) * 1e3 / count, 2),
                      "etcd_ms": round((cpu_seconds(etcd_pid) - etcd0) * 1e3 / count, 2)}),
          flush=True)
