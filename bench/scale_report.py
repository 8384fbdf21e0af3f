#!/usr/bin/env python3
"""bench/scale.sh's report: one run's JSON line from what the run measured, or the medians.

  scale_report.py run <work dir> <run> <jobs> <nodes> <idle kB> <stable kB> <peak kB> <pods>
                      "<apiserver cpu> <controller cpu>" x3 (start, jobs, end)
                      <jobs json> <churn json> <rack json> <setup json> <uptime> <failed>
  scale_report.py medians <results file>

<failed>: why the run failed ("" when it did not): its line carries it, and the medians leave it
out.

The controller's requests come from the API server's audit log (the controller's own user,
Metadata level); <work dir>/audit.marks holds the line each phase ended at.
"""
import collections
import json
import os
import statistics
import sys

WRITES = {"create", "update", "patch", "delete", "deletecollection"}


def audit_phases(work):
    marks = [line.split() for line in open(f"{work}/audit.marks")]
    bounds = {name: int(n) for name, n in marks}
    phases = {}
    order = [name for name, _ in marks]
    with open(f"{work}/audit.log") as log:
        lines = log.readlines()
    previous = 0
    for name in order:
        phases[name] = lines[previous:bounds[name]]
        previous = bounds[name]
    return phases


def count(lines):
    writes = collections.Counter()
    lists = absent = watches = 0
    for line in lines:
        try:
            event = json.loads(line)
        except ValueError:
            continue
        verb = event.get("verb")
        ref = event.get("objectRef", {})
        resource = ref.get("resource", "")
        if ref.get("subresource"):
            resource += "/" + ref["subresource"]
        if verb == "watch":
            if event.get("stage") == "ResponseStarted":
                watches += 1
            continue
        if event.get("stage") != "ResponseComplete":
            continue
        if verb == "list":
            # 404: a CRD that is not installed (TrainJob, HyperPod, PolicyReport), asked again
            if event.get("responseStatus", {}).get("code") == 404:
                absent += 1
            else:
                lists += 1
        elif verb in WRITES:
            writes[f"{verb} {resource}"] += 1
    return writes, lists, absent, watches


def open_or_empty(path):
    return open(path) if os.path.exists(path) else []


def queue_depth_max(path):
    if not os.path.exists(path):
        return None
    return max((float(line.split()[4]) for line in open(path) if len(line.split()) > 4),
               default=None)


