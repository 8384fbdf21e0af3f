#!/usr/bin/env python3
"""Steady admission load for the node tests: server-side dry-run pod creates at a fixed rate.

Each request is `POST /api/v1/namespaces/NS/pods?dryRun=All` with the body in --pod: it goes
through every admission webhook (mutating ones patch the answer) and nothing is stored or
scheduled. A request counts as admitted when the API server answers 201 and the answer holds
--expect (the mutating webhook's patch); anything else (an error status, a refusal by the API
server because the webhook failed, an answer without the patch, a broken connection) is a
failed admission, logged with its time and reason.

Requests are tagged with the phase named in --phase-file (re-read every 100 ms), so one run
counts the scenarios a test drives one after the other. Runs until --stop-file exists, then
writes one JSON object to --out: {"seconds", "rate", "phases": {name: {"ok", "failed"}}};
--log has a line a failure: its Unix time, phase and reason.
Keep-alive connections (one per worker), so the loader costs little beside the API server.
"""

import argparse
import http.client
import json
import os
import ssl
import threading
import time


def main():
    parser = argparse.ArgumentParser()
    for name in ("server", "ca", "cert", "key", "namespace", "pod", "expect", "phase-file", "stop-file", "out", "log"):
        parser.add_argument("--" + name, required=True)
    parser.add_argument("--rate", type=float, default=100.0)
    parser.add_argument("--watch-service", help="NAMESPACE/NAME: log when its endpoints turn ready or not")
    parser.add_argument("--endpoints-log")
    parser.add_argument("--workers", type=int, default=16)
    args = parser.parse_args()

    host, _, port = args.server.removeprefix("https://").partition(":")
    context = ssl.create_default_context(cafile=args.ca)
    context.load_cert_chain(args.cert, args.key)
    with open(args.pod, "rb") as f:
        body = f.read()
    path = f"/api/v1/namespaces/{args.namespace}/pods?dryRun=All"
    expect = args.expect.encode()

    lock = threading.Lock()
    counts = {}  # phase -> [ok, failed]
    state = {"phase": "", "sent": 0, "stop": False}
    log = open(args.log, "a", buffering=1)
    start = time.monotonic()

    def read_phase():
        try:
            with open(args.phase_file) as f:
                return f.read().strip()
        except OSError:
            return ""

    def watcher():
        while not os.path.exists(args.stop_file):
            state["phase"] = read_phase()
            time.sleep(0.1)
        state["stop"] = True

    def record(phase, ok, reason=""):
        with lock:
            c = counts.setdefault(phase, [0, 0])
            c[0 if ok else 1] += 1
            if not ok:
                log.write(f"{time.time():.3f} {phase}: {reason[:300]}\n")

    def worker():
        conn = None
        while True:
            with lock:  # the next slot of the schedule: request n at start + n/rate
                n = state["sent"]
                state["sent"] += 1
            delay = start + n / args.rate - time.monotonic()
            if delay > 0:
                time.sleep(delay)
            if state["stop"]:
                break
            phase = state["phase"]
            try:
                if conn is None:
                    conn = http.client.HTTPSConnection(host, int(port), context=context, timeout=30)
                conn.request("POST", path, body, {"Content-Type": "application/json", "Accept": "application/json"})
                response = conn.getresponse()
                answer = response.read()
                if response.status == 201 and expect in answer:
                    record(phase, True)
                elif response.status == 201:
                    record(phase, False, "201 without the webhook's patch")
                else:
                    try:
                        message = json.loads(answer).get("message", "")
                    except ValueError:
                        message = answer[:200].decode(errors="replace")
                    record(phase, False, f"{response.status} {message}")
                if response.getheader("Connection", "").lower() == "close":
                    conn.close()
                    conn = None
            except (OSError, http.client.HTTPException) as e:
                record(phase, False, f"API server connection: {type(e).__name__}: {e}")
                if conn is not None:
                    conn.close()
                conn = None

    def watch_endpoints():  # one line a change: Unix time, address, ready
        namespace, _, service = args.watch_service.partition("/")
        seen = {}
        with open(args.endpoints_log, "a", buffering=1) as out:
            while not state["stop"]:
                try:
                    conn = http.client.HTTPSConnection(host, int(port), context=context)
                    conn.request("GET", f"/apis/discovery.k8s.io/v1/namespaces/{namespace}/endpointslices"
                                 f"?watch=1&labelSelector=kubernetes.io/service-name%3D{service}")
                    response = conn.getresponse()
                    while not state["stop"]:
                        line = response.readline()
                        if not line:
                            break
                        event = json.loads(line)
                        for endpoint in event["object"].get("endpoints") or []:
                            address = endpoint["addresses"][0]
                            ready = endpoint.get("conditions", {}).get("ready", False)
                            if event["type"] == "DELETED":
                                ready = False
                            if seen.get(address) != ready:
                                seen[address] = ready
                                out.write(f"{time.time():.3f} {address} {str(ready).lower()}\n")
                    conn.close()
                except (OSError, http.client.HTTPException, ValueError):
                    time.sleep(0.2)

    threading.Thread(target=watcher, daemon=True).start()
    if args.watch_service:
        threading.Thread(target=watch_endpoints, daemon=True).start()
    workers = [threading.Thread(target=worker) for _ in range(args.workers)]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    seconds = time.monotonic() - start
    total = sum(ok + failed for ok, failed in counts.values())
    result = {
        "seconds": round(seconds, 1),
        "rate": round(total / seconds, 1),
        "phases": {p: {"ok": c[0], "failed": c[1]} for p, c in counts.items()},
    }
    with open(args.out, "w") as f:
        json.dump(result, f)


if __name__ == "__main__":
    main()
