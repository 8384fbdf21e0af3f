#include "cli/analysis.h"

#include "cli/input.h"
#include "core/errors.h"

namespace ncclguard::cli {

std::string DocumentName(const FileAnalysis& file, std::size_t document) {
  const std::string name = file.path == "-" ? std::string("<stdin>") : file.path;
  return name + "#" + std::to_string(file.documents.positions.at(document));
}

FileAnalysis AnalyzeText(const std::string& path, std::string_view text,
                         const core::Policy& policy) {
  FileAnalysis file;
  file.path = path;
  const std::string label = path == "-" ? std::string("<stdin>") : path;
  try {
    file.documents = core::ParseDocuments(text);
  } catch (const core::InputError& e) {
    throw core::InputError(label + ": " + e.what());
  }
  for (std::size_t i = 0; i < file.documents.documents.size(); ++i) {
    try {
      file.evaluations.push_back(core::Evaluate(file.documents.documents[i], policy));
    } catch (const core::InputError& e) {
      const auto ref = core::ObjectRef::From(file.documents.documents[i]);
      throw core::InputError(label + ": document " + std::to_string(file.documents.positions[i]) +
                             " (" + ref.Describe() + "): " + e.what());
    }
  }
  return file;
}

std::vector<FileAnalysis> AnalyzeFiles(const std::vector<std::string>& paths,
                                       const core::Policy& policy) {
  std::vector<FileAnalysis> files;
  for (const std::string& path : paths) files.push_back(AnalyzeText(path, ReadInput(path), policy));
  return files;
}

FixOutput FixAnalyses(std::vector<FileAnalysis>& files) {
  FixOutput output;
  for (FileAnalysis& file : files) {
    for (std::size_t i = 0; i < file.evaluations.size(); ++i) {
      core::Evaluation& evaluation = file.evaluations[i];
      for (const core::Finding& finding : evaluation.findings) {
        if (finding.level == core::Level::Fix) continue;
        output.denied = output.denied || finding.level == core::Level::Deny;
        output.unfixed += FormatFinding(finding, DocumentName(file, i));
      }
      file.documents.documents[i] = std::move(evaluation.fixed);
    }
    if (!output.fixed.empty() && file.documents.format == core::DocumentFormat::YamlStream) {
      output.fixed += "---\n";
    }
    output.fixed += core::WriteDocuments(file.documents);
  }
  return output;
}

std::string FormatFinding(const core::Finding& finding, const std::string& where) {
  std::string out = where + ": " + std::string(core::LevelName(finding.level)) + " " +
                    finding.rule + " " + finding.object.Describe() + " at " + finding.path + "\n";
  out += "    " + finding.message + "\n";
  out += "    guide: " + finding.guide + "\n";
  return out;
}

}  // namespace ncclguard::cli
