// The pure parts the informer is built from: keys, projections, index functions.
#include <gtest/gtest.h>

#include "kube/informer.h"

namespace ncclguard::kube {
namespace {

core::Json Pod() {
  return core::Json::parse(R"({
    "apiVersion": "v1", "kind": "Pod",
    "metadata": {"name": "w-0", "namespace": "ml", "uid": "u1", "resourceVersion": "9",
                 "labels": {"training.kubeflow.org/job-name": "train"},
                 "ownerReferences": [{"uid": "job-uid", "kind": "PyTorchJob", "name": "train"}],
                 "managedFields": [{"manager": "kubectl"}]},
    "spec": {"nodeName": "n1", "containers": [{"name": "c", "image": "i"}]},
    "status": {"phase": "Running"}})");
}

TEST(InformerHelpers, KeysAreNamespaceSlashName) {
  EXPECT_EQ(ObjectKey(Pod()), "ml/w-0");
  EXPECT_EQ(ObjectKey(core::Json{{"metadata", {{"name", "node-1"}}}}), "node-1");
  EXPECT_EQ(ObjectKey(core::Json::object()), "");
  EXPECT_EQ(ResourceVersionOf(Pod()), "9");
}

TEST(InformerHelpers, KeepFieldsKeepsOnlyWhatIsAsked) {
  Projection project =
      KeepFields({"/spec/nodeName", "/status/phase", "/metadata/labels", "/spec/missing"});
  core::Json kept = project(Pod());
  EXPECT_EQ(kept["spec"], (core::Json{{"nodeName", "n1"}}));
  EXPECT_EQ(kept["status"]["phase"], "Running");
  EXPECT_FALSE(kept["metadata"].contains("managedFields"));
  EXPECT_LT(kept.dump().size(), Pod().dump().size());
}

TEST(InformerHelpers, IndexesByLabelAndOwner) {
  EXPECT_EQ(IndexByLabel("training.kubeflow.org/job-name")(Pod()),
            std::vector<std::string>{"train"});
  EXPECT_TRUE(IndexByLabel("absent")(Pod()).empty());
  EXPECT_EQ(IndexByOwnerUid()(Pod()), std::vector<std::string>{"job-uid"});
  core::Json odd = {{"metadata", {{"labels", "not a map"}, {"ownerReferences", {1, 2}}}}};
  EXPECT_TRUE(IndexByLabel("x")(odd).empty());
  EXPECT_TRUE(IndexByOwnerUid()(odd).empty());
}

}  // namespace
}  // namespace ncclguard::kube
