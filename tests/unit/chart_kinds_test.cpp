// The chart's webhook configurations send the webhook exactly the kinds of the kind table
// (core/kinds.h): Pods, and every managed job kind at the version ncclguard reads. A kind added to
// the table without its rules (or a rule left for a kind that is gone) fails here.
#include <gtest/gtest.h>

#include <map>
#include <regex>
#include <set>
#include <span>
#include <sstream>
#include <string>
#include <tuple>

#include <yaml-cpp/yaml.h>

#include "core/kinds.h"
#include "core/policy.h"
#include "tests/unit/test_support.h"

namespace ncclguard::test {
namespace {

// (group, version, resource, operations) of one rule line.
using RuleLine = std::tuple<std::string, std::string, std::string, std::string>;

// The rule lines of each webhook in the rendered chart, by webhook name ("mutate.ncclguard.io",
// ...).
std::map<std::string, std::set<RuleLine>> RulesByWebhook(const std::string& text) {
  static const std::regex webhook(R"(- name: (\S+\.ncclguard\.io))");
  static const std::regex rule(
      R"(- \{apiGroups: \[("?)([^\]"]*)\1\], apiVersions: \[([^\]]*)\], resources: \[([^\]]*)\], operations: \[([^\]]*)\])");
  std::map<std::string, std::set<RuleLine>> rules;
  std::string current;
  std::istringstream lines(text);
  for (std::string line; std::getline(lines, line);) {
    std::smatch match;
    if (std::regex_search(line, match, webhook)) {
      current = match[1];
    } else if (std::regex_search(line, match, rule)) {
      rules[current].insert({match[2], match[3], match[4], match[5]});
    }
  }
  return rules;
}

std::set<RuleLine> Expected(const std::string& job_operations,
                            std::span<const core::KindInfo> kinds = core::ManagedKinds(),
                            bool pods = true) {
  std::set<RuleLine> expected;
  if (pods) expected.insert({"", "v1", "pods", "CREATE"});
  for (const core::KindInfo& info : kinds) {
    const std::string api_version(info.api_version);
    const auto slash = api_version.find('/');
    expected.insert({api_version.substr(0, slash), api_version.substr(slash + 1),
                     std::string(info.resource), job_operations});
  }
  return expected;
}

TEST(ChartWebhookRules, EveryKindOfTheKindTableAndNothingElse) {
  // The chart as rendered with its default values (scripts/render-manifests.sh keeps it so).
  const auto rules = RulesByWebhook(ReadFile(SourcePath("manifests/ncclguard.yaml")));
  ASSERT_EQ(rules.size(), 6u) << "six webhooks with rules";
  // Fixes and the gate mark on CREATE; validation of jobs on CREATE and UPDATE, each for the
  // namespaces of the policy's mode and for those labelled enforce (and audit: no fixes there);
  // Trainer's runtimes (warnings only) apart.
  for (const char* name : {"mutate.ncclguard.io", "mutate-enforce.ncclguard.io"}) {
    EXPECT_EQ(rules.at(name), Expected("CREATE")) << name;
  }
  for (const char* name :
       {"validate.ncclguard.io", "validate-enforce.ncclguard.io", "validate-audit.ncclguard.io"}) {
    EXPECT_EQ(rules.at(name), Expected("CREATE, UPDATE")) << name;
  }
  EXPECT_EQ(rules.at("runtimes.ncclguard.io"),
            Expected("CREATE, UPDATE", core::TemplateKinds(), false));
}

TEST(ChartWebhookRules, TheParserSeesAMissingKind) {
  const std::string one_kind =
      "  - name: mutate.ncclguard.io\n"
      "      - {apiGroups: [\"\"], apiVersions: [v1], resources: [pods], operations: [CREATE], "
      "scope: Namespaced}\n";
  const auto rules = RulesByWebhook(one_kind);
  ASSERT_EQ(rules.at("mutate.ncclguard.io").size(), 1u);
  EXPECT_NE(rules.at("mutate.ncclguard.io"), Expected("CREATE"));
}

// The probe runs on the nodes of the built-in catalog's types (the chart adds their "ml."
// spellings): a type added to the catalog without the chart would never be probed.
TEST(ChartProbeInstanceTypes, AreTheBuiltInCatalog) {
  const YAML::Node values = YAML::LoadFile(SourcePath("charts/ncclguard/values.yaml"));
  std::vector<std::string> chart;
  for (const YAML::Node& type : values["probe"]["instanceTypes"]) {
    chart.push_back(type.as<std::string>());
  }
  std::vector<std::string> catalog;
  for (const core::InstanceType& type : core::BuiltInInstanceTypes()) catalog.push_back(type.name);
  EXPECT_EQ(chart, catalog);
}

}  // namespace
}  // namespace ncclguard::test
