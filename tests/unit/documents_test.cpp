#include <gtest/gtest.h>

#include "core/documents.h"
#include "core/errors.h"

namespace ncclguard::test {
namespace {

using core::DocumentFormat;
using core::InputError;
using core::Json;
using core::ParseDocuments;

TEST(Documents, ReadsMultiDocumentYamlSkippingEmptyDocuments) {
  const auto set = ParseDocuments("---\na: 1\n---\n---\nb: two\n...\n");
  ASSERT_EQ(set.documents.size(), 2u);
  EXPECT_EQ(set.format, DocumentFormat::YamlStream);
  EXPECT_EQ(set.documents[0], Json({{"a", 1}}));
  EXPECT_EQ(set.documents[1], Json({{"b", "two"}}));
  EXPECT_EQ(set.positions, (std::vector<std::size_t>{1, 3}));
}

TEST(Documents, ResolvesScalarsAsKubernetesDoes) {
  const auto doc = ParseDocuments(R"(
quoted: "8"
single: '1'
plain_int: 8
negative: -3
octal: 0644
hex: 0x1F
float: 1.5
yes_bool: yes
true_bool: true
null_value: ~
empty:
text: p5.48xlarge
caret: ^lo,docker
version: 1.10.0
grouped: 1_000
)")
                       .documents.at(0);
  EXPECT_EQ(doc["quoted"], "8");
  EXPECT_EQ(doc["single"], "1");
  EXPECT_EQ(doc["plain_int"], 8);
  EXPECT_EQ(doc["negative"], -3);
  EXPECT_EQ(doc["octal"], 420);
  EXPECT_EQ(doc["hex"], 31);
  EXPECT_EQ(doc["float"], 1.5);
  EXPECT_EQ(doc["yes_bool"], true);
  EXPECT_EQ(doc["true_bool"], true);
  EXPECT_TRUE(doc["null_value"].is_null());
  EXPECT_TRUE(doc["empty"].is_null());
  EXPECT_EQ(doc["text"], "p5.48xlarge");
  EXPECT_EQ(doc["caret"], "^lo,docker");
  EXPECT_EQ(doc["version"], "1.10.0");
  EXPECT_EQ(doc["grouped"], 1000);
}

TEST(Documents, YamlRoundTripKeepsTypesAndKeyOrder) {
  const std::string text = R"(zeta: 1
alpha:
  value: "1"
  flag: "true"
  empty: ""
  nothing: null
  octal_text: "0644"
  list: [b, a]
  script: |
    echo one
    echo two
  colon: "a: b"
  hash: "x #y"
  dash: "- item"
  emptymap: {}
  emptylist: []
)";
  const auto first = ParseDocuments(text);
  const std::string written = core::WriteDocuments(first);
  const auto second = ParseDocuments(written);
  EXPECT_EQ(first.documents, second.documents) << written;
  EXPECT_EQ(second.documents[0].begin().key(), "zeta");
  EXPECT_NE(written.find("value: \"1\""), std::string::npos) << written;
  EXPECT_NE(written.find("script: |"), std::string::npos) << written;
}

TEST(Documents, JsonObjectArrayAndStreamKeepTheirShape) {
  const auto object = ParseDocuments(R"({"kind": "Pod", "b": 1, "a": 2})");
  EXPECT_EQ(object.format, DocumentFormat::JsonStream);
  EXPECT_FALSE(object.json_array);
  EXPECT_EQ(core::WriteDocuments(object), "{\n  \"kind\": \"Pod\",\n  \"b\": 1,\n  \"a\": 2\n}\n");

  const auto array = ParseDocuments(R"([{"a": 1}, {"b": 2}])");
  EXPECT_TRUE(array.json_array);
  EXPECT_EQ(array.documents.size(), 2u);
  EXPECT_EQ(Json::parse(core::WriteDocuments(array)).size(), 2u);

  const auto stream = ParseDocuments("{\"a\": 1}\n{\"b\": 2}\n");
  EXPECT_FALSE(stream.json_array);
  EXPECT_EQ(stream.documents.size(), 2u);
  EXPECT_EQ(ParseDocuments(core::WriteDocuments(stream)).documents, stream.documents);
}

TEST(Documents, RejectsADocumentThatIsNotAnObjectNamingIt) {
  try {
    ParseDocuments("a: 1\n---\n- just\n- a list\n");
    FAIL() << "expected InputError";
  } catch (const InputError& e) {
    EXPECT_STREQ(e.what(), "document 2: expected a Kubernetes object (a mapping), got a list");
  }
  EXPECT_THROW(ParseDocuments("just a string\n"), InputError);
  EXPECT_THROW(ParseDocuments("[1, 2]"), InputError);
}

TEST(Documents, RejectsTextThatIsNotYamlOrJson) {
  EXPECT_THROW(ParseDocuments("a: [1, 2\nb: }"), InputError);
  EXPECT_THROW(ParseDocuments("a: b: c\n"), InputError);
  EXPECT_THROW(ParseDocuments("a: *undefined_anchor\n"), InputError);
  EXPECT_THROW(ParseDocuments("{\"a\": 1,}"), InputError);
  EXPECT_THROW(ParseDocuments("{\"a\": 1} trailing"), InputError);
  EXPECT_THROW(ParseDocuments(std::string("\x00\x01\x02\xff", 4)), InputError);
}

TEST(Documents, RejectsHostileNestingWithoutCrashing) {
  const std::string deep_json = std::string(100000, '[') + std::string(100000, ']');
  EXPECT_THROW(ParseDocuments(deep_json), InputError);
  const std::string deep_flow = "a: " + std::string(100000, '[') + std::string(100000, ']');
  EXPECT_THROW(ParseDocuments(deep_flow), InputError);
  std::string deep_block;
  for (int i = 0; i < 400; ++i)
    deep_block += std::string(static_cast<std::size_t>(i) * 2, ' ') + "k:\n";
  EXPECT_THROW(ParseDocuments(deep_block), InputError);
}

TEST(Documents, StringsThatLookLikeOtherTypesAreQuotedOnOutput) {
  const Json doc = {{"a", "yes"},   {"b", "12"},     {"c", "null"},        {"d", "0x10"},
                    {"e", ""},      {"f", "1.5"},    {"g", "1_000"},       {"h", "0644"},
                    {"i", "- x"},   {"j", "a: b"},   {"k", "#x"},          {"l", "trailing "},
                    {"m", "tab\t"}, {"n", "*alias"}, {"o", "multi\nline"}, {"p", "ends\n\n"}};
  const auto reread = ParseDocuments(core::ToYaml(doc)).documents.at(0);
  EXPECT_EQ(reread, doc);
}

}  // namespace
}  // namespace ncclguard::test
