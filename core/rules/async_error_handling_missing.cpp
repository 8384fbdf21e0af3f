#include "core/rules/rule_util.h"

namespace ncclguard::core::rules {
namespace {

class AsyncErrorHandlingMissing final : public Rule {
 public:
  AsyncErrorHandlingMissing()
      : Rule({"async-error-handling-missing", "nccl-timeout", Level::Fix, RuleScope::Pod,
              "A distributed training container (a GPU container of a multi-pod job, an EFA "
              "container, or one with MASTER_ADDR/WORLD_SIZE) lacks "
              "TORCH_NCCL_ASYNC_ERROR_HANDLING, "
              "so a failed collective can hang until the job's deadline instead of failing fast.",
              "Set TORCH_NCCL_ASYNC_ERROR_HANDLING=1 so the NCCL watchdog tears the process down "
              "and the job restarts; the mutating webhook adds it."}) {}

  void CheckTemplate(const TemplateContext& ctx, RuleReport& report) const override {
    for (const Container& c : ctx.facts.containers) {
      if (!DistributedTrainingContainer(ctx, c)) continue;
      // The deprecated name is still honoured by PyTorch: a user value we must not shadow.
      if (c.Env("TORCH_NCCL_ASYNC_ERROR_HANDLING") || c.Env("NCCL_ASYNC_ERROR_HANDLING")) continue;
      report.Add(c.at / "env",
                 ContainerLabel(c) +
                     " runs distributed training without TORCH_NCCL_ASYNC_ERROR_HANDLING: "
                     "a failed collective may hang instead of failing. Set "
                     "TORCH_NCCL_ASYNC_ERROR_HANDLING=1.");
      report.plan().Append(c.at / "env",
                           Json{{"name", "TORCH_NCCL_ASYNC_ERROR_HANDLING"}, {"value", "1"}});
    }
  }
};

NCCLGUARD_REGISTER(AsyncErrorHandlingMissing);

}  // namespace
}  // namespace ncclguard::core::rules
