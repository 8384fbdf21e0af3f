// What `ncclguard audit` makes of the objects it lists from a cluster: each audited object's
// results as text, or the PolicyReports of each namespace (core/policy_report.h, as the
// controller's background audit writes them) as one v1 List; and the exit code. Pure:
// cli/audit_command.cpp lists the objects and hands them over one at a time, so that only the
// results are kept, never the objects.
#pragma once

#include <cstddef>
#include <iosfwd>
#include <map>
#include <set>
#include <string>
#include <string_view>
#include <tuple>
#include <vector>

#include "core/audit.h"
#include "core/json.h"
#include "core/policy.h"
#include "core/topology_audit.h"

namespace ncclguard::cli {

// Which namespaces are audited: the one -n names, or (-A) every one the policy's audit allows
// (core::AuditPolicy::Audits: never the system ones).
struct AuditScope {
  bool all_namespaces = false;
  std::string namespace_;  // without all_namespaces

  bool Includes(std::string_view ns, const core::AuditPolicy& audit) const;
};

// -n's namespace, else the kubeconfig context's, else "default".
std::string ScopeNamespace(const std::string& flag, const std::string& context_namespace);

enum class AuditOutput { Text, Json };

// Result counts as the PolicyReports' summaries count them: an object with no finding is one pass,
// one with findings one result per finding.
struct AuditCounts {
  std::size_t objects = 0;
  std::size_t pass = 0;
  std::size_t warn = 0;
  std::size_t fail = 0;
  std::size_t errors = 0;  // objects that could not be read (malformed), not audited
};

class ClusterAudit {
 public:
  ClusterAudit(core::Policy policy, AuditScope scope, AuditOutput output);

  // A TrainingRuntime or ClusterTrainingRuntime: what the TrainJobs added later are checked with.
  void AddRuntime(core::Json runtime);
  // One listed object, audited when it is in scope and core::AuditObject reports on it. Returns
  // the text to print for it now (text output; "" otherwise or when not audited).
  std::string Add(const core::Json& object);
  // A kind the server does not serve (its CRD is not installed): "PyTorchJob kubeflow.org/v1".
  void NotServed(std::string kind);
  // The nodes, Kueue ResourceFlavors and Topologies (flavors and Topologies first): their
  // labelling problems (core/topology_audit.h) are said at Finish. They change no exit code.
  core::TopologyAudit& topology() { return topology_; }
  // Where the policy came from, for the JSON output ("NcclPolicy default", "--policy FILE"...).
  void SetPolicySource(std::string source) { policy_source_ = std::move(source); }

  // Once, at the end. Text: the topology warnings, a line each ("warning: <reason>: <message>
  // (guide: <link>)"), then the summary line. JSON: a v1 List of the PolicyReports of each
  // namespace with an audited object (by namespace), with ncclguard's own notes (policy, kinds not
  // served, unreadable objects, topologyWarnings: reason, message, guide) in a top-level
  // "ncclguard" field that Kubernetes clients ignore; written a namespace at a time, each one's
  // results let go once written.
  void Finish(std::ostream& out);
  std::string Finish();  // the same, as a string
  const AuditCounts& counts() const { return counts_; }
  // kExitDenied when any result is fail, else kExitClean.
  int ExitCode() const;

 private:
  core::RuntimeLookup Runtimes() const;

  core::Policy policy_;
  AuditScope scope_;
  AuditOutput output_;
  std::string policy_source_;
  // (kind, namespace, name) -> the runtime; ClusterTrainingRuntimes have no namespace.
  std::map<std::tuple<core::WorkloadKind, std::string, std::string>, core::Json> runtimes_;
  // By namespace: the audits (JSON output only; text is printed as it comes).
  std::map<std::string, std::vector<core::ObjectAudit>, std::less<>> audits_;
  // Those holding an audited object: the ones the controller writes reports for (it writes none
  // for a namespace with nothing audited).
  std::set<std::string, std::less<>> namespaces_;
  std::vector<std::string> not_served_;
  std::vector<std::string> unreadable_;
  AuditCounts counts_;
  core::TopologyAudit topology_;
  // What the image drift (diagnosis image-drift, core/image_pin.h) reads of the running pods of
  // each job in scope, by the job's kind, namespace and name; judged at Finish.
  std::map<std::tuple<int, std::string, std::string>, std::vector<core::Json>> job_pods_;
  void KeepJobPod(const core::Json& pod);
  // The jobs whose pods run different digests of one image, as audits of the job: said at Finish.
  void AuditImageDrift(std::ostream* text);
  void Count(const core::ObjectAudit& audit);
};

// One object's results as `ncclguard audit` prints them:
//   PyTorchJob ml/bad: fail
//     fail nccl-proto-invalid (deny) at /spec/...
//       <message>
//       guide: <link>
std::string FormatObjectAudit(const core::ObjectAudit& audit);

// One topology warning as the text output prints it:
//   warning: NodeMissingTopologyLevel: <message> (guide: <link>)
std::string FormatTopologyWarning(const core::TopologyWarning& warning, std::string_view guide);

}  // namespace ncclguard::cli
