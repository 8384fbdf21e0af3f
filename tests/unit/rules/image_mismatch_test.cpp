#include <gtest/gtest.h>

#include "tests/unit/rules/rule_test_util.h"

namespace ncclguard::test {
namespace {

constexpr const char* kImageMismatchRule = "image-mismatch";

constexpr const char* kMaster = "/spec/pytorchReplicaSpecs/Master/template/spec/containers/0";
constexpr const char* kWorkerImage =
    "/spec/pytorchReplicaSpecs/Worker/template/spec/containers/0/image";

core::Json JobWithWorkerImage(const std::string& image) {
  core::Json job = PyTorchJob(3);
  job[core::JsonPointer(kWorkerImage)] = image;
  return job;
}

TEST(ImageMismatch, DeniesDifferentImagesInMasterAndWorker) {
  const core::Evaluation result = Check(JobWithWorkerImage("train:1.1"));

  const auto findings = FindingsOf(result, kImageMismatchRule);
  ASSERT_EQ(findings.size(), 1u) << Dump(result);
  const core::Finding& f = findings.front();
  EXPECT_EQ(f.level, core::Level::Deny);
  EXPECT_EQ(f.path, kWorkerImage);
  EXPECT_TRUE(
      Mentions(f.message, "replica Worker runs train:1.1 but replica Master runs train:1.0"));
  EXPECT_TRUE(Mentions(f.message, "Use one image everywhere."));
  EXPECT_TRUE(LinksTo(f, "nccl-version"));
  EXPECT_TRUE(result.HasDeny());
}

TEST(ImageMismatch, AcceptsTheSameImageEverywhere) {
  EXPECT_TRUE(FindingsOf(Check(PyTorchJob(3)), kImageMismatchRule).empty());
}

TEST(ImageMismatch, ComparesTheConventionalPytorchContainerOfACpuMaster) {
  core::Json job = JobWithWorkerImage("train:1.0");
  core::Json& master = job[core::JsonPointer(kMaster)];
  master["image"] = "train:0.9";
  master.erase("resources");
  const auto findings = FindingsOf(Check(job), kImageMismatchRule);
  ASSERT_EQ(findings.size(), 1u);
  EXPECT_TRUE(Mentions(findings.front().message,
                       "replica Worker runs train:1.0 but replica Master runs train:0.9"));
}

TEST(ImageMismatch, ComparesTheGpuContainerNotSidecars) {
  core::Json job = PyTorchJob(3);
  job[core::JsonPointer("/spec/pytorchReplicaSpecs/Worker/template/spec/containers")].insert(
      job[core::JsonPointer("/spec/pytorchReplicaSpecs/Worker/template/spec/containers")].begin(),
      core::Json{{"name", "log-agent"}, {"image", "fluent-bit:3.0"}});
  const core::Evaluation result = Check(job);
  EXPECT_TRUE(FindingsOf(result, kImageMismatchRule).empty()) << Dump(result);
}

TEST(ImageMismatch, AllowsAnMpiLauncherWithoutGpusOnAnotherImage) {
  const core::Evaluation result = Check(MpiJob("mpi-launcher:1.0"));
  EXPECT_TRUE(FindingsOf(result, kImageMismatchRule).empty()) << Dump(result);
}

TEST(ImageMismatch, DeniesDifferentImagesAcrossJobSetReplicatedJobs) {
  const core::Evaluation result = Check(Yaml(R"(
apiVersion: jobset.x-k8s.io/v1alpha2
kind: JobSet
metadata: {name: js, namespace: ml}
spec:
  replicatedJobs:
    - name: leader
      template:
        spec:
          template:
            spec:
              containers: [{name: trainer, image: train:1.0, resources: {limits: {nvidia.com/gpu: 8}}}]
    - name: workers
      replicas: 3
      template:
        spec:
          template:
            spec:
              containers: [{name: trainer, image: train:2.0, resources: {limits: {nvidia.com/gpu: 8}}}]
)"));
  const auto findings = FindingsOf(result, kImageMismatchRule);
  ASSERT_EQ(findings.size(), 1u) << Dump(result);
  EXPECT_EQ(findings.front().path,
            "/spec/replicatedJobs/1/template/spec/template/spec/containers/0/image");
  EXPECT_TRUE(Mentions(findings.front().message,
                       "replica workers runs train:2.0 but replica leader runs train:1.0"));
}

TEST(ImageMismatch, NeverFiresForABarePod) {
  EXPECT_TRUE(FindingsOf(Check(CompliantPod()), kImageMismatchRule).empty());
}

}  // namespace
}  // namespace ncclguard::test
