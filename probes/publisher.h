// DaemonSet mode of the probe: runs the checks and writes the result to the cluster (the
// NodeValidation named after the node, the node label and the NcclReady condition), again every
// interval and whenever someone asks through an annotation. Publishing errors are logged and
// retried with backoff: a probe pod must not crash because the API server is away.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>

#include "kube/backoff.h"
#include "kube/client.h"
#include "kube/stop_token.h"
#include "probes/instance_type.h"
#include "probes/metrics.h"
#include "probes/report.h"

namespace ncclguard::probes {

// core::kProbeRequestedAnnotation (any value) on a NodeValidation asks that node's probe for a run
// now:
//   kubectl annotate nodevalidation NODE ncclguard.io/probe-requested="$(date +%s)" --overwrite
// The probe removes it after publishing that run.

// nodevalidations.ncclguard.io/v1alpha1, cluster-scoped.
kube::ResourceRef NodeValidations();

struct PublisherOptions {
  std::string node_name;
  std::chrono::milliseconds interval{std::chrono::minutes(5)};
  // How often the NodeValidation is read for the request annotation between runs.
  std::chrono::milliseconds request_poll{std::chrono::seconds(5)};
  kube::BackoffOptions retry;  // between failed publishing attempts
  std::string field_manager = "ncclguard-probe";
  // The condition's heartbeat/transition clock; default system_clock::now (tests pin it).
  std::function<std::chrono::system_clock::time_point()> clock;
  // Where each run and publishing attempt is recorded (`--metrics-listen`); none when null.
  std::shared_ptr<ProbeMetrics> metrics;
  // Whether this probe runs the checks between nodes (probes/peer_round.h). Without them each
  // report removes a former status.peer, so that the peers stop counting on this node.
  bool peer_checks = false;
  // Whether this probe reads NCCL's RAS (probes/ras_watch.h). Without it each report removes a
  // former status.ras.
  bool ras_reads = false;
};

struct PublisherStats {
  int probes = 0;            // probe runs
  int publishes = 0;         // reports fully written
  int publish_failures = 0;  // failed attempts (each retried)
  int requested_runs = 0;    // runs started by the request annotation
  int requests_cleared = 0;  // request annotations removed after their run
};

class NodePublisher {
 public:
  using ProbeFunction = std::function<ProbeReport()>;

  NodePublisher(std::shared_ptr<kube::Client> client, ProbeFunction probe,
                PublisherOptions options);

  // One write of `report`; throws (kube::ApiError and others) at the first failed call.
  // `request` is the request annotation's value this run answers; it is removed only if it is
  // still that value (a newer request stays for the next run).
  void Publish(const ProbeReport& report, const std::string& request = "");

  // Runs the probe and publishes its report, retrying with backoff until that succeeds. Returns
  // the report, or nullopt when `stop` fired first or the probe itself threw (logged).
  std::optional<ProbeReport> RunOnce(const kube::StopToken& stop);

  // RunOnce now, then every interval and on request, until `stop` fires.
  void Run(const kube::StopToken& stop);

  // The request annotation's value on the NodeValidation; "" when none or no object yet.
  std::string PendingRequest();

  PublisherStats stats() const;

 private:
  void ClearRequest(const std::string& request);
  void Count(int PublisherStats::*counter);

  std::shared_ptr<kube::Client> client_;
  ProbeFunction probe_;
  PublisherOptions options_;
  mutable std::mutex mutex_;
  PublisherStats stats_;
};

// `resolved` as it is when it has a name; otherwise the label of the Node `node_name`, read
// with `client`. A failed read leaves it unknown, the error in `source` (the next run reads
// again).
ResolvedInstanceType WithNodeLabelFallback(ResolvedInstanceType resolved, kube::Client& client,
                                           const std::string& node_name);

}  // namespace ncclguard::probes
