#include "cli/cluster_audit.h"

#include <algorithm>
#include <ostream>
#include <sstream>
#include <tuple>
#include <utility>

#include "cli/exit_code.h"
#include "controllers/training_job_reconciler.h"
#include "core/catalog.h"
#include "core/errors.h"
#include "core/guide.h"
#include "core/image_pin.h"
#include "core/kinds.h"
#include "core/policy_report.h"

namespace ncclguard::cli {
namespace {

std::string NamespaceOf(const core::Json& object) {
  const auto metadata = object.find("metadata");
  if (metadata == object.end() || !metadata->is_object()) return "";
  const auto ns = metadata->find("namespace");
  return ns != metadata->end() && ns->is_string() ? ns->get<std::string>() : "";
}

// The running pods of one job run different digests of one image: the controller's diagnosis,
// which `ncclguard audit` reports too.
constexpr std::string_view kImageDriftId = "image-drift";

// Where the guide says how to pack a job with Kueue's topology-aware scheduling (section 19).
constexpr std::string_view kTopologyGuideSlug = "advanced-tuning";

}  // namespace

bool AuditScope::Includes(std::string_view ns, const core::AuditPolicy& audit) const {
  return all_namespaces ? audit.Audits(ns) : ns == namespace_;
}

std::string ScopeNamespace(const std::string& flag, const std::string& context_namespace) {
  if (!flag.empty()) return flag;
  if (!context_namespace.empty()) return context_namespace;
  return "default";
}

ClusterAudit::ClusterAudit(core::Policy policy, AuditScope scope, AuditOutput output)
    : policy_(std::move(policy)), scope_(std::move(scope)), output_(output) {}

void ClusterAudit::AddRuntime(core::Json runtime) {
  const auto kind = core::KindOf(runtime.value("apiVersion", ""), runtime.value("kind", ""));
  if (!kind) return;
  const core::ObjectRef ref = core::ObjectRef::From(runtime);
  const std::string ns = core::KindInfoOf(*kind).cluster_scoped ? "" : ref.namespace_;
  runtimes_.insert_or_assign({*kind, ns, ref.name}, std::move(runtime));
}

core::RuntimeLookup ClusterAudit::Runtimes() const {
  return [this](const core::RuntimeRef& ref, std::string_view ns) -> std::optional<core::Json> {
    const bool cluster_scoped = core::KindInfoOf(ref.kind).cluster_scoped;
    const auto found =
        runtimes_.find({ref.kind, cluster_scoped ? std::string() : std::string(ns), ref.name});
    if (found == runtimes_.end()) return std::nullopt;
    return found->second;
  };
}

std::string ClusterAudit::Add(const core::Json& object) {
  const std::string ns = NamespaceOf(object);
  if (!scope_.Includes(ns, policy_.audit)) return "";
  if (object.value("kind", "") == "Pod") KeepJobPod(object);
  std::optional<core::ObjectAudit> audit;
  try {
    audit = core::AuditObject(object, policy_, Runtimes());
  } catch (const core::InputError& e) {
    // A malformed object in a live cluster is not a reason to stop auditing the others.
    ++counts_.errors;
    const std::string line = core::ObjectRef::From(object).Describe() + ": error: " + e.what();
    unreadable_.push_back(line);
    return output_ == AuditOutput::Text ? line + "\n" : "";
  }
  if (!audit) return "";
  Count(*audit);
  if (output_ == AuditOutput::Text) return FormatObjectAudit(*audit);
  audits_[ns].push_back(std::move(*audit));
  return "";
}

void ClusterAudit::Count(const core::ObjectAudit& audit) {
  ++counts_.objects;
  namespaces_.insert(audit.object.namespace_);
  if (audit.findings.empty()) ++counts_.pass;
  for (const core::AuditFinding& finding : audit.findings) {
    switch (finding.result) {
      case core::AuditResult::Pass:
        ++counts_.pass;
        break;
      case core::AuditResult::Warn:
        ++counts_.warn;
        break;
      case core::AuditResult::Fail:
        ++counts_.fail;
        break;
    }
  }
}

void ClusterAudit::KeepJobPod(const core::Json& pod) {
  const auto status = pod.find("status");
  const std::string phase =
      status != pod.end() && status->is_object() ? status->value("phase", "") : "";
  if (phase != "Running" && phase != "Pending") return;
  const std::vector<controllers::JobKey> keys = controllers::JobKeysForPod(pod);
  if (keys.empty()) return;
  job_pods_[{static_cast<int>(keys.front().kind), keys.front().namespace_, keys.front().name}]
      .push_back(core::PodImageView(pod));
}

void ClusterAudit::AuditImageDrift(std::ostream* text) {
  for (auto& [key, pods] : job_pods_) {
    const std::vector<std::string> lines = core::ImageDrift(pods);
    pods.clear();
    if (lines.empty()) continue;
    const auto kind = static_cast<core::WorkloadKind>(std::get<0>(key));
    const core::KindInfo& info = core::KindInfoOf(kind);
    core::ObjectAudit audit;
    audit.object = core::ObjectRef{.api_version = std::string(info.api_version),
                                   .kind = std::string(info.kind_name),
                                   .namespace_ = std::get<1>(key),
                                   .name = std::get<2>(key),
                                   .uid = "",
                                   .resource = std::string(info.resource)};
    const core::CatalogEntry* entry = core::Catalog::Find(kImageDriftId);
    for (const std::string& line : lines) {
      core::AuditFinding finding;
      finding.finding.rule = std::string(kImageDriftId);
      finding.finding.level = core::Level::Warn;
      finding.finding.guide =
          core::GuideLink(policy_.guide_base_url, entry != nullptr ? entry->slug : "nccl-version");
      finding.finding.message =
          line + ". " + (entry != nullptr ? std::string(entry->remedy) : std::string());
      finding.finding.object = audit.object;
      finding.result = core::AuditResult::Warn;
      finding.severity = "low";  // a warning, as core::ResultOf says
      audit.findings.push_back(std::move(finding));
    }
    Count(audit);
    if (text != nullptr) {
      *text << FormatObjectAudit(audit);
    } else {
      audits_[audit.object.namespace_].push_back(std::move(audit));
    }
  }
  job_pods_.clear();
}

void ClusterAudit::NotServed(std::string kind) { not_served_.push_back(std::move(kind)); }

void ClusterAudit::Finish(std::ostream& out) {
  AuditImageDrift(output_ == AuditOutput::Text ? &out : nullptr);
  const std::vector<core::TopologyWarning> warnings = topology_.Warnings();
  const std::string guide = core::GuideLink(policy_.guide_base_url, kTopologyGuideSlug);
  if (output_ == AuditOutput::Text) {
    for (const core::TopologyWarning& warning : warnings) {
      out << FormatTopologyWarning(warning, guide);
    }
    out << counts_.fail << " fail, " << counts_.warn << " warn, " << counts_.pass
        << " pass: " << counts_.objects << " objects in " << namespaces_.size() << " namespaces";
    if (counts_.errors > 0) out << ", " << counts_.errors << " unreadable";
    if (!warnings.empty()) {
      out << ", " << warnings.size() << " topology warning" << (warnings.size() == 1 ? "" : "s");
    }
    out << "\n";
    return;
  }
  // The List's fields as Json::dump(2) would lay them out, the reports indented to match.
  auto indented = [](const core::Json& value, const std::string& indent) {
    std::string text = value.dump(2, ' ', false, core::Json::error_handler_t::replace);
    std::string shifted;
    shifted.reserve(text.size() + text.size() / 8);
    for (const char c : text) {
      shifted += c;
      if (c == '\n') shifted += indent;
    }
    return shifted;
  };
  out << "{\n  \"apiVersion\": \"v1\",\n  \"kind\": \"List\",\n  \"metadata\": {},\n  \"items\": [";
  bool first = true;
  for (const std::string& ns : namespaces_) {
    std::vector<core::ObjectAudit> audits;
    if (const auto found = audits_.find(ns); found != audits_.end()) {
      audits = std::move(found->second);
      audits_.erase(found);
    }
    for (const core::Json& report : core::PolicyReportsFor(ns, std::move(audits))) {
      out << (first ? "\n    " : ",\n    ") << indented(report, "    ");
      first = false;
    }
  }
  core::Json topology_warnings = core::Json::array();
  for (const core::TopologyWarning& warning : warnings) {
    topology_warnings.push_back(
        {{"reason", warning.reason}, {"message", warning.message}, {"guide", guide}});
  }
  const core::Json notes{{"policy", policy_source_},
                         {"notServed", not_served_},
                         {"unreadable", unreadable_},
                         {"topologyWarnings", std::move(topology_warnings)}};
  out << (first ? "]" : "\n  ]") << ",\n  \"ncclguard\": " << indented(notes, "  ") << "\n}\n";
}

std::string ClusterAudit::Finish() {
  std::ostringstream out;
  Finish(out);
  return out.str();
}

int ClusterAudit::ExitCode() const { return counts_.fail > 0 ? kExitDenied : kExitClean; }

std::string FormatObjectAudit(const core::ObjectAudit& audit) {
  std::string out =
      audit.object.Describe() + ": " + std::string(core::AuditResultName(audit.Result())) + "\n";
  // In the reports' order: by rule, then path.
  std::vector<const core::AuditFinding*> findings;
  for (const core::AuditFinding& audited : audit.findings) findings.push_back(&audited);
  std::stable_sort(findings.begin(), findings.end(), [](const auto* a, const auto* b) {
    return std::tie(a->finding.rule, a->finding.path) < std::tie(b->finding.rule, b->finding.path);
  });
  for (const core::AuditFinding* audited : findings) {
    const core::Finding& finding = audited->finding;
    out += "  " + std::string(core::AuditResultName(audited->result)) + " " + finding.rule + " (" +
           std::string(core::LevelName(finding.level)) + ")";
    if (!finding.path.empty()) out += " at " + finding.path;
    out += "\n    " + finding.message + "\n    guide: " + finding.guide + "\n";
  }
  return out;
}

std::string FormatTopologyWarning(const core::TopologyWarning& warning, std::string_view guide) {
  return "warning: " + warning.reason + ": " + warning.message + " (guide: " + std::string(guide) +
         ")\n";
}

}  // namespace ncclguard::cli