def run(argv):
    (work, run_no, jobs, nodes, idle_kb, stable_kb, peak_kb, pods, cpu0, cpu1, cpu2, jobs_json,
     churn_json, rack_json, setup_json, uptime, failed) = argv
    jobs, nodes = int(jobs), int(nodes)
    cpu0, cpu1, cpu2 = ([float(x) for x in c.split()] for c in (cpu0, cpu1, cpu2))
    phases = audit_phases(work)
    _, start_lists, _, start_watches = count(phases.get("start", []))
    jobs_writes, jobs_lists, jobs_absent, jobs_watches = count(phases.get("jobs", []))
    churn_writes, churn_lists, churn_absent, churn_watches = count(phases.get("churn", []))
    rack_writes, rack_lists, rack_absent, rack_watches = count(phases.get("end", []))
    # What the caches held at the stable RSS (ncclguard_informer_*): MB and objects by resource.
    caches = collections.defaultdict(dict)
    if os.path.exists(f"{work}/metrics.stable"):
        for line in open(f"{work}/metrics.stable"):
            for family, key, scale in (("ncclguard_informer_stored_bytes{", "mb", 1 / 2**20),
                                       ("ncclguard_informer_objects{", "objects", 1)):
                if line.startswith(family):
                    resource = line.split('resource="')[1].split('"')[0]
                    caches[resource][key] = round(float(line.split()[-1]) * scale, 2)
    restarts_by = {}
    for line in open(f"{work}/metrics.end"):
        if line.startswith("ncclguard_watch_restarts_total{") and float(line.split()[-1]) > 0:
            restarts_by[line[line.index("{") + 1:line.index("}")]] = int(float(line.split()[-1]))
    churn = json.loads(churn_json)
    samples = [list(map(float, line.split())) for line in open(f"{work}/samples") if line.strip()]
    rss = [s[1] / 1024 for s in samples]
    sockets = [s[2] for s in samples]
    restarts = [s[3] for s in samples]
    cached = [s[5] / 2**20 for s in samples if len(s) > 6]
    events_cached = [s[6] / 2**20 for s in samples if len(s) > 6]
    allocated = [s[7] / 2**20 for s in samples if len(s) > 8]
    resident = [s[8] / 2**20 for s in samples if len(s) > 8]
    # The arrival's sample with the most RSS, and what the caches and the allocator held then.
    arrival = [list(map(float, line.split())) for line in open_or_empty(f"{work}/jobs-samples")
               if line.strip()]
    arrival_peak = max(arrival, key=lambda s: s[1], default=None)
    churned = max(1, churn.get("created", 0))
    result = {
        "run": int(run_no),
        "nodes": nodes,
        "jobs": jobs,
        "pods_stored": int(pods or 0),
        "setup": json.loads(setup_json),
        "create": json.loads(jobs_json),
        "rss_idle_mb": round(int(idle_kb) / 1024, 1),
        "rss_stable_mb": round(int(stable_kb) / 1024, 1),
        "rss_peak_mb": round(int(peak_kb) / 1024, 1),
        "caches_at_stable": dict(sorted(caches.items())),
        # the jobs phase: jobs created and released, their pods created, scheduled and run
        "controller_cpu_s_per_1000_jobs": round((cpu1[1] - cpu0[1]) * 1000 / jobs, 2),
        "apiserver_cpu_ms_per_job": round((cpu1[0] - cpu0[0]) * 1000 / jobs, 1),
        "initial_lists": start_lists,
        "initial_watches": start_watches,
        "writes_per_job": {k: round(v / jobs, 2) for k, v in sorted(jobs_writes.items())},
        "lists_after_start": jobs_lists + churn_lists + rack_lists,
        "absent_crd_lists_after_start": jobs_absent + churn_absent + rack_absent,
        "watch_restarts_by": restarts_by,
        "watch_starts_after_start": jobs_watches + churn_watches + rack_watches,
        "churn": churn,
        "churn_writes_per_job": {k: round(v / churned, 2) for k, v in sorted(churn_writes.items())},
        "churn_rss_mb": [min(rss, default=0), max(rss, default=0)],
        "churn_rss_first_last_mb": [rss[0] if rss else 0, rss[-1] if rss else 0],
        "churn_sockets": [min(sockets, default=0), max(sockets, default=0)],
        # what the caches hold meanwhile (the rest of the RSS is the work in flight and what the
        # allocator keeps): all of them, and the Events cache's share
        "churn_caches_mb": [round(min(cached, default=0), 1), round(max(cached, default=0), 1)],
        "churn_events_cache_mb": [round(min(events_cached, default=0), 1),
                                  round(max(events_cached, default=0), 1)],
        # jemalloc's figures meanwhile: the objects the program holds, and the pages resident
        # (the rest of the RSS is code, stacks and the libraries' own heaps)
        "churn_allocated_mb": [round(min(allocated, default=0), 1), round(max(allocated, default=0), 1)],
        "churn_allocator_resident_mb": [round(min(resident, default=0), 1),
                                        round(max(resident, default=0), 1)],
        "arrival_peak_sample": None if arrival_peak is None or len(arrival_peak) < 9 else {
            "rss_mb": round(arrival_peak[1] / 1024, 1),
            "caches_mb": round(arrival_peak[5] / 2**20, 1),
            "allocated_mb": round(arrival_peak[7] / 2**20, 1),
            "allocator_resident_mb": round(arrival_peak[8] / 2**20, 1),
            "queue_depth": int(arrival_peak[4])},
        "churn_watch_restarts": (restarts[-1] - restarts[0]) if restarts else 0,
        "rack": json.loads(rack_json),
        "rack_queue_depth_max": queue_depth_max(f"{work}/rack-samples"),
        "rack_writes": dict(sorted(rack_writes.items())),
        "uptime": uptime.strip(),
    }
    if failed:
        result["failed"] = failed
    print(json.dumps(result))


