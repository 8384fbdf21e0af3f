"""The metric families ncclguard exports (docs/operator.md, "Metrics"), as the alerts and the
dashboard use them: name -> (type, series). A series is (target, labels), `target` naming one of
TARGETS: the labels a ServiceMonitor / PodMonitor scrape adds. check_rules.py and
check_dashboard.py hold every name the rules and the dashboard use to this list;
make_openmetrics.py writes a series of each for the dashboard test."""

CONTROLLER_JOB = "ncclguard-controller-metrics"  # the ServiceMonitor's job: the metrics Service
PROBE_JOB = "ncclguard-system/ncclguard-probe"  # a PodMonitor's job: <namespace>/<name>

TARGETS = {
    "leader": {"job": CONTROLLER_JOB, "namespace": "ncclguard-system",
               "instance": "10.0.0.1:8080", "pod": "ncclguard-controller-7d9f-a"},
    "standby": {"job": CONTROLLER_JOB, "namespace": "ncclguard-system",
                "instance": "10.0.0.2:8080", "pod": "ncclguard-controller-7d9f-b"},
    "probe-1": {"job": PROBE_JOB, "namespace": "ncclguard-system",
                "instance": "10.0.1.1:9402", "pod": "ncclguard-probe-x1"},
    "probe-2": {"job": PROBE_JOB, "namespace": "ncclguard-system",
                "instance": "10.0.1.2:9402", "pod": "ncclguard-probe-x2"},
}

WEBHOOK_BUCKETS = (0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.5, 1.0)
RECONCILE_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10)
HOLD_BUCKETS = (10, 30, 60, 120, 300, 600, 1800, 3600, 7200)
PEER_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5)

CHECKS = ("efa-device-count", "efa-provider", "gpu-count", "gpu-p2p", "memlock-limit", "pci-acs")
NODES = {"probe-1": ("gpu-1", "p5.48xlarge"), "probe-2": ("gpu-2", "p5.48xlarge")}
FAILING = {("gpu-2", "efa-device-count")}  # one node fails one check; the rest pass


def _both(labels_list):
    return [(t, l) for t in ("leader", "standby") for l in labels_list]


def _leader(labels_list):
    return [("leader", l) for l in labels_list]


def _probes(make):
    return [(t, l) for t in NODES for l in make(t)]


def _node_checks():
    series = []
    for node, _ in NODES.values():
        for check in CHECKS:
            status = "Fail" if (node, check) in FAILING else "Pass"
            series.append({"node": node, "check": check, "status": status})
    return series


