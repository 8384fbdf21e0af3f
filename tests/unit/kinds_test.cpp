// The kind table (core/kinds.h) drives the workload model, the gate, rendezvous naming and the
// pod-to-job mapping. These tests build a minimal job of every managed kind from its entry's own
// pointers and check that each reader agrees with the entry, so a new kind is tested by adding
// its entry; the pinned names below keep today's kinds byte-identical.
#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <string>
#include <vector>

#include "controllers/training_job_reconciler.h"
#include "core/contract.h"
#include "core/gate.h"
#include "core/kinds.h"
#include "core/rendezvous.h"
#include "core/rules/rule_util.h"
#include "core/workload.h"
#include "tests/unit/test_support.h"

namespace ncclguard::test {
namespace {

using core::Json;
using core::JsonPointer;
using core::KindInfo;
using core::TemplateLayout;

constexpr std::int64_t kReplicas = 2;
constexpr std::int64_t kRanksPerPod = 4;

JsonPointer Pointer(std::string_view text) { return JsonPointer(std::string(text)); }

std::string Lower(std::string_view text) {
  std::string lower(text);
  std::transform(lower.begin(), lower.end(), lower.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return lower;
}

Json PodTemplate(const std::string& container, const std::string& image, int gpus) {
  Json c{{"name", container}, {"image", image}};
  if (gpus > 0) c["resources"]["limits"]["nvidia.com/gpu"] = gpus;
  return Json{{"spec", {{"containers", Json::array({c})}}}};
}

// The roles a minimal job of the kind declares: the replica types its rank-0 pod may be named
// after (all of them), else one made-up role for a layout that names its templates.
std::vector<std::string> RolesOf(const KindInfo& info) {
  std::vector<std::string> roles;
  for (std::string_view role : info.rank_zero.roles) {
    if (!role.empty()) roles.emplace_back(role);
  }
  if (!roles.empty()) return roles;
  switch (info.layout) {
    case TemplateLayout::ReplicaSpecs:
      return {"Worker"};
    case TemplateLayout::ReplicatedJobs:
    case TemplateLayout::ReplicaSpecList:
      return {"workers", "evaluators"};
    case TemplateLayout::PodSpec:
    case TemplateLayout::JobTemplate:
    case TemplateLayout::TrainerRuntime:
      break;
  }
  return {""};
}

// A job of the kind named team-a/train with kReplicas pods per role, built only from the entry's
// pointers (and the layout's shape).
Json MinimalJob(const KindInfo& info, const std::vector<std::string>& roles,
                const std::string& container = "trainer", const std::string& image = "img:1",
                int gpus = 8) {
  Json job{{"apiVersion", info.api_version},
           {"kind", info.kind_name},
           {"metadata", {{"name", "train"}, {"namespace", "team-a"}}},
           {"spec", Json::object()}};
  const JsonPointer templates = Pointer(info.templates);
  if (info.layout == TemplateLayout::TrainerRuntime) {
    // No runtime known: the Trainer's job "node" of spec.trainer alone (trainjob_test.cpp has
    // runtimes); the container is always "node".
    job["spec"]["runtimeRef"]["name"] = "torch-distributed";
    job["spec"]["trainer"] = Json{{"image", image}, {"numNodes", kReplicas}};
    if (gpus > 0) job["spec"]["trainer"]["resourcesPerNode"]["limits"]["nvidia.com/gpu"] = gpus;
    if (!info.ranks_per_pod.empty()) job[Pointer(info.ranks_per_pod)] = kRanksPerPod;
    return job;
  }
  for (std::size_t i = 0; i < roles.size(); ++i) {
    // Each role its own image when asked for two (image-mismatch).
    const std::string role_image = i == 0 ? image : image + "-" + roles[i];
    const Json pod = PodTemplate(container, role_image, gpus);
    switch (info.layout) {
      case TemplateLayout::JobTemplate:
        job[templates] = pod;
        job["spec"]["parallelism"] = kReplicas;
        break;
      case TemplateLayout::ReplicaSpecs:
        job[templates / roles[i]] = Json{{"replicas", kReplicas}, {"template", pod}};
        break;
      case TemplateLayout::ReplicatedJobs:
        job[templates / i] =
            Json{{"name", roles[i]},
                 {"replicas", kReplicas},
                 {"template", {{"spec", {{"parallelism", 1}, {"template", pod}}}}}};
        break;
      case TemplateLayout::ReplicaSpecList:
        job[templates / i] = Json{{"name", roles[i]}, {"replicas", kReplicas}, {"template", pod}};
        break;
      case TemplateLayout::PodSpec:
      case TemplateLayout::TrainerRuntime:
        ADD_FAILURE() << "a job kind with a Pod's layout";
        break;
    }
  }
  if (!info.ranks_per_pod.empty()) job[Pointer(info.ranks_per_pod)] = kRanksPerPod;
  if (!info.opt_in_label.empty())
    job["metadata"]["labels"][std::string(info.opt_in_label)] = "true";
  return job;
}

Json PodOf(const KindInfo& info, const Json& owners) {
  return Json{{"apiVersion", "v1"},
              {"kind", "Pod"},
              {"metadata",
               {{"name", "train-0"},
                {"namespace", "team-a"},
                {"labels", {{std::string(info.pod_job_label), "train"}}},
                {"ownerReferences", owners}}}};
}

std::vector<const KindInfo*> SharingPodLabel(const KindInfo& info) {
  std::vector<const KindInfo*> kinds;
  for (const KindInfo& other : core::ManagedKinds()) {
    if (other.pod_job_label == info.pod_job_label) kinds.push_back(&other);
  }
  return kinds;
}

TEST(KindTable, EveryManagedKindDeclaresWhatItsReadersNeed) {
  ASSERT_FALSE(core::ManagedKinds().empty());
  for (const KindInfo& info : core::ManagedKinds()) {
    SCOPED_TRACE(info.kind_name);
    EXPECT_TRUE(info.job);
    EXPECT_EQ(&core::KindInfoOf(info.kind), &info);
    EXPECT_EQ(core::KindOf(info.api_version, info.kind_name), info.kind);
    EXPECT_NE(info.api_version.find('/'), std::string_view::npos) << "a job kind has a group";
    EXPECT_FALSE(info.resource.empty());
    EXPECT_FALSE(info.templates.empty());
    // No suspend field: the gate holds the kind's pods, which it finds by their label.
    EXPECT_EQ(info.suspend_field.empty(), core::PodGated(info));
    EXPECT_FALSE(info.pod_job_label.empty());
    EXPECT_NE(info.condition_style, core::ConditionStyle::None);
    // No rank-0 pod name only for a kind whose operator does the rendezvous without ncclguard.
    if (info.rank_zero.index.empty()) {
      EXPECT_FALSE(info.ncclguard_makes_service || info.ncclguard_sets_pod_subdomain);
      EXPECT_TRUE(info.rank_zero.role_at.empty() && info.rank_zero.roles.front().empty());
    }
    EXPECT_TRUE(info.rank_zero.role_at.empty() || info.rank_zero.roles.front().empty())
        << "rank 0's role is named by the job or by the kind, not both";
    const auto sharing = SharingPodLabel(info);
    EXPECT_LE(std::count_if(sharing.begin(), sharing.end(),
                            [](const KindInfo* k) { return k->pod_label_fallback; }),
              1)
        << "kinds sharing " << info.pod_job_label << " have one fallback at most";
  }
  EXPECT_FALSE(core::KindInfoOf(core::WorkloadKind::Pod).job);
}

TEST(KindTable, TheWorkloadModelFindsEachKindsTemplatesAndRanks) {
  for (const KindInfo& info : core::ManagedKinds()) {
    SCOPED_TRACE(info.kind_name);
    const auto roles = RolesOf(info);
    const Json job = MinimalJob(info, roles);
    EXPECT_EQ(core::ManagedKindOf(job), info.kind);
    const auto workload = core::ParseWorkload(job);
    ASSERT_TRUE(workload);
    EXPECT_EQ(workload->kind, info.kind);
    ASSERT_EQ(workload->templates.size(), roles.size());
    for (std::size_t i = 0; i < roles.size(); ++i) {
      const core::PodTemplate& tmpl = workload->templates[i];
      EXPECT_EQ(tmpl.role, roles[i]);
      EXPECT_EQ(tmpl.pods, kReplicas);
      EXPECT_EQ(tmpl.ranks_per_pod, info.ranks_per_pod.empty() ? 0 : kRanksPerPod);
      const Json& subject = workload->Subject(job);
      ASSERT_TRUE(subject.contains(tmpl.pod_spec)) << tmpl.pod_spec.to_string();
      EXPECT_TRUE(subject.at(tmpl.pod_spec).contains("containers"));
    }
    EXPECT_EQ(core::RankPods(*workload), kReplicas * static_cast<std::int64_t>(roles.size()));
  }
}

TEST(KindTable, RanklessRolesAreLeftOutOfTheWorldSize) {
  for (const KindInfo& info : core::ManagedKinds()) {
    for (std::string_view rankless : info.rankless_roles) {
      // A TrainJob's roles are its runtime's: trainjob_test.cpp.
      if (rankless.empty() || info.layout == TemplateLayout::TrainerRuntime) continue;
      SCOPED_TRACE(std::string(info.kind_name) + " " + std::string(rankless));
      auto roles = RolesOf(info);
      const auto counted = core::ParseWorkload(MinimalJob(info, roles));
      roles.emplace_back(rankless);
      const auto workload = core::ParseWorkload(MinimalJob(info, roles));
      ASSERT_TRUE(counted && workload);
      EXPECT_EQ(workload->templates.size(), roles.size());
      EXPECT_EQ(core::RankPods(*workload), core::RankPods(*counted));
      EXPECT_FALSE(core::RunsRanks(info, rankless));
    }
    EXPECT_TRUE(core::RunsRanks(info, ""));
  }
}

TEST(KindTable, TheConventionalTrainingContainerIsComparedAcrossRoles) {
  for (const KindInfo& info : core::ManagedKinds()) {
    const auto roles = RolesOf(info);
    if (info.training_container.empty() || roles.size() < 2) continue;
    SCOPED_TRACE(info.kind_name);
    // No GPUs: only the conventional name makes the containers the training containers.
    const Json job = MinimalJob(info, roles, std::string(info.training_container), "img:1", 0);
    EXPECT_FALSE(FindingsOf(Check(job), "image-mismatch").empty());
    const Json other = MinimalJob(info, roles, "sidecar", "img:1", 0);
    EXPECT_TRUE(FindingsOf(Check(other), "image-mismatch").empty());
  }
}

TEST(KindTable, TheGateManagesAndSuspendsEachKindWhereItsEntrySays) {
  for (const KindInfo& info : core::ManagedKinds()) {
    SCOPED_TRACE(info.kind_name);
    Json job = MinimalJob(info, RolesOf(info));
    EXPECT_TRUE(core::IsManagedJob(job, info.kind));
    if (!info.opt_in_label.empty()) {
      job["metadata"]["labels"][std::string(info.opt_in_label)] = "false";
      EXPECT_FALSE(core::IsManagedJob(job, info.kind));
      job["metadata"].erase("labels");
      EXPECT_FALSE(core::IsManagedJob(job, info.kind));
    }
    EXPECT_EQ(core::SuspendPointer(info.kind).to_string(), info.suspend_field);
    if (core::PodGated(info)) {
      // Only marked: its pods carry the scheduling gate, added by the webhook to each pod.
      const Json held = job.patch(core::GateMarkPatch(job, info.kind));
      EXPECT_EQ(held.at("metadata").at("annotations").at(std::string(core::kGateAnnotation)),
                std::string(core::kGatePending));
      EXPECT_EQ(held.at("spec"), job.at("spec"));
      Json pod = CompliantPod();
      pod["metadata"]["labels"][std::string(info.pod_job_label)] = "train";
      EXPECT_EQ(core::PodGatedJobOf(pod), info.kind);
      const Json gated = pod.patch(core::PodSchedulingGatePatch(pod));
      EXPECT_TRUE(core::HasSchedulingGate(gated, core::kSchedulingGate));
      continue;
    }
    for (const bool already_there : {false, true}) {
      if (already_there) job[Pointer(info.suspend_field)] = false;
      const Json held = job.patch(core::GateMarkPatch(job, info.kind));
      EXPECT_EQ(held.at(Pointer(info.suspend_field)), true);
      EXPECT_EQ(held.at("metadata").at("annotations").at(std::string(core::kGateAnnotation)),
                std::string(core::kGatePending));
      EXPECT_EQ(core::ParseWorkload(held)->templates.size(),
                core::ParseWorkload(job)->templates.size());
    }
  }
  EXPECT_FALSE(core::IsManagedJob(CompliantPod(), core::WorkloadKind::Pod));
}

TEST(KindTable, RendezvousNamesFollowEachKindsEntry) {
  for (const KindInfo& info : core::ManagedKinds()) {
    SCOPED_TRACE(info.kind_name);
    auto roles = RolesOf(info);
    Json job = MinimalJob(info, roles);
    EXPECT_EQ(core::RendezvousServiceName(job), "train");

    // The role in rank 0's hostname: read from the job, or the first declared preferred role.
    std::string role;
    if (!info.rank_zero.role_at.empty()) {
      ASSERT_TRUE(job.contains(Pointer(info.rank_zero.role_at)));
      role = job.at(Pointer(info.rank_zero.role_at)).get<std::string>();
      EXPECT_EQ(role, roles.front());
    } else if (!info.rank_zero.roles.front().empty()) {
      role = Lower(roles.front());
    }
    if (info.rank_zero.index.empty()) {
      EXPECT_FALSE(core::RankZeroHostname(job)) << "the operator's rendezvous names no pod";
      EXPECT_FALSE(core::MasterAddress(job, "cluster.local"));
      continue;
    }
    const std::string host =
        "train" + (role.empty() ? "" : "-" + role) + std::string(info.rank_zero.index);
    EXPECT_EQ(core::RankZeroHostname(job), host);
    EXPECT_EQ(core::MasterAddress(job, "cluster.local"), host + ".train.team-a.svc.cluster.local");

    if (!info.rank_zero.roles.front().empty() && roles.size() > 1) {
      // Without its first choice, rank 0 is the next role's pod.
      job[Pointer(info.templates)].erase(roles.front());
      EXPECT_EQ(core::RankZeroHostname(job),
                "train-" + Lower(roles[1]) + std::string(info.rank_zero.index));
    }
    if (!info.service_name_field.empty()) {
      job[Pointer(info.service_name_field)] = "net";
      EXPECT_EQ(core::RendezvousServiceName(job), "net");
      EXPECT_EQ(core::MasterAddress(job, "cluster.local")->find(".net.team-a.svc."),
                core::RankZeroHostname(job)->size());
    }
  }
}

TEST(KindTable, PodsMapToTheirJobByLabelAndOwner) {
  for (const KindInfo& info : core::ManagedKinds()) {
    SCOPED_TRACE(info.kind_name);
    const controllers::JobKey key{info.kind, "team-a", "train"};
    const auto owned = controllers::JobKeysForPod(
        PodOf(info, Json::array({Json{{"kind", info.kind_name}, {"controller", true}}})));
    EXPECT_EQ(owned, std::vector<controllers::JobKey>{key});

    // Without an owner: the label's only kind, or the fallback among kinds sharing it, or where
    // they have none, each of them (the reconcile of the one without such a job does nothing).
    const auto sharing = SharingPodLabel(info);
    const bool any_fallback = std::any_of(sharing.begin(), sharing.end(),
                                          [](const KindInfo* k) { return k->pod_label_fallback; });
    const auto orphan = controllers::JobKeysForPod(PodOf(info, Json::array()));
    ASSERT_EQ(orphan.size(), any_fallback ? 1u : sharing.size());
    const bool expected = sharing.size() == 1 || info.pod_label_fallback || !any_fallback;
    EXPECT_EQ(std::find(orphan.begin(), orphan.end(), key) != orphan.end(), expected);
  }
}

TEST(KindTable, TheWebhookSetsTheSubdomainOfPodsItsEntrySays) {
  for (const KindInfo& info : core::ManagedKinds()) {
    SCOPED_TRACE(info.kind_name);
    Json pod = CompliantPod();
    pod["metadata"]["name"] = "train-worker-0";
    pod["metadata"]["labels"][std::string(info.pod_job_label)] = "train";
    const auto sharing = SharingPodLabel(info);
    const bool fixed = std::any_of(sharing.begin(), sharing.end(), [](const KindInfo* k) {
      return k->ncclguard_sets_pod_subdomain;
    });
    const auto evaluation = Check(pod);
    EXPECT_EQ(FindingsOf(evaluation, "rendezvous-dns-missing").empty(), !fixed);
    if (fixed) {
      EXPECT_EQ(evaluation.fixed.at("spec").value("subdomain", ""), "train");
    }
  }
}

// Today's kinds, pinned: the names their operators give, byte for byte.
TEST(KindTable, RankZeroHostnamesAreTheOperatorsNames) {
  const auto host = [](const std::string& yaml) { return core::RankZeroHostname(Yaml(yaml)); };
  EXPECT_EQ(host("apiVersion: kubeflow.org/v1\nkind: PyTorchJob\nmetadata: {name: p}\n"
                 "spec: {pytorchReplicaSpecs: {Master: {template: {spec: {}}}, "
                 "Worker: {template: {spec: {}}}}}"),
            "p-master-0");
  EXPECT_EQ(host("apiVersion: kubeflow.org/v1\nkind: PyTorchJob\nmetadata: {name: p}\n"
                 "spec: {pytorchReplicaSpecs: {Worker: {template: {spec: {}}}}}"),
            "p-worker-0");
  EXPECT_EQ(host("apiVersion: kubeflow.org/v1\nkind: PyTorchJob\nmetadata: {name: p}\n"),
            "p-worker-0");
  EXPECT_EQ(host("apiVersion: kubeflow.org/v2beta1\nkind: MPIJob\nmetadata: {name: m}\n"
                 "spec: {mpiReplicaSpecs: {Launcher: {template: {spec: {}}}}}"),
            "m-worker-0");
  EXPECT_EQ(host("apiVersion: jobset.x-k8s.io/v1alpha2\nkind: JobSet\nmetadata: {name: js}\n"
                 "spec: {replicatedJobs: [{name: Head}, {name: w}]}"),
            "js-Head-0-0");
  EXPECT_FALSE(
      host("apiVersion: jobset.x-k8s.io/v1alpha2\nkind: JobSet\nmetadata: {name: js}\n"
           "spec: {replicatedJobs: []}"));
  EXPECT_EQ(host("apiVersion: batch/v1\nkind: Job\nmetadata: {name: b}\nspec: {}"), "b-0");
  // HyperPod's agent gets rank 0's address from the operator: no hostname to name.
  EXPECT_FALSE(
      host("apiVersion: sagemaker.amazonaws.com/v1\nkind: HyperPodPyTorchJob\n"
           "metadata: {name: h}\nspec: {replicaSpecs: [{name: pods}]}"));
  EXPECT_FALSE(host("apiVersion: v1\nkind: Pod\nmetadata: {name: x}\nspec: {}"));
  EXPECT_FALSE(host("apiVersion: batch/v1\nkind: Job\nspec: {}"));
}

}  // namespace
}  // namespace ncclguard::test
