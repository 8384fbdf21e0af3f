// docs/guide.md and the code must agree: every rule, node check and diagnosis links a section
// that exists, every section is covered by something (or marked documentation only), and the
// generated rules table is current.
#include <gtest/gtest.h>

#include <map>
#include <regex>
#include <set>
#include <sstream>

#include "core/catalog.h"
#include "core/guide.h"
#include "core/rule.h"
#include "tests/unit/test_support.h"

namespace ncclguard::test {
namespace {

struct Section {
  std::string slug;
  std::set<std::string> covered_by;  // "rule:id", "check:id", "diagnosis:id"
  bool documentation_only = false;
};

std::vector<Section> ParseGuide() {
  const std::string text = ReadFile(SourcePath("docs/guide.md"));
  std::vector<Section> sections;
  const std::regex anchor(R"re(<a id="([^"]+)"></a>)re");
  const std::regex covered(R"(\*\*Covered by:\*\*(.*))");
  const std::regex item(R"((rule|check|diagnosis) `([a-z0-9-]+)`)");
  std::istringstream lines(text);
  std::string line;
  std::smatch m;
  while (std::getline(lines, line)) {
    if (std::regex_search(line, m, anchor)) {
      sections.push_back({m[1], {}, false});
    } else if (!sections.empty() && std::regex_search(line, m, covered)) {
      const std::string rest = m[1];
      if (rest.find("documentation only") != std::string::npos)
        sections.back().documentation_only = true;
      for (std::sregex_iterator it(rest.begin(), rest.end(), item), end; it != end; ++it) {
        sections.back().covered_by.insert((*it)[1].str() + ":" + (*it)[2].str());
      }
    }
  }
  return sections;
}

TEST(Guide, HasExactlyTheContractSectionsInOrder) {
  const auto sections = ParseGuide();
  const auto expected = core::GuideSections();
  ASSERT_EQ(sections.size(), expected.size());
  for (std::size_t i = 0; i < sections.size(); ++i) EXPECT_EQ(sections[i].slug, expected[i].slug);
}

TEST(Guide, EveryRuleCheckAndDiagnosisIsListedInItsSection) {
  std::map<std::string, Section> by_slug;
  for (const auto& s : ParseGuide()) by_slug[s.slug] = s;
  std::set<std::string> known;
  auto expect_listed = [&](const std::string& kind, std::string_view id, std::string_view slug) {
    const std::string key = kind + ":" + std::string(id);
    known.insert(key);
    ASSERT_TRUE(by_slug.contains(std::string(slug))) << key << " links missing section " << slug;
    EXPECT_TRUE(by_slug[std::string(slug)].covered_by.contains(key))
        << key << " not listed in #" << slug;
  };
  for (const core::Rule* rule : core::RuleRegistry::All()) {
    expect_listed("rule", rule->Info().id, rule->Info().slug);
  }
  for (const auto& check : core::NodeChecks()) expect_listed("check", check.id, check.slug);
  for (const auto& diagnosis : core::Diagnoses())
    expect_listed("diagnosis", diagnosis.id, diagnosis.slug);

  for (const auto& [slug, section] : by_slug) {
    EXPECT_TRUE(section.documentation_only || !section.covered_by.empty())
        << "#" << slug << " is covered by nothing and not marked documentation only";
    EXPECT_FALSE(section.documentation_only && !section.covered_by.empty()) << "#" << slug;
    for (const auto& key : section.covered_by)
      EXPECT_TRUE(known.contains(key)) << "#" << slug << " names unknown " << key;
  }
}

TEST(Guide, GeneratedRulesTableIsCurrent) {
  const auto result = RunCli({"explain", "--markdown", "--guide-base-url", "guide.md"});
  ASSERT_EQ(result.exit_code, 0) << result.err;
  EXPECT_EQ(result.out, ReadFile(SourcePath("docs/rules.md")))
      << "regenerate: ncclguard explain --markdown --guide-base-url guide.md > docs/rules.md";
}

TEST(Guide, LinksUseTheConfiguredBase) {
  EXPECT_EQ(core::GuideLink("https://x.example/guide/", "memlock"),
            "https://x.example/guide#memlock");
  EXPECT_EQ(core::GuideLink("https://x.example/g.md#", "memlock"),
            "https://x.example/g.md#memlock");
  EXPECT_TRUE(core::IsGuideSlug("gpu-row-remap"));
  EXPECT_FALSE(core::IsGuideSlug("nope"));
}

}  // namespace
}  // namespace ncclguard::test