METRICS = {
    # Every process.
    "ncclguard_build_info": ("gauge", _both([{"version": "0.1.0"}]) + _probes(lambda t: [{"version": "0.1.0"}])),
    "up": ("gauge", _both([{}]) + _probes(lambda t: [{}])),
    "ncclguard_allocator_bytes": ("gauge", _both([{"state": s} for s in (
        "allocated", "active", "metadata", "resident", "mapped", "retained")]) + _probes(
        lambda t: [{"state": "allocated"}, {"state": "resident"}])),
    # Webhook (every replica serves).
    "ncclguard_webhook_requests_total": ("counter", _both([
        {"endpoint": "mutate", "result": "patched"}, {"endpoint": "mutate", "result": "skipped"},
        {"endpoint": "validate", "result": "allowed"}, {"endpoint": "validate", "result": "warned"},
        {"endpoint": "validate", "result": "denied"}, {"endpoint": "validate", "result": "audited"},
        {"endpoint": "runtimes", "result": "warned"},
        {"endpoint": "readyz", "result": "ok"}, {"endpoint": "healthz", "result": "ok"},
        {"endpoint": "metrics", "result": "ok"}, {"endpoint": "mutate", "result": "bad_request"}])),
    "ncclguard_webhook_findings_total": ("counter", _both([
        {"rule": "efa-resources-missing", "level": "fix"}, {"rule": "ipc-lock-missing", "level": "fix"},
        {"rule": "nccl-proto-invalid", "level": "deny"}, {"rule": "world-size-mismatch", "level": "deny"},
        {"rule": "image-unpinned", "level": "warn"}])),
    "ncclguard_webhook_audit_findings_total": ("counter", _both([
        {"rule": "nccl-proto-invalid", "action": "deny"}, {"rule": "efa-resources-missing", "action": "fix"},
        {"rule": "image-unpinned", "action": "warn"}])),
    "ncclguard_webhook_internal_errors_total": ("counter", _leader([{"endpoint": "validate"}])),
    "ncclguard_webhook_request_duration_seconds": ("histogram", _both([
        {"endpoint": "mutate"}, {"endpoint": "validate"}])),
    "ncclguard_webhook_certificate_expiry_timestamp_seconds": ("gauge", _both([{}])),
    "ncclguard_webhook_certificate_reloads_total": ("counter", _both([{"result": "success"}])),
    "ncclguard_webhook_in_flight_memory_budget_bytes": ("gauge", _both([{}])),
    # Controller (queues and reconciles on the leader only).
    "ncclguard_controller_reconcile_total": ("counter", _leader([
        {"controller": "trainingjob", "result": "success"}, {"controller": "trainingjob", "result": "requeue_after"},
        {"controller": "trainingjob", "result": "error"}, {"controller": "ncclpolicy", "result": "success"}])),
    "ncclguard_controller_reconcile_errors_total": ("counter", _leader([{"controller": "trainingjob"}])),
    "ncclguard_controller_reconcile_time_seconds": ("histogram", _leader([
        {"controller": "trainingjob"}, {"controller": "ncclpolicy"}])),
    "ncclguard_workqueue_depth": ("gauge", _leader([{"name": "trainingjob"}, {"name": "ncclpolicy"}])),
    "ncclguard_workqueue_adds_total": ("counter", _leader([{"name": "trainingjob"}, {"name": "ncclpolicy"}])),
    "ncclguard_workqueue_retries_total": ("counter", _leader([{"name": "trainingjob"}])),
    "ncclguard_workqueue_queue_duration_seconds": ("histogram", _leader([{"name": "trainingjob"}])),
    "ncclguard_workqueue_work_duration_seconds": ("histogram", _leader([{"name": "trainingjob"}])),
    "ncclguard_rest_client_requests_total": ("counter", _both([
        {"method": "GET", "code": "200"}, {"method": "PATCH", "code": "200"}, {"method": "POST", "code": "201"},
        {"method": "PATCH", "code": "409"}])),
    "ncclguard_watch_restarts_total": ("counter", _both([{"resource": "pods", "reason": "expired"}])),
    "ncclguard_informer_objects": ("gauge", _both([{"resource": "pods"}, {"resource": "nodes"}])),
    "ncclguard_informer_stored_bytes": ("gauge", _both([{"resource": "pods"}, {"resource": "nodes"}])),
    "ncclguard_leader_election_master_status": ("gauge", [
        ("leader", {"name": "ncclguard-controller"}), ("standby", {"name": "ncclguard-controller"})]),
    "ncclguard_gate_held_jobs": ("gauge", _leader([
        {"namespace": "ml", "kind": "PyTorchJob", "reason": "InsufficientValidatedNodes"},
        {"namespace": "team-b", "kind": "TrainJob", "reason": "InsufficientValidatedNodes"}])),
    "ncclguard_gate_hold_duration_seconds": ("histogram", _leader([{"kind": "PyTorchJob"}, {"kind": "Job"}])),
    "ncclguard_gate_releases_total": ("counter", _leader([{"kind": "PyTorchJob"}, {"kind": "Job"}])),
    "ncclguard_node_check_status": ("gauge", _both(_node_checks())),
    "ncclguard_nodes": ("gauge", _both([
        {"instance_type": "p5.48xlarge", "state": "validated"}, {"instance_type": "p5.48xlarge", "state": "failed"},
        {"instance_type": "p4d.24xlarge", "state": "unvalidated"}])),
    "ncclguard_kueue_admission_checks": ("gauge", _leader([{"state": "Pending"}, {"state": "Ready"}])),
    "ncclguard_diagnoses_total": ("counter", _leader([
        {"diagnosis": "efa-tcp-fallback"}, {"diagnosis": "nccl-watchdog-timeout"}, {"diagnosis": "container-oom-killed"}])),
    "ncclguard_pod_log_reads_total": ("counter", _leader([{"result": "read"}, {"result": "rate_limited"}])),
    "ncclguard_job_transports_total": ("counter", _leader([{"transport": "EFA"}, {"transport": "Socket"}])),
    "ncclguard_job_nccl_health": ("gauge", _leader([
        {"namespace": "ml", "kind": "PyTorchJob", "reason": "Healthy"},
        {"namespace": "ml", "kind": "PyTorchJob", "reason": "CollectiveStuck"}])),
    "ncclguard_job_placement": ("gauge", _leader([
        {"namespace": "ml", "kind": "PyTorchJob", "reason": "OneBlock"},
        {"namespace": "ml", "kind": "PyTorchJob", "reason": "Spread"}])),
    # The background audit (on the leader; a standby reports zeros).
    "ncclguard_audit_results": ("gauge", _leader([{"result": "pass"}, {"result": "warn"}, {"result": "fail"}])),
    "ncclguard_audit_findings": ("gauge", _leader([{"rule": "efa-resources-missing"}, {"rule": "ipc-lock-missing"},
                                                   {"rule": "nccl-proto-invalid"}])),
    "ncclguard_audit_reports_served": ("gauge", _both([{}])),
    "ncclguard_audit_report_writes_total": ("counter", _leader([{"operation": "apply"}, {"operation": "delete"}])),
    "ncclguard_audit_scan_duration_seconds": ("histogram", _leader([{}])),
    # Probe (one per GPU node).
    "ncclguard_probe_check_status": ("gauge", _probes(lambda t: [
        {"check": c, "status": "Fail" if (NODES[t][0], c) in FAILING else "Pass"} for c in CHECKS])),
    "ncclguard_probe_check_duration_seconds": ("gauge", _probes(lambda t: [{"check": c} for c in CHECKS])),
    "ncclguard_probe_node_info": ("gauge", _probes(lambda t: [{"node": NODES[t][0], "instance_type": NODES[t][1]}])),
    "ncclguard_probe_last_run_timestamp_seconds": ("gauge", _probes(lambda t: [{}])),
    "ncclguard_probe_runs_total": ("counter", _probes(lambda t: [{"result": "published"}, {"result": "failed"}])),
    # The probe's tests between nodes (peer checks).
    "ncclguard_probe_peer_tests_total": ("counter", _probes(lambda t: [
        {"tier": tier, "pass": "ring", "result": result}
        for tier in ("tcp", "fabric") for result in ("passed", "failed")] + [
        {"tier": "tcp", "pass": "culprit", "result": "passed"}])),
    "ncclguard_probe_peer_test_duration_seconds": ("histogram", _probes(lambda t: [{"tier": "tcp"}, {"tier": "fabric"}])),
    "ncclguard_probe_peer_round_duration_seconds": ("gauge", _probes(lambda t: [{}])),
    "ncclguard_probe_peer_last_round_timestamp_seconds": ("gauge", _probes(lambda t: [{}])),
    "ncclguard_probe_peer_standing": ("gauge", _probes(lambda t: [{"standing": "reachable"}])),
    "ncclguard_probe_ras_reads_total": ("counter", _probes(lambda t: [{"answer": "Answered"}, {"answer": "TimedOut"}])),
    "ncclguard_probe_ras_round_duration_seconds": ("gauge", _probes(lambda t: [{}])),
    "ncclguard_probe_ras_pods": ("gauge", _probes(lambda t: [{"health": "Healthy"}])),
}

HISTOGRAM_BUCKETS = {
    "ncclguard_webhook_request_duration_seconds": WEBHOOK_BUCKETS,
    "ncclguard_controller_reconcile_time_seconds": RECONCILE_BUCKETS,
    "ncclguard_workqueue_queue_duration_seconds": RECONCILE_BUCKETS,
    "ncclguard_workqueue_work_duration_seconds": RECONCILE_BUCKETS,
    "ncclguard_gate_hold_duration_seconds": HOLD_BUCKETS,
    "ncclguard_audit_scan_duration_seconds": RECONCILE_BUCKETS,
    "ncclguard_probe_peer_test_duration_seconds": PEER_BUCKETS,
}


def sample_names():
    """Every name a series can have: histograms as _bucket, _sum and _count."""
    names = set()
    for name, (kind, _) in METRICS.items():
        if kind == "histogram":
            names.update(name + suffix for suffix in ("_bucket", "_sum", "_count"))
        else:
            names.add(name)
    return names
