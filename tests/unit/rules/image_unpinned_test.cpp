#include <gtest/gtest.h>

#include "tests/unit/rules/rule_test_util.h"

namespace ncclguard::test {
namespace {

constexpr const char* kImageUnpinnedRule = "image-unpinned";

core::Evaluation CheckImage(const std::string& image,
                            const core::Policy& policy = core::Policy::Defaults()) {
  core::Json pod = CompliantPod();
  ContainerOf(pod)["image"] = image;
  return Check(pod, policy);
}

TEST(ImageUnpinned, WarnsForAnImageWithoutATag) {
  const core::Evaluation result = CheckImage("img");

  const auto findings = FindingsOf(result, kImageUnpinnedRule);
  ASSERT_EQ(findings.size(), 1u) << Dump(result);
  const core::Finding& f = findings.front();
  EXPECT_EQ(f.level, core::Level::Warn);
  EXPECT_EQ(f.path, "/spec/containers/0/image");
  EXPECT_TRUE(Mentions(f.message, "container \"pytorch\" image \"img\" has no tag"));
  EXPECT_TRUE(Mentions(f.message, "Pin it by digest or a version tag."));
  EXPECT_TRUE(LinksTo(f, "nccl-version"));
  EXPECT_FALSE(result.HasDeny());
}

TEST(ImageUnpinned, WarnsForLatest) {
  const auto findings = FindingsOf(CheckImage("img:latest"), kImageUnpinnedRule);
  ASSERT_EQ(findings.size(), 1u);
  EXPECT_TRUE(Mentions(findings.front().message, "image \"img:latest\" uses :latest"));
}

TEST(ImageUnpinned, WarnsForARegistryPortWithoutATag) {
  const auto findings = FindingsOf(CheckImage("registry:5000/img"), kImageUnpinnedRule);
  ASSERT_EQ(findings.size(), 1u);
  EXPECT_TRUE(Mentions(findings.front().message, "image \"registry:5000/img\" has no tag"));
}

TEST(ImageUnpinned, AcceptsVersionTagsAndDigests) {
  for (const char* image :
       {"img:1.2", "registry:5000/img:1.2", "nvcr.io/nvidia/pytorch:24.05-py3",
        "img@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef",
        "img:latest@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"}) {
    const core::Evaluation result = CheckImage(image);
    EXPECT_TRUE(FindingsOf(result, kImageUnpinnedRule).empty()) << image << "\n" << Dump(result);
  }
}

TEST(ImageUnpinned, DoesNotFireOnACompliantPod) {
  EXPECT_TRUE(FindingsOf(Check(CompliantPod()), kImageUnpinnedRule).empty());
}

TEST(ImageUnpinned, IsSilencedWhenThePolicyDisablesIt) {
  const core::Policy policy = core::ParsePolicy("rules: {image-unpinned: {enabled: false}}");
  const core::Evaluation result = CheckImage("img:latest", policy);
  EXPECT_TRUE(FindingsOf(result, kImageUnpinnedRule).empty()) << Dump(result);
  EXPECT_FALSE(result.HasDeny());
}

TEST(ImageUnpinned, DeniesWhenThePolicyRaisesItToDeny) {
  const core::Policy policy = core::ParsePolicy("rules: {image-unpinned: {level: deny}}");
  const core::Evaluation result = CheckImage("img:latest", policy);
  const auto findings = FindingsOf(result, kImageUnpinnedRule);
  ASSERT_EQ(findings.size(), 1u);
  EXPECT_EQ(findings.front().level, core::Level::Deny);
  EXPECT_TRUE(result.HasDeny());
}

}  // namespace
}  // namespace ncclguard::test
