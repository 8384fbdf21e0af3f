#pragma once

#include <string>
#include <vector>

#include "core/engine.h"
#include "core/json.h"
#include "core/policy.h"

namespace ncclguard::test {

// Parses one YAML document (the test's manifest) into Json.
core::Json Yaml(const std::string& text);

// Evaluates with the default policy unless one is given.
core::Evaluation Check(const core::Json& object,
                       const core::Policy& policy = core::Policy::Defaults());

// Findings of one rule.
std::vector<core::Finding> FindingsOf(const core::Evaluation& evaluation, const std::string& rule);

// What the controller saw of an instance type on the nodes (the learned catalog's entry).
core::ObservedInstanceType ObservedType(const std::string& name, int gpus, int efa_devices,
                                        int nodes);

// A p5.48xlarge pod with one 8-GPU container named "pytorch", compliant with every rule, for
// tests to break one thing at a time.
core::Json CompliantPod();

// The JSON Pointer of env variable `name` in the container at `container` (a JSON Pointer) of
// `object`, found by name, so that a test does not depend on where a manifest lists its
// variables. "<container>/env/<no NAME>" when there is none, for the comparison to fail naming it.
std::string EnvPointer(const core::Json& object, const std::string& name,
                       const std::string& container = "/spec/containers/0");

// A file under the source tree.
std::string SourcePath(const std::string& relative);
std::string ReadFile(const std::string& path);
// The path of a saved log under tests/fixtures/logs/, and its text.
std::string LogFixturePath(const std::string& name);
std::string LogFixture(const std::string& name);

// A file in the temporary directory holding `content`, removed when the object goes.
class TempFile {
 public:
  explicit TempFile(const std::string& content, const std::string& suffix = ".yaml");
  ~TempFile();
  TempFile(const TempFile&) = delete;
  TempFile& operator=(const TempFile&) = delete;
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

struct CommandResult {
  int exit_code = -1;
  std::string out;
  std::string err;
};

// Runs the built ncclguard binary with arguments (no shell), optional stdin.
CommandResult RunCli(const std::vector<std::string>& args, const std::string& stdin_text = "");

}  // namespace ncclguard::test
