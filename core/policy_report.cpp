#include "core/policy_report.h"

#include <algorithm>
#include <tuple>

namespace ncclguard::core {
namespace {

Json ResourceOf(const ObjectRef& object) {
  Json resource{{"apiVersion", object.api_version},
                {"kind", object.kind},
                {"namespace", object.namespace_},
                {"name", object.name}};
  if (!object.uid.empty()) resource["uid"] = object.uid;
  return resource;
}

Json Report(std::string_view namespace_, std::size_t index) {
  return Json{{"apiVersion", kPolicyReportApiVersion},
              {"kind", "PolicyReport"},
              {"metadata",
               {{"name", PolicyReportName(index)},
                {"namespace", namespace_},
                {"labels", {{"app.kubernetes.io/managed-by", kPolicyReportManagedBy}}}}},
              {"summary", {{"pass", 0}, {"fail", 0}, {"warn", 0}, {"error", 0}, {"skip", 0}}},
              {"results", Json::array()}};
}

}  // namespace

std::string PolicyReportName(std::size_t index) {
  std::string name(kPolicyReportName);
  if (index > 0) name += "-" + std::to_string(index + 1);
  return name;
}

Json PolicyReportResult(const ObjectAudit& audit, const AuditFinding* finding) {
  Json result{{"source", kPolicyReportSource},
              {"policy", kPolicyReportSource},
              {"scored", true},
              {"resources", Json::array({ResourceOf(audit.object)})}};
  if (finding == nullptr) {
    result["result"] = AuditResultName(AuditResult::Pass);
    result["message"] = "no ncclguard rule finds a problem";
    return result;
  }
  result["rule"] = finding->finding.rule;
  result["result"] = AuditResultName(finding->result);
  result["severity"] = finding->severity;
  result["message"] = finding->finding.message;
  Json properties{{"guide", finding->finding.guide}, {"action", LevelName(finding->finding.level)}};
  if (!finding->finding.path.empty()) properties["path"] = finding->finding.path;
  result["properties"] = std::move(properties);
  return result;
}

std::vector<Json> PolicyReportsFor(std::string_view namespace_, std::vector<ObjectAudit> audits,
                                   std::size_t budget) {
  std::sort(audits.begin(), audits.end(), [](const ObjectAudit& a, const ObjectAudit& b) {
    return std::tie(a.object.kind, a.object.name, a.object.uid) <
           std::tie(b.object.kind, b.object.name, b.object.uid);
  });
  std::vector<Json> reports{Report(namespace_, 0)};
  std::size_t used = reports.back().dump().size();
  const std::size_t empty_size = used;
  for (ObjectAudit& audit : audits) {
    std::stable_sort(audit.findings.begin(), audit.findings.end(),
                     [](const AuditFinding& a, const AuditFinding& b) {
                       return std::tie(a.finding.rule, a.finding.path) <
                              std::tie(b.finding.rule, b.finding.path);
                     });
    Json results = Json::array();
    if (audit.findings.empty()) {
      results.push_back(PolicyReportResult(audit, nullptr));
    } else {
      for (const AuditFinding& finding : audit.findings) {
        results.push_back(PolicyReportResult(audit, &finding));
      }
    }
    std::size_t size = 0;
    for (const Json& result : results) size += result.dump().size() + 1;
    if (used + size > budget && used > empty_size) {
      reports.push_back(Report(namespace_, reports.size()));
      used = empty_size;
    }
    used += size;
    Json& report = reports.back();
    for (Json& result : results) {
      report["summary"][result["result"].get<std::string>()] =
          report["summary"][result["result"].get<std::string>()].get<int>() + 1;
      report["results"].push_back(std::move(result));
    }
  }
  return reports;
}

}  // namespace ncclguard::core
