// Seeded mutation of the shipped examples, at the text level and at the object level: whatever
// comes in, parsing and evaluation either succeed or throw core::InputError. Any other exception
// (or a crash) is a bug: the CLI and the webhook would report it as an internal error.
#include <gtest/gtest.h>

#include <filesystem>
#include <random>

#include "core/documents.h"
#include "core/engine.h"
#include "core/errors.h"
#include "tests/unit/test_support.h"

namespace ncclguard::test {
namespace {

using core::Json;

std::vector<std::string> ExampleTexts() {
  std::vector<std::string> texts;
  for (const auto& entry : std::filesystem::directory_iterator(SourcePath("examples"))) {
    if (entry.path().extension() == ".yaml") texts.push_back(ReadFile(entry.path().string()));
  }
  return texts;
}

// Parses and evaluates; returns false (with a message) on anything but success or InputError.
::testing::AssertionResult SurvivesOrRejectsCleanly(const std::string& text) {
  try {
    for (const Json& doc : core::ParseDocuments(text).documents) {
      const core::Evaluation result = core::Evaluate(doc, core::Policy::Defaults());
      (void)core::WriteDocuments({core::DocumentFormat::YamlStream, false, {result.fixed}, {1}});
    }
    return ::testing::AssertionSuccess();
  } catch (const core::InputError&) {
    return ::testing::AssertionSuccess();
  } catch (const std::exception& e) {
    return ::testing::AssertionFailure() << "unexpected " << typeid(e).name() << ": " << e.what();
  }
}

TEST(Robustness, ByteMutationsOfExamplesNeverEscapeAsOtherErrors) {
  std::mt19937 rng(7);
  const auto texts = ExampleTexts();
  const std::string alphabet = " \n\t:-[]{}#&*!|>'\"%@`,?0123456789abcxyz~^/.\\";
  for (int round = 0; round < 1500; ++round) {
    std::string text = texts[static_cast<std::size_t>(round) % texts.size()];
    std::uniform_int_distribution<int> edits(1, 6);
    for (int e = edits(rng); e > 0; --e) {
      std::uniform_int_distribution<std::size_t> pos(0, text.size() - 1);
      std::uniform_int_distribution<std::size_t> pick(0, alphabet.size() - 1);
      const std::size_t at = pos(rng);
      switch (rng() % 3) {
        case 0:
          text[at] = alphabet[pick(rng)];
          break;
        case 1:
          text.insert(at, 1, alphabet[pick(rng)]);
          break;
        default:
          text.erase(at, 1 + rng() % 8);
      }
    }
    ASSERT_TRUE(SurvivesOrRejectsCleanly(text)) << "round " << round << ":\n" << text;
  }
}

// Replaces a random leaf with a value of another type: the rules read typed fields.
TEST(Robustness, WrongTypedFieldsAreInputErrorsOrHarmless) {
  std::mt19937 rng(11);
  std::vector<Json> docs;
  for (const std::string& text : ExampleTexts()) {
    for (Json& doc : core::ParseDocuments(text).documents) docs.push_back(std::move(doc));
  }
  const std::vector<Json> replacements = {Json(nullptr),
                                          Json(7),
                                          Json(-1),
                                          Json("x"),
                                          Json(true),
                                          Json::array({1}),
                                          Json::object({{"k", "v"}}),
                                          Json(2.5)};
  int rejected = 0;
  for (int round = 0; round < 1500; ++round) {
    Json doc = docs[static_cast<std::size_t>(round) % docs.size()];
    const Json flat = doc.flatten();
    auto it = flat.begin();
    std::advance(it, static_cast<std::ptrdiff_t>(rng() % flat.size()));
    core::JsonPointer target(it.key());
    for (int up = static_cast<int>(rng() % 3); up > 0 && !target.parent_pointer().empty(); --up) {
      target = target.parent_pointer();
    }
    doc[target] = replacements[rng() % replacements.size()];
    try {
      const core::Evaluation result = core::Evaluate(doc, core::Policy::Defaults());
      EXPECT_EQ(doc.patch(result.patch), result.fixed) << doc.dump();
    } catch (const core::InputError&) {
      ++rejected;
    } catch (const std::exception& e) {
      FAIL() << "round " << round << " " << target.to_string() << ": " << typeid(e).name() << ": "
             << e.what() << "\n"
             << doc.dump();
    }
  }
  // Both outcomes occur: the mutations reach fields the rules read, and fields they do not.
  EXPECT_GT(rejected, 100);
  EXPECT_LT(rejected, 1400);
}

}  // namespace
}  // namespace ncclguard::test
