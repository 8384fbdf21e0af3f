#include "cli/analysis.h"

#include "cli/input.h"
#include "core/errors.h"
#include "core/kinds.h"
#include "core/trainjob.h"

namespace ncclguard::cli {

std::string DocumentName(const FileAnalysis& file, std::size_t document) {
  const std::string name = file.path == "-" ? std::string("<stdin>") : file.path;
  return name + "#" + std::to_string(file.documents.positions.at(document));
}

namespace {

FileAnalysis ParseText(const std::string& path, std::string_view text) {
  FileAnalysis file;
  file.path = path;
  try {
    file.documents = core::ParseDocuments(text);
  } catch (const core::InputError& e) {
    throw core::InputError((path == "-" ? std::string("<stdin>") : path) + ": " + e.what());
  }
  return file;
}

void EvaluateDocuments(FileAnalysis& file, const core::Policy& policy,
                       const core::RuntimeLookup& runtimes) {
  const std::string label = file.path == "-" ? std::string("<stdin>") : file.path;
  for (std::size_t i = 0; i < file.documents.documents.size(); ++i) {
    try {
      file.evaluations.push_back(
          core::Evaluate(file.documents.documents[i], policy, {.runtimes = runtimes}));
    } catch (const core::InputError& e) {
      const auto ref = core::ObjectRef::From(file.documents.documents[i]);
      throw core::InputError(label + ": document " + std::to_string(file.documents.positions[i]) +
                             " (" + ref.Describe() + "): " + e.what());
    }
  }
}

// The Trainer runtimes among the inputs' documents, for the TrainJobs among them that name one.
core::RuntimeLookup RuntimesIn(const std::vector<FileAnalysis>& files) {
  return [&files](const core::RuntimeRef& ref, std::string_view ns) -> std::optional<core::Json> {
    const core::KindInfo& info = core::KindInfoOf(ref.kind);
    for (const FileAnalysis& file : files) {
      for (const core::Json& document : file.documents.documents) {
        core::ObjectRef object;
        try {
          object = core::ObjectRef::From(document);
        } catch (const std::exception&) {
          continue;  // its own evaluation reports it
        }
        if (object.kind != info.kind_name || object.name != ref.name) continue;
        if (ref.kind == core::WorkloadKind::TrainingRuntime && object.namespace_ != ns) continue;
        if (core::KindOf(object.api_version, object.kind) != ref.kind) continue;
        return document;
      }
    }
    return std::nullopt;
  };
}

}  // namespace

FileAnalysis AnalyzeText(const std::string& path, std::string_view text,
                         const core::Policy& policy) {
  std::vector<FileAnalysis> files;
  files.push_back(ParseText(path, text));
  EvaluateDocuments(files.front(), policy, RuntimesIn(files));
  return std::move(files.front());
}

std::vector<FileAnalysis> AnalyzeFiles(const std::vector<std::string>& paths,
                                       const core::Policy& policy) {
  std::vector<FileAnalysis> files;
  for (const std::string& path : paths) files.push_back(ParseText(path, ReadInput(path)));
  // A TrainJob is checked with its runtime when one of the inputs holds it.
  const core::RuntimeLookup runtimes = RuntimesIn(files);
  for (FileAnalysis& file : files) EvaluateDocuments(file, policy, runtimes);
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
