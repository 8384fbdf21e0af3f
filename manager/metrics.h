// The controller process's metrics beside kube/'s (kube/metrics.h, whose work queue, request,
// watch and leader election families it shares): reconciles per controller, the gate's releases
// and hold times, diagnoses and NCCL transports seen on jobs, pod log reads and the webhook CA's
// expiry (docs/operator.md "Metrics"). Families are made once per registry, and the series of a
// controller, kind, diagnosis or result once, so recording never builds a label map. State
// (held jobs, nodes, node checks, Kueue checks) is not here: it is read from the caches when
// scraped (manager/state_metrics.h). Thread-safe.
#pragma once

#include <prometheus/counter.h>
#include <prometheus/family.h>
#include <prometheus/gauge.h>
#include <prometheus/histogram.h>
#include <prometheus/registry.h>

#include <array>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "core/kinds.h"
#include "kube/metrics.h"

namespace ncclguard::manager {

// How a pod log read went (ncclguard_pod_log_reads_total{result}).
enum class LogRead {
  kRead,         // a container's tail came back
  kRateLimited,  // a pod due for a read waits for the next pass (the global rate)
  kError,        // nothing came back (not started, gone, denied, the API server away)
};

// A write of the background audit (ncclguard_audit_report_writes_total{operation}).
enum class ReportWrite {
  kApply,   // a PolicyReport applied (created or changed)
  kDelete,  // a namespace's report no longer needed
};

class Metrics {
 public:
  // Bounds of ncclguard_controller_reconcile_time_seconds: 1 ms to 60 s.
  static prometheus::Histogram::BucketBoundaries ReconcileBuckets();
  // Bounds of ncclguard_gate_hold_duration_seconds: 1 s to 24 h.
  static prometheus::Histogram::BucketBoundaries HoldBuckets();

  // The families in metrics::Global(), with kube::Metrics::Process(); made once.
  static Metrics& Process();
  // Families in `registry`, the kube layer's too (a test's own registry).
  explicit Metrics(prometheus::Registry& registry);
  Metrics(const Metrics&) = delete;
  Metrics& operator=(const Metrics&) = delete;

  const prometheus::Registry& registry() const { return registry_; }
  kube::Metrics& kube() { return *kube_; }

  // The series of one controller's reconciles (label controller).
  struct Reconciles {
    prometheus::Counter* success = nullptr;        // applied, nothing more to do
    prometheus::Counter* error = nullptr;          // failed: retried with backoff
    prometheus::Counter* requeue = nullptr;        // a write conflicted: read again with backoff
    prometheus::Counter* requeue_after = nullptr;  // applied, looked at again after a time
    prometheus::Counter* errors = nullptr;         // ncclguard_controller_reconcile_errors_total
    prometheus::Histogram* time = nullptr;
  };
  Reconciles Controller(const std::string& name);

  // A held job released by the gate, held for `held_seconds` (unknown: not observed).
  void CountRelease(core::WorkloadKind kind, std::optional<double> held_seconds);
  // A diagnosis named on a job for the first time (ids this build does not register: ignored).
  void CountDiagnosis(std::string_view id);
  // A job's NcclTransport condition set or changed to `transport` (EFA, Socket, Unknown).
  void CountTransport(std::string_view transport);
  void CountLogRead(LogRead result);
  void CountReportWrite(ReportWrite operation);
  // One namespace evaluated and its reports written, in `seconds`.
  void ObserveAuditScan(double seconds);
  // notAfter of the newest CA of the webhook's self-managed bundle, as a Unix time.
  void SetWebhookCaExpiry(std::int64_t unix_seconds);

 private:
  template <typename T>
  using ById = std::map<std::string, T*, std::less<>>;

  prometheus::Registry& registry_;
  std::unique_ptr<kube::Metrics> own_kube_;  // for a registry other than the process's
  kube::Metrics* kube_;
  prometheus::Family<prometheus::Counter>& reconciles_;
  prometheus::Family<prometheus::Counter>& reconcile_errors_;
  prometheus::Family<prometheus::Histogram>& reconcile_time_;
  prometheus::Family<prometheus::Counter>& releases_;
  prometheus::Family<prometheus::Histogram>& hold_duration_;
  prometheus::Family<prometheus::Counter>& diagnoses_;
  prometheus::Family<prometheus::Counter>& transports_;
  std::array<prometheus::Counter*, 3> log_reads_{};  // by LogRead
  prometheus::Family<prometheus::Gauge>& ca_expiry_;
  std::array<prometheus::Counter*, 2> report_writes_{};  // by ReportWrite
  prometheus::Histogram* audit_scan_ = nullptr;

  // Made up front for every managed kind, transport and registered diagnosis (each starts at
  // 0); read-only afterwards.
  std::map<core::WorkloadKind, prometheus::Counter*> release_series_;
  std::map<core::WorkloadKind, prometheus::Histogram*> hold_series_;
  ById<prometheus::Counter> transport_series_;
  ById<prometheus::Counter> diagnosis_series_;
};

}  // namespace ncclguard::manager
