// Invariants over every shipped example and over seeded random damage to them: fixes are
// idempotent, add only (no user field is lost or changed), the patch reproduces the fixed object,
// a fixed object reads without an input error whenever its input did, and it is clean of fix
// findings.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <random>

#include "core/documents.h"
#include "core/errors.h"
#include "core/guide.h"
#include "tests/unit/test_support.h"

namespace ncclguard::test {
namespace {

using core::Json;

std::vector<Json> ExampleDocuments() {
  std::vector<Json> docs;
  for (const auto& entry : std::filesystem::directory_iterator(SourcePath("examples"))) {
    if (entry.path().extension() != ".yaml") continue;
    for (Json& doc : core::ParseDocuments(ReadFile(entry.path().string())).documents)
      docs.push_back(doc);
  }
  return docs;
}

// Every leaf of `original` is present, unchanged, in `fixed`.
void ExpectNoUserFieldLost(const Json& original, const Json& fixed) {
  const Json flat_original = original.flatten();
  const Json flat_fixed = fixed.flatten();
  for (const auto& [pointer, value] : flat_original.items()) {
    if (value.is_null()) {
      // flatten() turns empty lists and objects into null leaves; a fix may fill them.
      ASSERT_TRUE(fixed.contains(core::JsonPointer(pointer))) << "lost " << pointer;
      const Json& now = fixed.at(core::JsonPointer(pointer));
      const Json& was = original.at(core::JsonPointer(pointer));
      EXPECT_TRUE(now == was || (now.type() == was.type() && !was.is_null()))
          << "changed " << pointer;
      continue;
    }
    auto it = flat_fixed.find(pointer);
    ASSERT_NE(it, flat_fixed.end()) << "lost " << pointer;
    EXPECT_EQ(*it, value) << "changed " << pointer;
  }
}

// A TrainJob's fixes reach it only as ncclguard's runtime patch, which carries volumes, mounts and
// securityContext but neither env nor resources (core/trainjob.h): the findings those fix stay on
// the TrainJob, fixable, and the webhook fixes them on each pod the JobSet makes. Whether a
// finding that is still fixable after the fix is one of those.
bool FixedOnThePods(const Json& object, const core::Finding& f, const core::Evaluation& first) {
  if (object.value("kind", "") != "TrainJob") return false;
  return std::any_of(first.findings.begin(), first.findings.end(), [&](const core::Finding& was) {
    return was.level == core::Level::Fix && was.rule == f.rule && was.path == f.path;
  });
}

void ExpectInvariants(const Json& original) {
  const core::Evaluation first = Check(original);
  // Patch reproduces the fixed object, and only adds.
  EXPECT_EQ(original.patch(first.patch), first.fixed);
  for (const Json& op : first.patch) EXPECT_EQ(op["op"], "add") << op.dump();
  ExpectNoUserFieldLost(original, first.fixed);
  // What the fixes added reads as cleanly as the input did: the engine's reads of a template
  // after a fix skip the type checks on that (core::TemplateRead::AfterFix).
  core::Evaluation second;
  ASSERT_NO_THROW(second = Check(first.fixed)) << "the fixed object is refused: " << first.fixed;
  // Idempotent: a second pass finds nothing to fix and changes nothing.
  EXPECT_TRUE(second.patch.empty()) << second.patch.dump();
  EXPECT_EQ(second.fixed, first.fixed);
  for (const auto& f : second.findings) {
    if (f.level == core::Level::Fix) {
      EXPECT_TRUE(FixedOnThePods(original, f, first)) << f.rule << " " << f.path;
      // What the runtime patch can carry is gone.
      EXPECT_NE(f.rule, "ipc-lock-missing");
      EXPECT_NE(f.rule, "dev-shm-missing");
    }
  }
  // Deny/warn findings are stable across the fix.
  std::vector<std::string> before, after;
  for (const auto& f : first.findings) {
    if (f.level != core::Level::Fix) before.push_back(f.rule + f.path);
  }
  for (const auto& f : second.findings) {
    if (f.level != core::Level::Fix) after.push_back(f.rule + f.path);
  }
  EXPECT_EQ(before, after);
  // Every finding links an existing guide section and names a path that exists.
  for (const auto& f : first.findings) {
    ASSERT_NE(f.guide.find('#'), std::string::npos);
    EXPECT_TRUE(core::IsGuideSlug(f.guide.substr(f.guide.find('#') + 1))) << f.guide;
    EXPECT_FALSE(f.message.empty());
    EXPECT_TRUE(first.fixed.contains(core::JsonPointer(f.path)) ||
                first.fixed.contains(core::JsonPointer(f.path).parent_pointer()))
        << f.rule << " " << f.path;
  }
}

TEST(Properties, HoldForEveryExample) {
  const auto docs = ExampleDocuments();
  ASSERT_GE(docs.size(), 6u);
  for (const Json& doc : docs) {
    SCOPED_TRACE(doc["metadata"]["name"].get<std::string>());
    ExpectInvariants(doc);
  }
}

TEST(Properties, CompliantExampleYieldsNoPatchAndNoFindings) {
  const auto result = Check(Yaml(ReadFile(SourcePath("examples/pytorchjob-p5.yaml"))));
  EXPECT_TRUE(result.findings.empty());
  EXPECT_TRUE(result.patch.empty());
}

// Removes one randomly chosen leaf or subtree; repeated, this damages a compliant object in the
// ways users do (a missing env entry, no securityContext, no volumes...).
void RemoveRandomField(Json& doc, std::mt19937& rng) {
  const Json flat = doc.flatten();
  if (flat.empty()) return;
  std::uniform_int_distribution<std::size_t> pick(0, flat.size() - 1);
  auto it = flat.begin();
  std::advance(it, static_cast<std::ptrdiff_t>(pick(rng)));
  core::JsonPointer target(it.key());
  // Sometimes cut a whole branch, never apiVersion/kind (the object would stop being a workload).
  std::uniform_int_distribution<int> depth(0, 3);
  for (int d = depth(rng);
       d > 0 && target.parent_pointer().parent_pointer() != core::JsonPointer(""); --d) {
    target = target.parent_pointer();
  }
  const std::string text = target.to_string();
  if (text == "/apiVersion" || text == "/kind" || text.starts_with("/metadata")) return;
  Json& parent = doc.at(target.parent_pointer());
  if (parent.is_object()) {
    parent.erase(target.back());
  } else if (parent.is_array()) {
    parent.erase(static_cast<std::size_t>(std::stoul(target.back())));
  }
}

TEST(Properties, HoldUnderSeededRandomDamage) {
  std::mt19937 rng(20261202);
  const auto docs = ExampleDocuments();
  int checked = 0;
  for (int round = 0; round < 300; ++round) {
    Json doc = docs[static_cast<std::size_t>(round) % docs.size()];
    for (int cuts = 1 + round % 4; cuts > 0; --cuts) RemoveRandomField(doc, rng);
    SCOPED_TRACE("round " + std::to_string(round) + ": " + doc.dump());
    try {
      ExpectInvariants(doc);
      ++checked;
    } catch (const core::InputError&) {
      // Damage can leave e.g. an env entry without a name: a clean input error is the contract.
    }
    if (HasFailure()) break;
  }
  EXPECT_GT(checked, 200);
}

}  // namespace
}  // namespace ncclguard::test
