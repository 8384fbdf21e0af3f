#pragma once

#include <string>
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

// Reads, parses and evaluates every file before anything is written, so an error in the last
// file leaves stdout empty. Throws core::InputError "FILE: document N: reason".
std::vector<FileAnalysis> AnalyzeFiles(const std::vector<std::string>& paths,
                                       const core::Policy& policy);

// "FILE#N" for messages; stdin is "<stdin>".
std::string DocumentName(const FileAnalysis& file, std::size_t document);

// The human form of a finding: a header line, the message, and the guide link.
std::string FormatFinding(const core::Finding& finding, const std::string& where);

}  // namespace ncclguard::cli
