#include "cli/analysis.h"

#include "cli/input.h"
#include "core/errors.h"

namespace ncclguard::cli {

std::string DocumentName(const FileAnalysis& file, std::size_t document) {
  const std::string name = file.path == "-" ? std::string("<stdin>") : file.path;
  return name + "#" + std::to_string(file.documents.positions.at(document));
}

std::vector<FileAnalysis> AnalyzeFiles(const std::vector<std::string>& paths,
                                       const core::Policy& policy) {
  std::vector<FileAnalysis> files;
  for (const std::string& path : paths) {
    FileAnalysis file;
    file.path = path;
    const std::string label = path == "-" ? std::string("<stdin>") : path;
    const std::string text = ReadInput(path);
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
    files.push_back(std::move(file));
  }
  return files;
}

std::string FormatFinding(const core::Finding& finding, const std::string& where) {
  std::string out = where + ": " + std::string(core::LevelName(finding.level)) + " " +
                    finding.rule + " " + finding.object.Describe() + " at " + finding.path + "\n";
  out += "    " + finding.message + "\n";
  out += "    guide: " + finding.guide + "\n";
  return out;
}

}  // namespace ncclguard::cli
