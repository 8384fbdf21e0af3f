#include <charconv>
#include <set>

#include "core/rules/rule_util.h"

namespace ncclguard::core::rules {
namespace {

class WorldSizeMismatch final : public Rule {
 public:
  WorldSizeMismatch()
      : Rule({"world-size-mismatch", "nccl-timeout", Level::Deny, RuleScope::Job,
              "An explicit WORLD_SIZE differs from the ranks the job starts (its pods, or pods x "
              "processes per pod): rendezvous waits for ranks that never come and times out.",
              "Remove WORLD_SIZE and let the training operator set it, or make it match the "
              "replicas (x nprocPerNode / slotsPerWorker / GPUs per pod)."}) {}

  void CheckJob(const JobContext& ctx, RuleReport& report) const override {
    if (ctx.workload.kind == WorkloadKind::Pod) return;  // one pod cannot see its job's size
    const std::int64_t pods = RankPods(ctx.workload);
    std::set<std::int64_t> accepted{pods};
    std::int64_t gpu_ranks = 0;
    for (const TemplateFacts& facts : ctx.templates) {
      if (!RunsRanks(KindInfoOf(ctx.workload.kind), facts.tmpl->role)) continue;
      std::int64_t gpus = 0;
      for (const Container& c : facts.containers) gpus += c.gpus;
      gpu_ranks += facts.tmpl->pods * gpus;
      if (facts.tmpl->ranks_per_pod > 0) accepted.insert(pods * facts.tmpl->ranks_per_pod);
    }
    if (gpu_ranks > 0) accepted.insert(gpu_ranks);

    for (const TemplateFacts& facts : ctx.templates) {
      ForEachLiteralEnv(
          facts, "WORLD_SIZE",
          [&](const Container& c, const std::string& value, const JsonPointer& path) {
            if (value.find("$(") != std::string::npos) return;
            std::int64_t world = -1;
            auto [ptr, ec] = std::from_chars(value.data(), value.data() + value.size(), world);
            const bool number = ec == std::errc() && ptr == value.data() + value.size();
            if (number && accepted.contains(world)) return;
            std::string expected;
            for (std::int64_t a : accepted)
              expected += (expected.empty() ? "" : " or ") + std::to_string(a);
            report.Add(path, ContainerLabel(c) + ": WORLD_SIZE=\"" + value +
                                 "\" but the job starts " + std::to_string(pods) +
                                 " pod(s), so WORLD_SIZE must be " + expected +
                                 ". Remove WORLD_SIZE (the operator sets it) or fix the replicas.");
          });
    }
  }
};

NCCLGUARD_REGISTER(WorldSizeMismatch);

}  // namespace
}  // namespace ncclguard::core::rules
