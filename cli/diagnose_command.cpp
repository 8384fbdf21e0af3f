// `ncclguard diagnose`: the log diagnoses (controllers/log_scan.h) over saved NCCL/PyTorch logs
// (a file per rank, a Slurm output, `kubectl logs`; - for stdin), streamed. Exit 0: nothing
// found; 1: a finding; 2: usage or input error (nothing on stdout).
#include <CLI/CLI.hpp>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <memory>
#include <set>

#include "cli/commands.h"
#include "cli/policy_flags.h"
#include "controllers/diagnosis.h"
#include "controllers/log_scan.h"
#include "core/catalog.h"
#include "core/errors.h"
#include "core/guide.h"
#include "core/json.h"

namespace ncclguard::cli {
namespace {

using controllers::LogFinding;
using controllers::LogScan;

struct DiagnoseOptions {
  std::vector<std::string> files;
  std::string output = "text";
  PolicyOptions policy;
};

constexpr std::size_t kChunkBytes = 1 << 20;

struct FileCloser {
  void operator()(std::FILE* file) const {
    if (file != nullptr && file != stdin) std::fclose(file);
  }
};
using File = std::unique_ptr<std::FILE, FileCloser>;

std::string NameOf(const std::string& path) { return path == "-" ? "<stdin>" : path; }

// Opens every input before reading any: a missing file is an input error with nothing printed.
std::vector<File> OpenAll(const std::vector<std::string>& paths) {
  std::vector<File> files;
  bool stdin_used = false;
  for (const std::string& path : paths) {
    if (path == "-") {
      if (stdin_used) throw core::InputError("- (standard input) given twice");
      stdin_used = true;
      files.emplace_back(stdin);
      continue;
    }
    std::error_code error;
    if (std::filesystem::is_directory(path, error)) {
      throw core::InputError(path + ": is a directory");
    }
    std::FILE* file = std::fopen(path.c_str(), "rb");
    if (file == nullptr) throw core::InputError(path + ": cannot open: " + std::strerror(errno));
    files.emplace_back(file);
  }
  return files;
}

void Read(std::FILE* file, const std::string& path, std::size_t source, LogScan& scan) {
  std::vector<char> buffer(kChunkBytes);
  controllers::LineSplitter splitter;
  const auto feed = [&](std::string_view line) { scan.Feed(source, line); };
  while (true) {
    const std::size_t n = std::fread(buffer.data(), 1, buffer.size(), file);
    if (n > 0) splitter.Push(std::string_view(buffer.data(), n), feed);
    if (n < buffer.size()) {
      if (std::ferror(file) != 0) throw core::InputError(NameOf(path) + ": read error");
      break;
    }
  }
  splitter.Finish(feed);
}

core::Json FindingJson(const LogFinding& f, const LogScan& scan, const core::Policy& policy) {
  const core::CatalogEntry* entry = core::Catalog::Find(f.id);
  core::Json lines = core::Json::array();
  core::Json evidence = core::Json::array();
  for (const controllers::LogEvidence& e : f.evidence) {
    if (e.source == f.source) lines.push_back(e.line);
    evidence.push_back(
        {{"file", scan.Sources()[e.source].name}, {"line", e.line}, {"text", e.text}});
  }
  return {{"id", f.id},
          {"level", entry != nullptr ? core::LevelName(entry->level) : "warn"},
          {"file", scan.Sources()[f.source].name},
          {"lines", std::move(lines)},
          {"message", f.message},
          {"evidence", std::move(evidence)},
          {"remedy", entry != nullptr ? entry->remedy : ""},
          {"guide", core::GuideLink(policy.guide_base_url, entry != nullptr ? entry->slug : "")}};
}

void PrintText(const std::vector<LogFinding>& findings, const LogScan& scan,
               const core::Policy& policy) {
  for (const LogFinding& f : findings) {
    const core::CatalogEntry* entry = core::Catalog::Find(f.id);
    const std::uint64_t line = f.evidence.empty() ? 0 : f.evidence.front().line;
    std::cout << scan.Sources()[f.source].name << ":" << line << ": "
              << (entry != nullptr ? core::LevelName(entry->level) : "warn") << " " << f.id << ": "
              << f.message << "\n";
    for (const controllers::LogEvidence& e : f.evidence) {
      std::cout << "    " << scan.Sources()[e.source].name << ":" << e.line << ": " << e.text
                << "\n";
    }
    if (entry != nullptr) {
      std::cout << "  fix:   " << entry->remedy
                << "\n  guide: " << core::GuideLink(policy.guide_base_url, entry->slug) << "\n";
    }
  }
  // What each log says of the transport, the question most runs of this command start from.
  for (std::size_t s = 0; s < scan.Sources().size(); ++s) {
    const controllers::TransportVerdict& v = scan.Transport(s);
    std::cout << scan.Sources()[s].name << ": NCCL transport "
              << controllers::TransportName(v.kind);
    if (!v.why.empty()) std::cout << " (" << v.why << ")";
    if (!v.plugin_version.empty()) std::cout << ", " << v.plugin_version;
    if (v.kind == controllers::NcclTransportKind::Unknown && v.why.empty()) {
      std::cout << " (no NCCL network lines: run with NCCL_DEBUG=INFO "
                   "NCCL_DEBUG_SUBSYS=INIT,NET)";
    }
    std::cout << "\n";
  }
  std::cout << findings.size() << (findings.size() == 1 ? " finding" : " findings") << " in "
            << scan.Sources().size() << (scan.Sources().size() == 1 ? " log" : " logs") << "\n";
}

int RunDiagnose(const DiagnoseOptions& options) {
  const std::vector<std::string>& paths = options.files;
  const core::Policy policy = LoadPolicy(options.policy);
  std::vector<File> files = OpenAll(paths);
  LogScan scan;
  for (std::size_t i = 0; i < paths.size(); ++i) {
    const std::size_t source = scan.AddSource({NameOf(paths[i]), std::nullopt});
    Read(files[i].get(), paths[i], source, scan);
    files[i].reset();
  }
  const std::vector<LogFinding> findings = scan.Finish();
  if (options.output == "json") {
    core::Json out = core::Json::array();
    for (const LogFinding& f : findings) out.push_back(FindingJson(f, scan, policy));
    std::cout << out.dump(2, ' ', false, core::Json::error_handler_t::replace) << "\n";
  } else {
    PrintText(findings, scan, policy);
  }
  return findings.empty() ? kExitClean : kExitDenied;
}

}  // namespace

Command AddDiagnoseCommand(CLI::App& app) {
  auto options = std::make_shared<DiagnoseOptions>();
  CLI::App* command = app.add_subcommand(
      "diagnose", "diagnose NCCL/PyTorch logs (exit 1 on a finding, 2 on an input error)");
  command->add_option("-o,--output", options->output, "text or json")
      ->check(CLI::IsMember({"text", "json"}));
  command->add_option("files", options->files, "log files, - for stdin")->required();
  AddPolicyFlags(*command, options->policy);
  return {command, [options] { return RunDiagnose(*options); }};
}

}  // namespace ncclguard::cli
