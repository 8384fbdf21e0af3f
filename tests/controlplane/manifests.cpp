#include "manifests.h"

#include <yaml-cpp/yaml.h>

#include <fstream>
#include <mutex>
#include <regex>
#include <stdexcept>

#include "controlplane_env.h"
#include "process.h"

namespace ncclguard::testenv {
namespace {

nlohmann::json PlainScalar(const std::string& text) {
  static const std::regex kInteger("[-+]?[0-9]+");
  static const std::regex kFloat(R"([-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?)");
  if (text == "true" || text == "True" || text == "TRUE") return true;
  if (text == "false" || text == "False" || text == "FALSE") return false;
  if (text.empty() || text == "~" || text == "null" || text == "Null" || text == "NULL")
    return nullptr;
  if (std::regex_match(text, kInteger)) return std::stoll(text);
  if (std::regex_match(text, kFloat)) return std::stod(text);
  return text;
}

nlohmann::json ToJson(const YAML::Node& node) {
  switch (node.Type()) {
    case YAML::NodeType::Map: {
      nlohmann::json object = nlohmann::json::object();
      for (const auto& entry : node) object[entry.first.as<std::string>()] = ToJson(entry.second);
      return object;
    }
    case YAML::NodeType::Sequence: {
      nlohmann::json array = nlohmann::json::array();
      for (const auto& item : node) array.push_back(ToJson(item));
      return array;
    }
    case YAML::NodeType::Scalar:
      // yaml-cpp tags quoted scalars "!"; those are strings whatever they say.
      return node.Tag() == "!" ? nlohmann::json(node.Scalar()) : PlainScalar(node.Scalar());
    default:
      return nullptr;
  }
}

bool Established(const nlohmann::json& crd) {
  for (const auto& condition :
       crd.value(nlohmann::json::json_pointer("/status/conditions"), nlohmann::json::array())) {
    if (condition.value("type", "") == "Established" && condition.value("status", "") == "True")
      return true;
  }
  return false;
}

}  // namespace

std::vector<nlohmann::json> LoadYamlDocuments(const std::string& path) {
  std::vector<nlohmann::json> documents;
  try {
    for (const auto& node : YAML::LoadAllFromFile(path)) {
      if (node.IsNull()) continue;
      documents.push_back(ToJson(node));
    }
  } catch (const YAML::Exception& e) {
    throw std::runtime_error("loading " + path + ": " + e.what());
  }
  return documents;
}

std::string CrdPath(const std::string& name) {
  return "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/" + name;
}

void ApplyCrds(TestKubeClient& client, const std::string& path, std::chrono::milliseconds timeout) {
  std::vector<std::string> names;
  for (const auto& crd : LoadYamlDocuments(path)) {
    std::string name = crd.at("metadata").at("name").get<std::string>();
    // Server-side apply: creates or updates, so tests may apply the same file twice.
    KubeResponse applied =
        client.Request("PATCH", CrdPath(name) + "?fieldManager=ncclguard-tests&force=true",
                       crd.dump(), "application/apply-patch+yaml");
    if (applied.status != 200 && applied.status != 201) {
      throw std::runtime_error("applying CRD " + name + " from " + path + ": HTTP " +
                               std::to_string(applied.status) + " " + applied.error + applied.body);
    }
    names.push_back(name);
  }
  for (const auto& name : names) {
    nlohmann::json last;
    bool ok = Eventually(
        [&] {
          KubeResponse got = client.Get(CrdPath(name));
          if (got.status != 200) return false;
          last = got.Json();
          return Established(last);
        },
        timeout);
    if (!ok) {
      throw std::runtime_error(
          "CRD " + name + " not Established after " + std::to_string(timeout.count()) +
          " ms; status: " + last.value("status", nlohmann::json::object()).dump());
    }
  }
}

std::string TestCrdDir() { return SourceDir() + "/tests/controlplane/crds"; }

namespace {

// The training operator's module dir in the Go module cache, looked up once per test binary.
std::string TrainingOperatorDir() {
  static std::once_flag once;
  static std::string dir;
  static std::string error;
  std::call_once(once, [] {
    const std::string versions = SourceDir() + "/scripts/controlplane/versions.sh";
    std::ifstream in(versions);
    std::string line, version;
    while (std::getline(in, line)) {
      if (line.starts_with("TRAINING_OPERATOR_VERSION=")) version = line.substr(line.find('=') + 1);
    }
    if (version.empty()) {
      error = "no TRAINING_OPERATOR_VERSION in " + versions;
      return;
    }
    ProcessResult found = RunProcess(
        {ControlPlaneScript(), "source-dir", "github.com/kubeflow/training-operator@" + version});
    while (!found.stdout_text.empty() && found.stdout_text.back() == '\n')
      found.stdout_text.pop_back();
    if (found.exit_code != 0 || found.stdout_text.empty()) {
      error = "scripts/controlplane.sh source-dir github.com/kubeflow/training-operator@" +
              version + " failed: " + found.stderr_text;
      return;
    }
    dir = found.stdout_text;
  });
  if (dir.empty()) throw std::runtime_error(error);
  return dir;
}

}  // namespace

std::string JobCrd(const std::string& kind) {
  if (kind == "PyTorchJob")
    return TrainingOperatorDir() + "/manifests/base/crds/kubeflow.org_pytorchjobs.yaml";
  if (kind == "MPIJob") return TestCrdDir() + "/mpijob-crd.yaml";
  if (kind == "JobSet") return TestCrdDir() + "/jobset-crd.yaml";
  if (kind == "HyperPodPyTorchJob") return TestCrdDir() + "/hyperpodpytorchjob-crd.yaml";
  throw std::invalid_argument("JobCrd: no CRD for kind " + kind);
}

}  // namespace ncclguard::testenv
