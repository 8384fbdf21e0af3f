#include "probes/node_validation.h"

#include <stdexcept>

namespace ncclguard::probes {

core::Json NodeValidationStatus(const ProbeReport& report) {
  core::Json checks = core::Json::array();
  for (const CheckResult& result : report.checks) checks.push_back(CheckResultJson(result));
  return core::Json{{"instanceType", report.instance_type},
                    {"summary", StatusName(report.summary)},
                    {"checks", std::move(checks)},
                    {"lastProbeTime", Rfc3339(report.probe_time)},
                    {"probeVersion", report.probe_version}};
}

core::Json NodeValidationObject(const ProbeReport& report) {
  if (report.node_name.empty())
    throw std::invalid_argument("NodeValidation: the report has no node name");
  return core::Json{{"apiVersion", core::kApiVersion},
                    {"kind", kNodeValidationKind},
                    {"metadata", {{"name", report.node_name}}},
                    {"status", NodeValidationStatus(report)}};
}

std::string ValidatedLabelValue(const ProbeReport& report) {
  return report.summary == CheckStatus::Fail ? "false" : "true";
}

core::Json NodeLabelPatch(const ProbeReport& report) {
  return core::Json{
      {"metadata",
       {{"labels", {{std::string(core::kValidatedNodeLabel), ValidatedLabelValue(report)}}}}}};
}

core::Json NcclReadyCondition(const ProbeReport& report, const core::Json& previous,
                              std::chrono::system_clock::time_point now) {
  std::vector<std::string> failed;
  std::vector<std::string> warned;
  for (const CheckResult& result : report.checks) {
    if (result.status == CheckStatus::Fail) failed.push_back(result.id);
    if (result.status == CheckStatus::Warn) warned.push_back(result.id);
  }
  auto join = [](const std::vector<std::string>& ids) {
    std::string text;
    for (const std::string& id : ids) text += (text.empty() ? "" : ", ") + id;
    return text;
  };
  const bool ready = failed.empty();
  const std::string status = ready ? "True" : "False";
  std::string reason =
      ready ? (warned.empty() ? "ChecksPassed" : "ChecksPassedWithWarnings") : "ChecksFailed";
  std::string message = ready ? "ncclguard node checks pass" : "failed: " + join(failed);
  if (!warned.empty()) message += (ready ? "; warnings: " : "; warnings: ") + join(warned);
  message += " (kubectl get nodevalidation " + report.node_name + " -o yaml)";

  const std::string now_text = Rfc3339(now);
  std::string transition = now_text;
  if (previous.is_object() && previous.value("status", "") == status &&
      previous.contains("lastTransitionTime") && previous["lastTransitionTime"].is_string())
    transition = previous["lastTransitionTime"].get<std::string>();
  return core::Json{{"type", core::kNodeReadyCondition},
                    {"status", status},
                    {"reason", reason},
                    {"message", message},
                    {"lastHeartbeatTime", now_text},
                    {"lastTransitionTime", transition}};
}

core::Json NodeConditionPatch(const core::Json& condition) {
  return core::Json{{"status", {{"conditions", core::Json::array({condition})}}}};
}

core::Json FindNodeCondition(const core::Json& node, std::string_view type) {
  if (!node.is_object() || !node.contains("status") || !node["status"].is_object()) return nullptr;
  const core::Json& status = node["status"];
  if (!status.contains("conditions") || !status["conditions"].is_array()) return nullptr;
  for (const core::Json& condition : status["conditions"])
    if (condition.is_object() && condition.value("type", "") == type) return condition;
  return nullptr;
}

}  // namespace ncclguard::probes
