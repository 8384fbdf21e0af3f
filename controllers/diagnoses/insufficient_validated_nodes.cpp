#include "controllers/diagnosis.h"
#include "controllers/json_fields.h"

namespace ncclguard::controllers::diagnoses {
namespace {

// Found by the gate (controllers/gate.h) while it holds the job; listed here so that every
// diagnosis in docs/rules.md is one registry entry.
class InsufficientValidatedNodes final : public Diagnosis {
 public:
  InsufficientValidatedNodes()
      : Diagnosis(
            {"insufficient-validated-nodes", kTooFewNodesSlug, 90,
             "The gate holds the job: fewer nodes of its instance type passed the ncclguard "
             "probe than it needs.",
             "The job starts once enough nodes of its instance type pass the ncclguard "
             "probe: fix or replace the failed nodes, or uncordon validated ones.",
             "the section of what holds the job: a failed node check's own, sagemaker-hyperpod "
             "for a node HyperPod marks unhealthy, this one for too few validated nodes"}) {}

  std::vector<std::string> Find(const DiagnosisContext& context) const override {
    if (context.held == nullptr) return {};
    // The gate's message without its trailing link: the Event adds the hold's own (Slug).
    return {"held by the ncclguard gate: " + context.held->held_for};
  }

  // What held the job decides the section (GateVerdict::slug), not this registration.
  std::string_view Slug(const DiagnosisContext& context) const override {
    return context.held != nullptr && !context.held->slug.empty() ? context.held->slug
                                                                  : Info().slug;
  }
};

NCCLGUARD_REGISTER(InsufficientValidatedNodes);

}  // namespace
}  // namespace ncclguard::controllers::diagnoses
