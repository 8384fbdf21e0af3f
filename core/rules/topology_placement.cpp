#include "core/rules/rule_util.h"
#include "core/topology.h"

namespace ncclguard::core::rules {
namespace {

// The short name of a level for messages: "network-node-layer-3 block", "UltraServer", or the
// label itself for an admin's own Topology.
std::string LevelName(std::string_view level) {
  if (level == kUltraServerLabel) return "UltraServer";
  if (const auto layer = NetworkLayerOf(level)) return NetworkLayerName(*layer) + " block";
  return std::string(level) + " domain";
}

// A managed job's pods asked to land close together in the network, where the in-process webhook
// knows the cluster (the controller's caches): a job Kueue queues on a flavor with a Topology
// gets Kueue's own request on each pod template that has none (a TrainJob in ncclguard's runtime
// patch); a pod of a job no queue holds gets a pod affinity on the closest block among its job's
// pods. The NcclPolicy's spec.placement (or the namespace's ncclguard.io/placement label) says
// preferred, required or off; the user's own request, affinity or spread always wins.
class TopologyPlacementRule final : public Rule {
 public:
  TopologyPlacementRule()
      : Rule({"topology-placement", "advanced-tuning", Level::Fix, RuleScope::Pod,
              "A multi-node job's pods are not asked to share a network block, so the scheduler "
              "may spread them across the fabric's spine, and every all-reduce waits for the "
              "slowest link.",
              "The mutating webhook asks for one block at the closest level the nodes carry: "
              "Kueue's podset-preferred-topology (or -required) for a job queued on a flavor "
              "with a Topology, else a pod affinity among the job's pods; NcclPolicy "
              "spec.placement or the namespace label ncclguard.io/placement chooses preferred, "
              "required or off."}) {}

  void CheckTemplate(const TemplateContext& ctx, RuleReport& report) const override {
    const PlacementRequest* request = ctx.placement;
    if (request == nullptr || request->mode == PlacementMode::Off) return;
    const bool required = request->mode == PlacementMode::Required;
    if (ctx.workload.kind == WorkloadKind::Pod) {
      CheckPod(ctx, *request, required, report);
      return;
    }
    if (!request->queued_by_kueue || request->kueue_levels.empty()) return;
    const KindInfo& kind = KindInfoOf(ctx.workload.kind);
    if (ctx.facts.tmpl == nullptr || !RunsRanks(kind, ctx.facts.tmpl->role)) return;
    const JsonPointer metadata_at = MetadataOf(ctx.facts.tmpl->pod_spec);
    if (HasKueueTopologyRequest(Find(ctx.object, metadata_at))) return;
    const std::int64_t pods = RankPods(ctx.workload);
    if (pods < 2) return;
    // Grouped sets must ask for one level: the type of either is not read.
    const bool grouped = GroupedWithTheOther(ctx, kind);
    const auto level = KueueTopologyLevel(request->kueue_levels,
                                          grouped ? nullptr : ctx.facts.instance_type, pods);
    if (!level) return;
    const std::string_view key =
        required ? kKueueRequiredTopologyAnnotation : kKueuePreferredTopologyAnnotation;
    const JsonPointer annotations = metadata_at / "annotations";
    report.Add(annotations / std::string(key),
               "Kueue asked to place the job's " + std::to_string(pods) + " pods in one " +
                   LevelName(*level) + " (" + std::string(key) + ": " + *level +
                   (grouped ? ", with its other pod set" : "") + ")");
    report.plan().Add(annotations / std::string(key), *level);
    if (grouped) {
      report.plan().Add(annotations / std::string(kKueuePodSetGroupAnnotation),
                        std::string(kPlacementPodSetGroup));
    }
  }

 private:
  static JsonPointer MetadataOf(const JsonPointer& pod_spec) {
    return pod_spec.parent_pointer() / "metadata";
  }

  static const Json* Find(const Json& object, const JsonPointer& at) {
    return object.contains(at) ? &object.at(at) : nullptr;
  }

  // A job of exactly two pod sets that run ranks, one of them a single pod (a PyTorchJob's Master
  // and Workers, a JobSet's leader and workers): Kueue places them together only when both name
  // one group (kueue.x-k8s.io/podset-group-name; Kueue allows groups of exactly two pod sets, one
  // of them of one pod), else rank 0 may land in another block than the rest. Grouped when the
  // other set has no topology request of its user's, or has ncclguard's group.
  static bool GroupedWithTheOther(const TemplateContext& ctx, const KindInfo& kind) {
    const PodTemplate* other = nullptr;
    int rank_sets = 0;
    bool single = false;
    for (const PodTemplate& tmpl : ctx.workload.templates) {
      if (!RunsRanks(kind, tmpl.role)) continue;
      ++rank_sets;
      single = single || tmpl.pods == 1;
      if (&tmpl != ctx.facts.tmpl) other = &tmpl;
    }
    if (rank_sets != 2 || !single || other == nullptr) return false;
    const Json* metadata = Find(ctx.object, MetadataOf(other->pod_spec));
    if (!HasKueueTopologyRequest(metadata)) return true;
    const Json& group =
        metadata->at("annotations").value(std::string(kKueuePodSetGroupAnnotation), Json());
    return group == std::string(kPlacementPodSetGroup);
  }

  static void CheckPod(const TemplateContext& ctx, const PlacementRequest& request, bool required,
                       RuleReport& report) {
    if (request.queued_by_kueue || request.job_label.empty() || request.job_name.empty()) return;
    if (request.job_pods < 2 || ctx.facts.spec == nullptr || HasOwnPlacement(*ctx.facts.spec)) {
      return;
    }
    const auto level = AffinityTopologyLevel(ctx.policy, ctx.facts.instance_type, request.job_pods);
    if (!level) return;
    Json term = JobAffinityTerm(request.job_label, request.job_name, *level);
    const JsonPointer at = ctx.facts.pod_spec / "affinity" / "podAffinity";
    report.Add(at, std::string(required ? "required" : "preferred") + " pod affinity with the " +
                       std::to_string(request.job_pods) + " pods of " + request.job + " in one " +
                       LevelName(*level) + " (topologyKey " + *level + ")");
    if (required) {
      report.plan().Append(at / "requiredDuringSchedulingIgnoredDuringExecution", std::move(term));
    } else {
      report.plan().Append(at / "preferredDuringSchedulingIgnoredDuringExecution",
                           Json{{"weight", 100}, {"podAffinityTerm", std::move(term)}});
    }
  }
};

NCCLGUARD_REGISTER(TopologyPlacementRule);

}  // namespace
}  // namespace ncclguard::core::rules
