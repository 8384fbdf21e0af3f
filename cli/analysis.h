#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "core/documents.h"
#include "core/engine.h"
#include "core/policy.h"

namespace ncclguard::cli {

// One input file with its documents evaluated.
struct FileAnalysis {
  std::string path;
  core::DocumentSet documents;
  std::vector<core::Evaluation> evaluations;  // one per document
};

// Parses and evaluates the text of one input; `path` names it ("-" is stdin). Throws
// core::InputError "FILE: document N: reason". What AnalyzeFiles does for each file once read.
FileAnalysis AnalyzeText(const std::string& path, std::string_view text,
                         const core::Policy& policy);

// Reads, parses and evaluates every file before anything is written, so an error in the last
// file leaves stdout empty; a TrainJob is checked with its runtime when one of the files holds
// it (else by itself). Throws core::InputError "FILE: document N: reason".
std::vector<FileAnalysis> AnalyzeFiles(const std::vector<std::string>& paths,
                                       const core::Policy& policy);

// What `ncclguard fix` writes: every document with its fixes applied, in the input's format
// (YAML stays YAML, JSON stays JSON), files one after another.
struct FixOutput {
  std::string fixed;    // stdout
  std::string unfixed;  // stderr: the findings a fix cannot resolve
  bool denied = false;  // one of them is a deny
};
FixOutput FixAnalyses(std::vector<FileAnalysis>& files);

// "FILE#N" for messages; stdin is "<stdin>".
std::string DocumentName(const FileAnalysis& file, std::size_t document);

// The human form of a finding: a header line, the message, and the guide link.
std::string FormatFinding(const core::Finding& finding, const std::string& where);

}  // namespace ncclguard::cli
