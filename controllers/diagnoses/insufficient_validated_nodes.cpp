#include "controllers/diagnosis.h"
#include "controllers/json_fields.h"

namespace ncclguard::controllers::diagnoses {
namespace {

// Found by the gate (controllers/gate.h) while it holds the job; listed here so that every
// diagnosis in docs/rules.md is one registry entry.
class InsufficientValidatedNodes final : public Diagnosis {
 public:
  InsufficientValidatedNodes()
      : Diagnosis({"insufficient-validated-nodes", "efa-config", 90,
                   "The gate holds the job: fewer nodes of its instance type passed the ncclguard "
                   "probe than it needs.",
                   "The job starts once enough nodes of its instance type pass the ncclguard "
                   "probe: fix or replace the failed nodes, or uncordon validated ones."}) {}

  std::vector<std::string> Find(const DiagnosisContext& context) const override {
    if (context.held == nullptr) return {};
    // The gate's message without its guide link: the Event adds this diagnosis' own.
    std::string message = context.held->message;
    const auto see = message.rfind(" \u2014 see ");
    if (see != std::string::npos) message.resize(see);
    return {"held by the ncclguard gate: " + message};
  }
};

NCCLGUARD_REGISTER(InsufficientValidatedNodes);

}  // namespace
}  // namespace ncclguard::controllers::diagnoses