def medians(path):
    every = [json.loads(line) for line in open(path) if line.strip()]
    for r in every:
        if r.get("failed"):
            print(f"scale: run {r['run']} FAILED ({r['failed']}): its line above, not in the medians")
    rows = [r for r in every if not r.get("failed")]
    if not rows:
        print("scale: no run passed")
        return

    def med(get):
        values = [v for v in (get(r) for r in rows) if v is not None]
        return statistics.median(values) if values else float("nan")

    r0 = rows[0]
    print(f"scale benchmark: median of {len(rows)} runs, {r0['nodes']} nodes, {r0['jobs']} jobs "
          f"({med(lambda r: r['create'].get('pods', 0)):.0f} pods wanted)")
    print(f"  jobs created at once -> all served and released: "
          f"{med(lambda r: r['create'].get('served_and_released_s')):.1f} s; pods stored after: "
          f"{med(lambda r: r['pods_stored']):.0f}")
    print(f"  controller RSS: idle {med(lambda r: r['rss_idle_mb']):.1f} MB, stable "
          f"{med(lambda r: r['rss_stable_mb']):.1f} MB, peak {med(lambda r: r['rss_peak_mb']):.1f} MB")
    resources = sorted({k for r in rows for k in r.get("caches_at_stable", {})},
                       key=lambda k: -med(lambda r: r.get("caches_at_stable", {}).get(k, {}).get("mb")))
    if resources:
        print("  caches then (MB stored / objects): " + ", ".join(
            f"{k} {med(lambda r, k=k: r['caches_at_stable'].get(k, {}).get('mb')):.1f}/"
            f"{med(lambda r, k=k: r['caches_at_stable'].get(k, {}).get('objects')):.0f}"
            for k in resources))
    print(f"  controller CPU {med(lambda r: r['controller_cpu_s_per_1000_jobs']):.2f} s per 1,000 jobs; "
          f"kube-apiserver CPU {med(lambda r: r['apiserver_cpu_ms_per_job']):.1f} ms per job")
    kinds = sorted({k for r in rows for k in r["writes_per_job"]})
    writes = ", ".join(f"{k} {med(lambda r, k=k: r['writes_per_job'].get(k, 0)):.2f}" for k in kinds)
    print(f"  API writes per job: {writes}")
    print(f"  LISTs after the start: {med(lambda r: r['lists_after_start']):.0f} "
          f"(initial {med(lambda r: r['initial_lists']):.0f}; 404s of CRDs not installed: "
          f"{med(lambda r: r.get('absent_crd_lists_after_start', 0)):.0f}); watch starts after the "
          f"start: {med(lambda r: r['watch_starts_after_start']):.0f} "
          f"({', '.join(json.dumps(r.get('watch_restarts_by', {})) for r in rows)})")
    print(f"  churn {r0['churn'].get('churn_s')} s: RSS {med(lambda r: r['churn_rss_mb'][0]):.1f}-"
          f"{med(lambda r: r['churn_rss_mb'][1]):.1f} MB, sockets {med(lambda r: r['churn_sockets'][0]):.0f}-"
          f"{med(lambda r: r['churn_sockets'][1]):.0f}, watch restarts "
          f"{med(lambda r: r['churn_watch_restarts']):.0f}, released "
          f"{med(lambda r: r['churn'].get('released', 0)):.0f} of {med(lambda r: r['churn'].get('created', 0)):.0f}")
    print(f"  repaired rack ({r0['rack'].get('rack_nodes')} nodes over {r0['rack'].get('writes_s')} s, "
          f"{r0['rack'].get('rack_jobs')} held jobs): release latency p50 "
          f"{med(lambda r: r['rack'].get('p50_s')):.3f} s, p99 {med(lambda r: r['rack'].get('p99_s')):.3f} s "
          f"(target <= 1 s), max {med(lambda r: r['rack'].get('max_s')):.3f} s, from the completing "
          f"write's return")
    if all("from_start_p99_s" in r["rack"] for r in rows):
        print(f"    from the completing write's start: p50 "
              f"{med(lambda r: r['rack']['from_start_p50_s']):.3f} s, p99 "
              f"{med(lambda r: r['rack']['from_start_p99_s']):.3f} s, max "
              f"{med(lambda r: r['rack']['from_start_max_s']):.3f} s; released before their count "
              f"in etcd's order: {', '.join(str(r['rack']['released_early']) for r in rows)}; seen "
              f"before the completing write returned: "
              f"{', '.join(str(r['rack']['seen_before_write_returned']) for r in rows)} (by run)")
    if all("validation_watch_lag_p99_s" in r["rack"] for r in rows):
        print(f"    the API server's delivery of a NodeValidation's Pass to a watch: p50 "
              f"{med(lambda r: r['rack']['validation_watch_lag_p50_s']):.3f} s, p99 "
              f"{med(lambda r: r['rack']['validation_watch_lag_p99_s']):.3f} s; from the completing "
              f"Pass seen to the release seen: p50 "
              f"{med(lambda r: r['rack']['after_pass_seen_p50_s']):.3f} s, p99 "
              f"{med(lambda r: r['rack']['after_pass_seen_p99_s']):.3f} s")


if __name__ == "__main__":
    if len(sys.argv) >= 2 and sys.argv[1] == "run" and len(sys.argv) == 19:
        run(sys.argv[2:])
    elif len(sys.argv) == 3 and sys.argv[1] == "medians":
        medians(sys.argv[2])
    else:
        sys.exit(__doc__)
