#include <map>
#include <set>

#include "controllers/diagnoses/pod_status.h"
#include "controllers/diagnosis.h"
#include "controllers/json_fields.h"

namespace ncclguard::controllers::diagnoses {
namespace {

// The `observed` value of check `id` in a NodeValidation, "" when absent.
std::string Observed(const Json& validation, std::string_view id) {
  const auto status = validation.find("status");
  if (status == validation.end() || !status->is_object()) return "";
  const auto checks = status->find("checks");
  if (checks == status->end() || !checks->is_array()) return "";
  for (const Json& check : *checks) {
    if (check.is_object() && StringField(check, "id") == id) {
      const auto observed = check.find("observed");
      if (observed != check.end() && observed->is_string()) return observed->get<std::string>();
    }
  }
  return "";
}

class VersionDrift final : public Diagnosis {
 public:
  VersionDrift()
      : Diagnosis({"version-drift", "nccl-version", 50,
                   "The NodeValidations of the job's nodes report different nccl-version or "
                   "driver-version values.",
                   "Run every rank on nodes with the same driver and the same NCCL: drain or "
                   "upgrade the odd nodes, and pin the image."}) {}

  std::vector<std::string> Find(const DiagnosisContext& context) const override {
    std::vector<std::string> lines;
    for (const auto& [check, what] :
         {std::pair{"nccl-version", "NCCL"}, std::pair{"driver-version", "driver"}}) {
      std::map<std::string, std::set<std::string>> nodes_by_version;
      for (const auto& [node, validation] : context.node_validations) {
        const std::string version = Observed(validation, check);
        if (!version.empty()) nodes_by_version[version].insert(node);
      }
      if (nodes_by_version.size() < 2) continue;
      std::string line = std::string("the job's nodes run different ") + what + " versions:";
      bool first = true;
      for (const auto& [version, nodes] : nodes_by_version) {
        line += first ? " " : "; ";
        first = false;
        line += version + " on ";
        std::size_t listed = 0;
        for (const std::string& node : nodes) {
          if (listed == 3) {
            line += " and " + std::to_string(nodes.size() - 3) + " more";
            break;
          }
          line += (listed++ == 0 ? "" : ", ") + node;
        }
      }
      lines.push_back(std::move(line));
    }
    return lines;
  }
};

NCCLGUARD_REGISTER(VersionDrift);

}  // namespace
}  // namespace ncclguard::controllers::diagnoses
