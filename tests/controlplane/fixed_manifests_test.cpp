// What `ncclguard fix` writes must be what the real API server accepts: every pod template of
// every shipped example, fixed, is created as a Pod (and the batch Job as a Job) through
// kube-apiserver's own validation; and a fixed Pod read back with the server's defaults needs
// no further fix.
#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "controlplane_env.h"
#include "core/documents.h"
#include "core/engine.h"
#include "core/workload.h"
#include "test_kube_client.h"

namespace ncclguard::testenv {
namespace {

using core::Json;

std::vector<Json> ExampleDocuments() {
  std::vector<Json> documents;
  for (const auto& entry : std::filesystem::directory_iterator(SourceDir() + "/examples")) {
    std::ifstream in(entry.path());
    std::stringstream text;
    text << in.rdbuf();
    for (Json& doc : core::ParseDocuments(text.str()).documents) {
      if (core::ParseWorkload(doc)) documents.push_back(std::move(doc));
    }
  }
  return documents;
}

std::string Lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return std::tolower(c); });
  return s;
}

// The Pod a training operator would create from a template of the (fixed) workload; a TrainJob's
// templates are in the JobSet made of it (core/trainjob.h), its runtime patch applied.
nlohmann::json PodFrom(const Json& fixed, const core::Workload& workload,
                       const core::PodTemplate& tmpl, const std::string& name) {
  const Json spec = workload.Subject(fixed).at(tmpl.pod_spec);
  return nlohmann::json::parse(Json{
      {"apiVersion", "v1"},
      {"kind", "Pod"},
      {"metadata", {{"name", name}}},
      {"spec", spec}}.dump());
}

class FixedManifests : public ::testing::Test {
 protected:
  void SetUp() override {
    client_ = std::make_unique<TestKubeClient>(ControlPlaneEnvironment::Info());
    namespace_ = CreateTestNamespace(*client_, "fixed");
  }
  std::unique_ptr<TestKubeClient> client_;
  std::string namespace_;
};

TEST_F(FixedManifests, EveryFixedPodTemplateIsAValidPod) {
  const core::Policy policy = core::Policy::Defaults();
  int pods = 0;
  for (const Json& doc : ExampleDocuments()) {
    const core::Evaluation evaluation = core::Evaluate(doc, policy);
    const auto workload = core::ParseWorkload(evaluation.fixed);
    ASSERT_TRUE(workload);
    for (const core::PodTemplate& tmpl : workload->templates) {
      const std::string name = Lower(doc["metadata"]["name"].get<std::string>() + "-" +
                                     (tmpl.role.empty() ? "pod" : tmpl.role) + "-0");
      SCOPED_TRACE(name);
      const KubeResponse created =
          client_->Post("/api/v1/namespaces/" + namespace_ + "/pods?dryRun=All",
                        PodFrom(evaluation.fixed, *workload, tmpl, name));
      EXPECT_EQ(created.status, 201) << created.error << created.body;
      ++pods;
    }
  }
  EXPECT_GE(pods, 8);
}

TEST_F(FixedManifests, FixedBatchJobPassesJobValidation) {
  for (const Json& doc : ExampleDocuments()) {
    if (doc["kind"] != "Job") continue;
    Json fixed = core::Evaluate(doc, core::Policy::Defaults()).fixed;
    fixed["metadata"]["namespace"] = namespace_;
    const KubeResponse created =
        client_->Post("/apis/batch/v1/namespaces/" + namespace_ + "/jobs?dryRun=All",
                      nlohmann::json::parse(fixed.dump()));
    EXPECT_EQ(created.status, 201) << created.error << created.body;
    return;
  }
  FAIL() << "no batch Job in examples/";
}

TEST_F(FixedManifests, AFixedPodWithServerDefaultsNeedsNoFurtherFix) {
  Json pod = Json::parse(R"({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "trainer"},
    "spec": {"nodeSelector": {"node.kubernetes.io/instance-type": "p4d.24xlarge"},
             "containers": [{"name": "pytorch", "image": "registry.example/train:1.0",
                             "resources": {"limits": {"nvidia.com/gpu": 4, "memory": "100Gi"}}}]}})");
  const core::Evaluation first = core::Evaluate(pod, core::Policy::Defaults());
  ASSERT_FALSE(first.patch.empty());
  const KubeResponse created = client_->Post("/api/v1/namespaces/" + namespace_ + "/pods",
                                             nlohmann::json::parse(first.fixed.dump()));
  ASSERT_EQ(created.status, 201) << created.body;

  const Json stored = Json::parse(created.body);
  EXPECT_EQ(stored["spec"]["containers"][0]["resources"]["requests"]["vpc.amazonaws.com/efa"], "2");
  const core::Evaluation again = core::Evaluate(stored, core::Policy::Defaults());
  EXPECT_TRUE(again.patch.empty()) << again.patch.dump();
  EXPECT_FALSE(again.HasDeny());
}

}  // namespace
}  // namespace ncclguard::testenv
