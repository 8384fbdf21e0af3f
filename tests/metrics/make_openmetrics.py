#!/usr/bin/env python3
"""Writes an OpenMetrics file with a series of every ncclguard metric (ncclguard_metrics.py),
a sample every STEP seconds over the MINUTES before END, for `promtool tsdb
create-blocks-from openmetrics`: the data of tests/metrics/dashboard_test.sh. Counters grow,
histograms fill their buckets, gauges hold values a cluster would show (one node failing a check,
jobs held, the leader on one replica). Deterministic: no randomness, only END moves.

    make_openmetrics.py --end 1700000000 --minutes 60 --step 15 >data.om
"""
import argparse
import math
import sys

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
from ncclguard_metrics import HISTOGRAM_BUCKETS, METRICS, NODES, TARGETS  # noqa: E402


def label_text(labels):
    return ",".join('%s="%s"' % (k, v) for k, v in sorted(labels.items()))


def counter_rate(name, labels):
    """Per-second rate of a counter series: steady, distinct per series."""
    seed = sum(map(ord, name + label_text(labels)))
    base = {"ncclguard_webhook_requests_total": 2.0, "ncclguard_rest_client_requests_total": 1.5}.get(name, 0.05)
    return base * (1 + seed % 7) / 4


def gauge_value(name, target, labels, t, start):
    minutes = (t - start) / 60
    if name in ("up", "ncclguard_build_info", "ncclguard_probe_node_info"):
        return 1
    if name == "ncclguard_leader_election_master_status":
        return 1 if target == "leader" else 0
    if name in ("ncclguard_node_check_status", "ncclguard_probe_check_status"):
        return 1
    if name == "ncclguard_webhook_certificate_expiry_timestamp_seconds":
        return start + 60 * 86400
    if name == "ncclguard_webhook_in_flight_memory_budget_bytes":
        return 128 * 1024 * 1024
    if name in ("ncclguard_probe_last_run_timestamp_seconds",
                "ncclguard_probe_peer_last_round_timestamp_seconds"):
        return t - (t % 300)
    if name == "ncclguard_probe_ras_round_duration_seconds":
        return 0.02 + (minutes % 5) / 100
    if name == "ncclguard_job_nccl_health":
        return 3 if labels["reason"] == "Healthy" else 1
    if name == "ncclguard_probe_peer_round_duration_seconds":
        return 2.5 + (minutes % 5) / 10
    if name == "ncclguard_probe_check_duration_seconds":
        return 0.05 + 0.01 * (sum(map(ord, labels["check"])) % 20)
    if name == "ncclguard_gate_held_jobs":
        return 1 + int(minutes // 20) % 3
    if name == "ncclguard_workqueue_depth":
        return int(3 + 3 * math.sin(minutes / 5))
    if name == "ncclguard_nodes":
        return {"validated": 14, "failed": 1, "unvalidated": 2}[labels["state"]]
    if name == "ncclguard_kueue_admission_checks":
        return {"Pending": 2, "Ready": 5}[labels["state"]]
    return 1


def histogram_samples(name, labels, buckets, elapsed):
    """Cumulative buckets of observations arriving at 1/s, half of those left in each bucket."""
    count = elapsed * 1.0
    cumulative = [count * (1 - 0.5 ** (i + 1)) for i in range(len(buckets))]
    lines = []
    for bound, value in zip(buckets, cumulative):
        lines.append((name + "_bucket", dict(labels, le=repr(float(bound))), value))
    lines.append((name + "_bucket", dict(labels, le="+Inf"), count))
    lines.append((name + "_sum", labels, count * buckets[len(buckets) // 2]))
    lines.append((name + "_count", labels, count))
    return lines


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--end", type=int, required=True, help="Unix time of the last sample")
    parser.add_argument("--minutes", type=int, default=60)
    parser.add_argument("--step", type=int, default=15, help="seconds between samples")
    args = parser.parse_args()
    start = args.end - args.minutes * 60
    times = list(range(start, args.end + 1, args.step))
    out = sys.stdout
    for name, (kind, series) in sorted(METRICS.items()):
        # Types are left out (unknown): the TSDB stores samples only, and no family has to follow
        # OpenMetrics' naming of counters and histograms.
        rows = {}
        for target, labels in series:
            full = dict(TARGETS[target], **labels)
            for t in times:
                elapsed = t - start
                if kind == "counter":
                    samples = [(name, full, round(counter_rate(name, labels) * elapsed, 3))]
                elif kind == "histogram":
                    samples = histogram_samples(name, full, HISTOGRAM_BUCKETS[name], elapsed)
                else:
                    samples = [(name, full, gauge_value(name, target, labels, t, start))]
                for sample_name, sample_labels, value in samples:
                    rows.setdefault((sample_name, label_text(sample_labels)), []).append((t, value))
        for (sample_name, text), points in sorted(rows.items()):
            for t, value in points:
                out.write("%s{%s} %s %d\n" % (sample_name, text, value, t))
    out.write("# EOF\n")


if __name__ == "__main__":
    main()
