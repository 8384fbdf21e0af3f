// `ncclguard lint` and `ncclguard fix` on one input: cli::AnalyzeText (parse every document,
// evaluate the rules) and cli::FixAnalyses (apply the fixes, write the documents back), which
// RunLint/RunFix call once a file is read. main() reports core::InputError as the user's error;
// anything else it calls an internal error, so here anything else is a finding.
// Properties: the writer's output reads back equal; the patch applied to the input gives the
// fixed object; no user field is lost or changed; fix is idempotent (fixing the fixed output
// changes nothing); every finding has a guide link that exists; no document holds more values
// than the bound on YAML alias expansion lets through (what bounds its time and memory).
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "cli/analysis.h"
#include "core/errors.h"
#include "fuzz/fuzz_support.h"

namespace {

using namespace ncclguard;
using core::Json;

void RequireNoUserFieldLost(const Json& original, const Json& fixed) {
  const Json flat = original.flatten();
  for (const auto& [pointer, value] : flat.items()) {
    const core::JsonPointer at(pointer);
    fuzz::Require(fixed.contains(at), "no user field is lost by a fix", pointer);
    // flatten() turns empty lists and maps into null leaves, and a null field is unset to
    // Kubernetes (`capabilities:` with nothing after it): a fix may fill either.
    if (value.is_null()) continue;
    fuzz::Require(fuzz::SameJson(fixed.at(at), value), "no user field is changed by a fix",
                  pointer);
  }
}

std::uint64_t CountValues(const Json& value) {
  std::uint64_t count = 1;
  if (value.is_object() || value.is_array()) {
    for (const auto& item : value) count += CountValues(item);
    if (value.is_object()) count += value.size();  // keys, counted as the expansion bound does
  }
  return count;
}

cli::FileAnalysis AnalyzeWritten(const std::string& text, const std::string& what) {
  try {
    return cli::AnalyzeText("written", text, core::Policy::Defaults());
  } catch (const core::InputError& e) {
    fuzz::Fail(what + " reads back", std::string(e.what()) + "\n---- text:\n" + text);
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static const core::Policy policy = core::Policy::Defaults();
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  cli::FileAnalysis file;
  try {
    file = cli::AnalyzeText("input.yaml", text, policy);
  } catch (const core::InputError& e) {
    fuzz::Require(std::string_view(e.what()).starts_with("input.yaml: "),
                  "an input error names the file", e.what());
    return 0;
  }

  for (const Json& document : file.documents.documents) {
    fuzz::Require(CountValues(document) <= core::kMaxExpandedValues,
                  "no document expands past the bound on aliases");
  }

  // The writer, before any fix: what it writes reads back as the same documents.
  const std::string written = core::WriteDocuments(file.documents);
  const cli::FileAnalysis reread = AnalyzeWritten(written, "the writer's output");
  fuzz::Require(reread.documents.documents.size() == file.documents.documents.size(),
                "the writer's output has as many documents");
  for (std::size_t i = 0; i < file.documents.documents.size(); ++i) {
    fuzz::Require(fuzz::SameJson(reread.documents.documents[i], file.documents.documents[i]),
                  "the writer's output reads back equal", written);
  }

  for (std::size_t i = 0; i < file.evaluations.size(); ++i) {
    const Json& original = file.documents.documents[i];
    const core::Evaluation& evaluation = file.evaluations[i];
    Json patched;
    try {
      patched = original.patch(evaluation.patch);
    } catch (const std::exception& e) {
      fuzz::Fail("the patch applies to the input", e.what());
    }
    fuzz::Require(fuzz::SameJson(patched, evaluation.fixed), "the patch gives the fixed object");
    RequireNoUserFieldLost(original, evaluation.fixed);
    for (const auto& finding : evaluation.findings) {
      fuzz::Require(fuzz::GuideLinkExists(finding.guide), "every finding has a guide link",
                    finding.rule + " " + finding.guide);
    }
  }

  std::vector<cli::FileAnalysis> files{std::move(file)};
  const cli::FixOutput first = cli::FixAnalyses(files);
  fuzz::RequireGuideLinksExist(first.unfixed, "fix's report", text);
  std::vector<cli::FileAnalysis> again{AnalyzeWritten(first.fixed, "fix's output")};
  const cli::FixOutput second = cli::FixAnalyses(again);
  fuzz::Require(second.fixed == first.fixed, "fix is idempotent",
                "first:\n" + first.fixed + "\nsecond:\n" + second.fixed);
  return 0;
}
