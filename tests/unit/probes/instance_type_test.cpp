// Where the probe learns the node's instance type: flag, file (plain or the EC2 identity
// document), DMI product name on EC2; a source the admin names but that is unusable is an error.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "probes/instance_type.h"
#include "tests/unit/probes/probe_test_support.h"

namespace ncclguard::test {
namespace {

std::string WriteTemp(const std::string& name, const std::string& content) {
  const auto path = std::filesystem::temp_directory_path() /
                    ("ncclguard-instance-" + std::to_string(getpid()) + "-" + name);
  std::ofstream(path) << content;
  return path.string();
}

const probes::HostFiles kNoHost{"/nonexistent"};

TEST(InstanceType, FlagWins) {
  const auto resolved = probes::ResolveInstanceType("p4d.24xlarge", std::nullopt,
                                                    probes::HostFiles(FixturePath("p5-32efa")));
  EXPECT_EQ(resolved.name, "p4d.24xlarge");
  EXPECT_EQ(resolved.source, "--instance-type");
}

TEST(InstanceType, FileWithTheTypeOrTheIdentityDocument) {
  const auto plain = WriteTemp("plain", "p5en.48xlarge\n");
  EXPECT_EQ(probes::ResolveInstanceType(std::nullopt, plain, kNoHost).name, "p5en.48xlarge");
  const auto document = WriteTemp("doc", R"({"region":"us-east-1","instanceType":"p5e.48xlarge"})");
  const auto resolved = probes::ResolveInstanceType(std::nullopt, document, kNoHost);
  EXPECT_EQ(resolved.name, "p5e.48xlarge");
  EXPECT_EQ(resolved.source, document);
  std::filesystem::remove(plain);
  std::filesystem::remove(document);
}

TEST(InstanceType, UnusableNamedSourcesAreErrors) {
  EXPECT_THROW(probes::ResolveInstanceType("not an instance", std::nullopt, kNoHost),
               std::runtime_error);
  EXPECT_THROW(probes::ResolveInstanceType(std::nullopt, "/nonexistent/type", kNoHost),
               std::runtime_error);
  const auto bad_json = WriteTemp("bad", R"({"instanceType": 5)");
  EXPECT_THROW(probes::ResolveInstanceType(std::nullopt, bad_json, kNoHost), std::runtime_error);
  const auto garbage = WriteTemp("garbage", std::string("\0\xff\x01", 3));
  EXPECT_THROW(probes::ResolveInstanceType(std::nullopt, garbage, kNoHost), std::runtime_error);
  std::filesystem::remove(bad_json);
  std::filesystem::remove(garbage);
}

TEST(InstanceType, DmiProductNameOnEc2) {
  const auto resolved = probes::ResolveInstanceType(std::nullopt, std::nullopt,
                                                    probes::HostFiles(FixturePath("p5-32efa")));
  EXPECT_EQ(resolved.name, "p5.48xlarge");
  EXPECT_EQ(resolved.source, "DMI product name");
}

TEST(InstanceType, NonEc2OrGarbageDmiLeavesItUnknown) {
  const auto resolved = probes::ResolveInstanceType(std::nullopt, std::nullopt,
                                                    probes::HostFiles(FixturePath("garbage")));
  EXPECT_EQ(resolved.name, std::nullopt);
  EXPECT_FALSE(resolved.source.empty());
}

TEST(InstanceType, NodeLabelGivesTheTypeOrSaysWhyNot) {
  const auto labelled = probes::InstanceTypeFromNode(core::Json::parse(
      R"({"metadata": {"name": "n1", "labels": {"node.kubernetes.io/instance-type": "p5.48xlarge"}}})"));
  EXPECT_EQ(labelled.name, "p5.48xlarge");
  EXPECT_EQ(labelled.source, "Node label node.kubernetes.io/instance-type");

  const auto unlabelled = probes::InstanceTypeFromNode(
      core::Json::parse(R"({"metadata": {"name": "n1", "labels": {"other": "x"}}})"));
  EXPECT_EQ(unlabelled.name, std::nullopt);
  EXPECT_EQ(unlabelled.source, "Node label node.kubernetes.io/instance-type: not set");

  // A value that is no instance type name (a typo, a number) is reported, not used.
  for (const char* node :
       {R"({"metadata": {"labels": {"node.kubernetes.io/instance-type": "not a type"}}})",
        R"({"metadata": {"labels": {"node.kubernetes.io/instance-type": 5}}})",
        R"({"metadata": "garbage"})", R"([1, 2])"}) {
    const auto resolved = probes::InstanceTypeFromNode(core::Json::parse(node));
    EXPECT_EQ(resolved.name, std::nullopt) << node;
    EXPECT_TRUE(resolved.source.starts_with("Node label node.kubernetes.io/instance-type: "))
        << node << " -> " << resolved.source;
  }
}

}  // namespace
}  // namespace ncclguard::test
