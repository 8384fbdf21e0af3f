#include <gtest/gtest.h>

#include "tests/unit/rules/rule_test_util.h"

namespace ncclguard::test {
namespace {

constexpr const char* kAsyncErrorHandlingMissingRule = "async-error-handling-missing";
constexpr const char* kVar = "TORCH_NCCL_ASYNC_ERROR_HANDLING";

core::Json PodWithoutVar() {
  core::Json pod = CompliantPod();
  RemoveEnv(ContainerOf(pod), kVar);
  return pod;
}

// One pod, one GPU, no EFA, no rendezvous variables: not distributed training.
core::Json SingleGpuPod() {
  return Yaml(R"(
apiVersion: v1
kind: Pod
metadata: {name: notebook, namespace: ml}
spec:
  containers:
    - name: jupyter
      image: jupyter:1.0
      resources:
        limits: {nvidia.com/gpu: 1, memory: 16Gi}
      volumeMounts: [{name: dshm, mountPath: /dev/shm}]
  volumes: [{name: dshm, emptyDir: {medium: Memory}}]
)");
}

// A PyTorchJob of two GPU pods without EFA.
core::Json TwoPodJob() {
  return Yaml(R"(
apiVersion: kubeflow.org/v1
kind: PyTorchJob
metadata: {name: small, namespace: ml}
spec:
  pytorchReplicaSpecs:
    Master:
      replicas: 1
      template:
        spec:
          containers:
            - name: pytorch
              image: train:1.0
              resources: {limits: {nvidia.com/gpu: 1}}
    Worker:
      replicas: 1
      template:
        spec:
          containers:
            - name: pytorch
              image: train:1.0
              env: [{name: LOG_LEVEL, value: info}]
              resources: {limits: {nvidia.com/gpu: 1}}
)");
}

TEST(AsyncErrorHandlingMissing, AddsTheVariableToAnEfaContainer) {
  const core::Evaluation result = Check(PodWithoutVar());

  const auto findings = FindingsOf(result, kAsyncErrorHandlingMissingRule);
  ASSERT_EQ(findings.size(), 1u) << Dump(result);
  const core::Finding& f = findings.front();
  EXPECT_EQ(f.level, core::Level::Fix);
  EXPECT_EQ(f.path, "/spec/containers/0/env");
  EXPECT_TRUE(Mentions(
      f.message, "container \"pytorch\" runs distributed training without " + std::string(kVar)));
  EXPECT_TRUE(Mentions(f.message, "Set TORCH_NCCL_ASYNC_ERROR_HANDLING=1."));
  EXPECT_TRUE(LinksTo(f, "nccl-timeout"));

  const core::Json var = {{"name", kVar}, {"value", "1"}};
  EXPECT_EQ(result.patch, core::Json::array({AddOp("/spec/containers/0/env/-", var)}));
  EXPECT_EQ(result.fixed.at(core::JsonPointer("/spec/containers/0/env")).back(), var);
}

TEST(AsyncErrorHandlingMissing, FixIsIdempotent) {
  const core::Evaluation result = Check(PodWithoutVar());
  ASSERT_FALSE(result.patch.empty());
  EXPECT_EQ(RepatchOf(result), core::Json::array());
}

TEST(AsyncErrorHandlingMissing, KeepsAUserValue) {
  const core::Evaluation result = CheckPodEnv(kVar, "0");
  EXPECT_TRUE(FindingsOf(result, kAsyncErrorHandlingMissingRule).empty()) << Dump(result);
  EXPECT_EQ(result.patch, core::Json::array());
}

TEST(AsyncErrorHandlingMissing, RespectsTheDeprecatedName) {
  core::Json pod = PodWithoutVar();
  SetEnv(ContainerOf(pod), "NCCL_ASYNC_ERROR_HANDLING", "1");
  const core::Evaluation result = Check(pod);
  EXPECT_TRUE(FindingsOf(result, kAsyncErrorHandlingMissingRule).empty()) << Dump(result);
  EXPECT_EQ(result.patch, core::Json::array());
  EXPECT_EQ(FindingsOf(result, "nccl-env-deprecated").size(), 1u) << Dump(result);
}

TEST(AsyncErrorHandlingMissing, DoesNotFireForASingleGpuPodWithoutEfa) {
  const core::Evaluation result = Check(SingleGpuPod());
  EXPECT_TRUE(FindingsOf(result, kAsyncErrorHandlingMissingRule).empty()) << Dump(result);
  EXPECT_EQ(result.patch, core::Json::array());
}

TEST(AsyncErrorHandlingMissing, FiresForASingleGpuPodWithRendezvousVariables) {
  for (const char* name : {"MASTER_ADDR", "WORLD_SIZE"}) {
    SCOPED_TRACE(name);
    core::Json pod = SingleGpuPod();
    SetEnv(ContainerOf(pod), name, "2");
    const core::Evaluation result = Check(pod);
    EXPECT_EQ(FindingsOf(result, kAsyncErrorHandlingMissingRule).size(), 1u) << Dump(result);
  }
}

TEST(AsyncErrorHandlingMissing, FixesEveryGpuReplicaOfAMultiPodJob) {
  const core::Evaluation result = Check(TwoPodJob());
  const auto findings = FindingsOf(result, kAsyncErrorHandlingMissingRule);
  ASSERT_EQ(findings.size(), 2u) << Dump(result);
  EXPECT_EQ(findings[0].path, "/spec/pytorchReplicaSpecs/Master/template/spec/containers/0/env");
  EXPECT_EQ(findings[1].path, "/spec/pytorchReplicaSpecs/Worker/template/spec/containers/0/env");

  const core::Json var = {{"name", kVar}, {"value", "1"}};
  const core::Json expected = core::Json::array(
      {AddOp("/spec/pytorchReplicaSpecs/Master/template/spec/containers/0/env",
             core::Json::array({var})),
       AddOp("/spec/pytorchReplicaSpecs/Worker/template/spec/containers/0/env/-", var)});
  core::Json ours = core::Json::array();
  for (const core::Json& op : result.patch) {
    if (op.at("path").get<std::string>().find("/env") != std::string::npos &&
        op.at("value").dump().find(kVar) != std::string::npos) {
      ours.push_back(op);
    }
  }
  EXPECT_EQ(ours, expected) << result.patch.dump();
  EXPECT_EQ(RepatchOf(result), core::Json::array());
}

TEST(AsyncErrorHandlingMissing, LeavesAContainerWithEnvFromAlone) {
  core::Json pod = PodWithoutVar();
  ContainerOf(pod)["envFrom"] = Yaml("list: [{configMapRef: {name: nccl-env}}]")["list"];
  const core::Evaluation result = Check(pod);
  EXPECT_TRUE(FindingsOf(result, kAsyncErrorHandlingMissingRule).empty()) << Dump(result);
  EXPECT_EQ(result.patch, core::Json::array());
}

TEST(AsyncErrorHandlingMissing, LeavesCpuContainersAlone) {
  core::Json pod = CompliantPod();
  AddCpuSidecar(pod);
  EXPECT_TRUE(FindingsOf(Check(pod), kAsyncErrorHandlingMissingRule).empty());
}

TEST(AsyncErrorHandlingMissing, DoesNotFireOnACompliantPod) {
  EXPECT_TRUE(FindingsOf(Check(CompliantPod()), kAsyncErrorHandlingMissingRule).empty());
}

}  // namespace
}  // namespace ncclguard::test
