// The cluster contract is defined once (core/contract.h): the chart, the CRDs, the rendered
// manifests, the scripts, the examples and the docs spell ncclguard.io names literally (Helm
// cannot include C++), so every name they spell must be one the code defines; and no product
// source file outside core/contract.h spells one in a string literal of its own.
#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "core/contract.h"

namespace ncclguard::test {
namespace {

namespace fs = std::filesystem;

const fs::path kRoot = NCCLGUARD_SOURCE_DIR;

std::string Read(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream out;
  out << in.rdbuf();
  return out.str();
}

// Regular files under `relative` (a file or a folder), recursively.
std::vector<fs::path> FilesUnder(const std::string& relative) {
  std::vector<fs::path> files;
  const fs::path top = kRoot / relative;
  if (fs::is_regular_file(top)) return {top};
  if (!fs::is_directory(top)) return files;
  for (const auto& entry : fs::recursive_directory_iterator(top)) {
    if (entry.is_regular_file()) files.push_back(entry.path());
  }
  return files;
}

// Every ncclguard.io name in `text`: the group alone, or the group and one path segment
// ("ncclguard.io/gate", "ncclguard.io/v1alpha1" from an API path), without trailing punctuation.
std::set<std::string> NamesIn(const std::string& text) {
  static const std::regex name(R"(ncclguard\.io(/[A-Za-z0-9._-]*)?)");
  std::set<std::string> names;
  for (auto it = std::sregex_iterator(text.begin(), text.end(), name); it != std::sregex_iterator();
       ++it) {
    std::string found = it->str();
    while (!found.empty() && std::isalnum(static_cast<unsigned char>(found.back())) == 0) {
      found.pop_back();
    }
    names.insert(found);
  }
  return names;
}

TEST(Contract, NamesAreUnderTheGroupAndDistinct) {
  std::set<std::string_view> seen;
  for (std::string_view name : core::kContractNames) {
    EXPECT_TRUE(name == core::kApiGroup || name.starts_with("ncclguard.io/")) << name;
    EXPECT_TRUE(seen.insert(name).second) << name << " listed twice";
  }
  EXPECT_EQ(core::kApiVersion,
            std::string(core::kApiGroup) + "/" + std::string(core::kApiGroupVersion));
}

TEST(Contract, ChartScriptsAndDocsSpellOnlyDefinedNames) {
  std::set<std::string, std::less<>> defined;
  for (std::string_view name : core::kContractNames) defined.emplace(name);
  std::map<std::string, std::string> undefined;  // name -> first file spelling it
  std::size_t files = 0;
  for (const char* place : {"charts", "crds", "manifests", "docs", "scripts", "examples", "bench",
                            "README.md", "BENCHMARKS.md", "Dockerfile"}) {
    for (const fs::path& file : FilesUnder(place)) {
      ++files;
      for (const std::string& name : NamesIn(Read(file))) {
        if (!defined.contains(name)) undefined.emplace(name, fs::relative(file, kRoot).string());
      }
    }
  }
  EXPECT_GT(files, 20u);
  for (const auto& [name, file] : undefined) {
    ADD_FAILURE() << file << " spells " << name
                  << ", which core/contract.h does not define (a typo, or a name to add there)";
  }
}

// A second definition would be a string literal "ncclguard.io..." somewhere in the product.
TEST(Contract, OnlyCoreContractDefinesNames) {
  for (const char* folder :
       {"core", "controllers", "manager", "webhook", "probes", "cli", "kube"}) {
    for (const fs::path& file : FilesUnder(folder)) {
      const auto ext = file.extension();
      if (ext != ".h" && ext != ".cpp") continue;
      if (file == kRoot / "core" / "contract.h") continue;
      EXPECT_EQ(Read(file).find("\"ncclguard.io"), std::string::npos)
          << fs::relative(file, kRoot).string()
          << " spells an ncclguard.io name; use core/contract.h";
    }
  }
}

TEST(Contract, NamesInTextAreFoundWithoutPunctuation) {
  EXPECT_EQ(NamesIn("label `ncclguard.io/enabled=true`, then ncclguard.io/gate."),
            (std::set<std::string>{"ncclguard.io/enabled", "ncclguard.io/gate"}));
  EXPECT_EQ(NamesIn("/apis/ncclguard.io/v1alpha1/nodevalidations/x; nodevalidations.ncclguard.io"),
            (std::set<std::string>{"ncclguard.io", "ncclguard.io/v1alpha1"}));
}

}  // namespace
}  // namespace ncclguard::test
