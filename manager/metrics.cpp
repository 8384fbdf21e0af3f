#include "manager/metrics.h"

#include <algorithm>

#include "controllers/diagnosis.h"
#include "controllers/log_transport.h"
#include "metrics/registry.h"

namespace ncclguard::manager {
namespace {

prometheus::Family<prometheus::Counter>& CounterFamily(prometheus::Registry& registry,
                                                       const std::string& name,
                                                       const std::string& help) {
  return prometheus::BuildCounter().Name(name).Help(help).Register(registry);
}

prometheus::Family<prometheus::Histogram>& HistogramFamily(prometheus::Registry& registry,
                                                           const std::string& name,
                                                           const std::string& help) {
  return prometheus::BuildHistogram().Name(name).Help(help).Register(registry);
}

}  // namespace

prometheus::Histogram::BucketBoundaries Metrics::ReconcileBuckets() {
  return {0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60};
}

prometheus::Histogram::BucketBoundaries Metrics::HoldBuckets() {
  return {1, 5, 15, 30, 60, 120, 300, 600, 1800, 3600, 7200, 14400, 28800, 86400};
}

Metrics& Metrics::Process() {
  static Metrics* process = new Metrics(metrics::Global());  // never destroyed: used until exit
  return *process;
}

Metrics::Metrics(prometheus::Registry& registry)
    : registry_(registry),
      own_kube_(&registry == &metrics::Global() ? nullptr
                                                : std::make_unique<kube::Metrics>(registry)),
      kube_(own_kube_ ? own_kube_.get() : &kube::Metrics::Process()),
      reconciles_(CounterFamily(registry, "ncclguard_controller_reconcile_total",
                                "Reconciles per controller by result (success, error, requeue, "
                                "requeue_after).")),
      reconcile_errors_(CounterFamily(registry, "ncclguard_controller_reconcile_errors_total",
                                      "Reconciles per controller that failed and are retried.")),
      reconcile_time_(
          HistogramFamily(registry, "ncclguard_controller_reconcile_time_seconds",
                          "Time per reconcile, actions applied included, per controller.")),
      releases_(CounterFamily(registry, "ncclguard_gate_releases_total",
                              "Held jobs the gate released, by kind.")),
      hold_duration_(
          HistogramFamily(registry, "ncclguard_gate_hold_duration_seconds",
                          "From a held job's creation to its release by the gate, by kind.")),
      diagnoses_(CounterFamily(registry, "ncclguard_diagnoses_total",
                               "Diagnoses named on a job for the first time, by diagnosis id.")),
      transports_(CounterFamily(registry, "ncclguard_job_transports_total",
                                "Jobs whose NcclTransport condition was set or changed, by the "
                                "transport their pods' logs show (EFA, Socket, Unknown).")),
      ca_expiry_(prometheus::BuildGauge()
                     .Name("ncclguard_webhook_ca_expiry_timestamp_seconds")
                     .Help("notAfter of the newest CA of the webhook's self-managed bundle, as a "
                           "Unix time.")
                     .Register(registry)) {
  auto& log_reads = CounterFamily(registry, "ncclguard_pod_log_reads_total",
                                  "Pod log reads by result (read, rate_limited, error).");
  log_reads_ = {&log_reads.Add({{"result", "read"}}), &log_reads.Add({{"result", "rate_limited"}}),
                &log_reads.Add({{"result", "error"}})};
  auto& report_writes =
      CounterFamily(registry, "ncclguard_audit_report_writes_total",
                    "PolicyReport writes of the background audit by operation (apply, delete).");
  report_writes_ = {&report_writes.Add({{"operation", "apply"}}),
                    &report_writes.Add({{"operation", "delete"}})};
  audit_scan_ = &HistogramFamily(registry, "ncclguard_audit_scan_duration_seconds",
                                 "Time to evaluate one namespace's workloads and write its "
                                 "PolicyReports (the background audit).")
                     .Add({}, ReconcileBuckets());
  for (const core::KindInfo& info : core::ManagedKinds()) {
    const prometheus::Labels kind{{"kind", std::string(info.kind_name)}};
    release_series_.emplace(info.kind, &releases_.Add(kind));
    hold_series_.emplace(info.kind, &hold_duration_.Add(kind, HoldBuckets()));
  }
  for (const auto kind :
       {controllers::NcclTransportKind::Efa, controllers::NcclTransportKind::Socket,
        controllers::NcclTransportKind::Unknown}) {
    const std::string name(controllers::TransportName(kind));
    transport_series_.emplace(name, &transports_.Add({{"transport", name}}));
  }
  for (const controllers::Diagnosis* diagnosis : controllers::DiagnosisRegistry::All()) {
    const std::string id(diagnosis->Info().id);
    diagnosis_series_.emplace(id, &diagnoses_.Add({{"diagnosis", id}}));
  }
}

Metrics::Reconciles Metrics::Controller(const std::string& name) {
  const auto result = [&](const char* value) {
    return &reconciles_.Add({{"controller", name}, {"result", value}});
  };
  const prometheus::Labels controller{{"controller", name}};
  return {result("success"),
          result("error"),
          result("requeue"),
          result("requeue_after"),
          &reconcile_errors_.Add(controller),
          &reconcile_time_.Add(controller, ReconcileBuckets())};
}

void Metrics::CountRelease(core::WorkloadKind kind, std::optional<double> held_seconds) {
  const auto release = release_series_.find(kind);
  if (release == release_series_.end()) return;  // not a managed kind: never released
  release->second->Increment();
  if (held_seconds) hold_series_.at(kind)->Observe(std::max(0.0, *held_seconds));
}

void Metrics::CountDiagnosis(std::string_view id) {
  const auto series = diagnosis_series_.find(id);
  if (series != diagnosis_series_.end()) series->second->Increment();
}

void Metrics::CountTransport(std::string_view transport) {
  const auto series = transport_series_.find(transport);
  if (series != transport_series_.end()) series->second->Increment();
}

void Metrics::CountLogRead(LogRead result) {
  log_reads_.at(static_cast<std::size_t>(result))->Increment();
}

void Metrics::CountReportWrite(ReportWrite operation) {
  report_writes_.at(static_cast<std::size_t>(operation))->Increment();
}

void Metrics::ObserveAuditScan(double seconds) { audit_scan_->Observe(std::max(0.0, seconds)); }

void Metrics::SetWebhookCaExpiry(std::int64_t unix_seconds) {
  // Made at the first value: no series (rather than 0, long expired) where no CA is managed.
  ca_expiry_.Add({}).Set(static_cast<double>(unix_seconds));
}

}  // namespace ncclguard::manager
