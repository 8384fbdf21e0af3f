// Placement in the admission webhook (core/placement_request.h): a PyTorchJob queued on a flavor
// with a Topology gets Kueue's request on its pod templates at CREATE (and nothing else of the
// job changes), a pod of a job no queue holds gets the pod affinity, audit mode says it would,
// and a lookup that fails asks for nothing.
#include <gtest/gtest.h>

#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "core/placement_request.h"
#include "tests/unit/test_support.h"
#include "webhook/admission_handler.h"

namespace ncclguard::webhook::placement_test {
namespace {

using core::Json;

const std::string kBlockLevel = "topology.k8s.aws/network-node-layer-3";

Json QueuedPyTorchJob() {
  return test::Yaml(R"(
apiVersion: kubeflow.org/v1
kind: PyTorchJob
metadata:
  name: llama
  namespace: team-a
  labels: {kueue.x-k8s.io/queue-name: gpus}
spec:
  pytorchReplicaSpecs:
    Master:
      replicas: 1
      template:
        spec:
          containers: [{name: pytorch, image: train:1, resources: {limits: {nvidia.com/gpu: 8}}}]
    Worker:
      replicas: 3
      template:
        spec:
          containers: [{name: pytorch, image: train:1, resources: {limits: {nvidia.com/gpu: 8}}}]
)");
}

AdmissionRequest Create(Json object, const std::string& kind, const std::string& group) {
  AdmissionRequest request;
  request.uid = "uid-placement";
  request.kind.group = group;
  request.kind.version = group.empty() ? "v1" : "v1";
  request.kind.kind = kind;
  request.operation = "CREATE";
  request.namespace_ = "team-a";
  request.name = object["metadata"].value("name", "");
  request.object = std::move(object);
  return request;
}

struct Asked {
  int calls = 0;
  std::optional<core::PlacementMode> mode;
};

AdmitOptions KueueTopology(Asked& asked) {
  AdmitOptions options;
  options.placement = [&asked](const Json& object, const core::Workload& workload,
                               std::string_view ns,
                               core::PlacementMode mode) -> std::optional<core::PlacementRequest> {
    ++asked.calls;
    asked.mode = mode;
    EXPECT_EQ(ns, "team-a");
    core::PlacementRequest request;
    request.mode = mode;
    if (workload.kind == core::WorkloadKind::Pod) {
      request.job_label = "training.kubeflow.org/job-name";
      request.job_name = object["metadata"]["labels"].value("training.kubeflow.org/job-name", "");
      request.job = "PyTorchJob " + request.job_name;
      request.job_pods = 4;
      return request;
    }
    request.queued_by_kueue = true;
    request.kueue_levels = {"topology.k8s.aws/network-node-layer-1",
                            "topology.k8s.aws/network-node-layer-2", kBlockLevel,
                            "kubernetes.io/hostname"};
    return request;
  };
  return options;
}

// Operations of the patch on a path under `prefix`.
std::vector<Json> OpsUnder(const Json& patch, const std::string& prefix) {
  std::vector<Json> ops;
  if (!patch.is_array()) return ops;
  for (const Json& op : patch) {
    if (op.value("path", "").rfind(prefix, 0) == 0) ops.push_back(op);
  }
  return ops;
}

TEST(AdmissionPlacement, AQueuedJobGetsKueuesTopologyRequestOnEachPodTemplateAtCreate) {
  Asked asked;
  const AdmissionOutcome outcome =
      Admit(Endpoint::Mutate, Create(QueuedPyTorchJob(), "PyTorchJob", "kubeflow.org"),
            core::Policy::Defaults(), KueueTopology(asked));
  EXPECT_EQ(asked.calls, 1);
  EXPECT_EQ(asked.mode, core::PlacementMode::Preferred);
  ASSERT_EQ(outcome.result, AdmitResult::Patched) << outcome.response.patch.dump();
  Json fixed = QueuedPyTorchJob();
  fixed = fixed.patch(outcome.response.patch);
  for (const char* role : {"Master", "Worker"}) {
    const Json& annotations =
        fixed["spec"]["pytorchReplicaSpecs"][role]["template"]["metadata"]["annotations"];
    EXPECT_EQ(annotations["kueue.x-k8s.io/podset-preferred-topology"], kBlockLevel) << role;
    EXPECT_EQ(annotations["kueue.x-k8s.io/podset-group-name"], "ncclguard-ranks") << role;
  }
  // The job's other fixes happen to its pods: the patch touches the templates' metadata alone.
  for (const Json& op : outcome.response.patch) {
    EXPECT_NE(op.value("path", "").find("/template/metadata"), std::string::npos) << op.dump();
  }
}

TEST(AdmissionPlacement, ThePolicysModeIsAskedWithAndRequiredGivesTheRequiredForm) {
  Asked asked;
  core::Policy policy = core::Policy::Defaults();
  policy.placement = core::PlacementMode::Required;
  const AdmissionOutcome outcome =
      Admit(Endpoint::Mutate, Create(QueuedPyTorchJob(), "PyTorchJob", "kubeflow.org"), policy,
            KueueTopology(asked));
  EXPECT_EQ(asked.mode, core::PlacementMode::Required);
  // The request and the group.
  EXPECT_EQ(
      OpsUnder(outcome.response.patch, "/spec/pytorchReplicaSpecs/Worker/template/metadata").size(),
      2u)
      << outcome.response.patch.dump();
  EXPECT_NE(outcome.response.patch.dump().find("podset-required-topology"), std::string::npos);
}

TEST(AdmissionPlacement, APodOfAJobNoQueueHoldsGetsTheAffinityAndAuditModeSaysItWould) {
  Json pod = test::CompliantPod();
  pod["metadata"]["labels"]["training.kubeflow.org/job-name"] = "llama";
  core::Policy policy = core::Policy::Defaults();
  core::ObservedInstanceType p5 = test::ObservedType("p5.48xlarge", 8, 32, 4);
  p5.topology_levels = {"topology.k8s.aws/network-node-layer-1",
                        "topology.k8s.aws/network-node-layer-2", kBlockLevel};
  policy.Learn({p5});
  Asked asked;
  const AdmissionOutcome mutated =
      Admit(Endpoint::Mutate, Create(pod, "Pod", ""), policy, KueueTopology(asked));
  const std::vector<Json> ops = OpsUnder(mutated.response.patch, "/spec/affinity");
  ASSERT_EQ(ops.size(), 1u) << mutated.response.patch.dump();
  EXPECT_EQ(ops[0]["value"]["podAffinity"]["preferredDuringSchedulingIgnoredDuringExecution"][0]
               ["podAffinityTerm"]["topologyKey"],
            kBlockLevel);

  const AdmissionOutcome audited = Admit(Endpoint::Validate, Create(pod, "Pod", ""), policy,
                                         KueueTopology(asked), core::Mode::Audit);
  bool would = false;
  for (const std::string& warning : audited.response.warnings) {
    would = would || (warning.find("would fix") != std::string::npos &&
                      warning.find("topology-placement") != std::string::npos);
  }
  EXPECT_TRUE(would) << (audited.response.warnings.empty() ? "" : audited.response.warnings[0]);
}

TEST(AdmissionPlacement, ALookupThatFailsAsksForNothingAndAdmits) {
  AdmitOptions options;
  options.placement = [](const Json&, const core::Workload&, std::string_view,
                         core::PlacementMode) -> std::optional<core::PlacementRequest> {
    throw std::runtime_error("caches gone");
  };
  const AdmissionOutcome outcome =
      Admit(Endpoint::Mutate, Create(QueuedPyTorchJob(), "PyTorchJob", "kubeflow.org"),
            core::Policy::Defaults(), options);
  EXPECT_TRUE(outcome.response.allowed);
  EXPECT_TRUE(OpsUnder(outcome.response.patch, "/spec/pytorchReplicaSpecs").empty())
      << outcome.response.patch.dump();
}

TEST(AdmissionPlacement, AnUpdateIsNeverAskedAbout) {
  Asked asked;
  AdmissionRequest update = Create(QueuedPyTorchJob(), "PyTorchJob", "kubeflow.org");
  update.operation = "UPDATE";
  update.old_object = QueuedPyTorchJob();
  Admit(Endpoint::Mutate, std::move(update), core::Policy::Defaults(), KueueTopology(asked));
  EXPECT_EQ(asked.calls, 0);
}

}  // namespace
}  // namespace ncclguard::webhook::placement_test
