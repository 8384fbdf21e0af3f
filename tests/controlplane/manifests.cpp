#include "manifests.h"

#include <yaml-cpp/yaml.h>

#include <fstream>
#include <map>
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

std::string PinnedModuleDir(const std::string& module, const std::string& version_key) {
  static std::mutex mutex;
  // module -> its directory, or the error that getting it gave.
  static std::map<std::string, std::pair<std::string, std::string>> found;
  std::lock_guard lock(mutex);
  auto known = found.find(module);
  if (known == found.end()) {
    std::string dir, error;
    const std::string versions = SourceDir() + "/scripts/controlplane/versions.sh";
    std::ifstream in(versions);
    std::string line, version;
    while (std::getline(in, line)) {
      if (line.starts_with(version_key + "=")) version = line.substr(line.find('=') + 1);
    }
    if (version.empty()) {
      error = "no " + version_key + " in " + versions;
    } else {
      ProcessResult got = RunProcess({ControlPlaneScript(), "source-dir", module + "@" + version});
      while (!got.stdout_text.empty() && got.stdout_text.back() == '\n') got.stdout_text.pop_back();
      if (got.exit_code != 0 || got.stdout_text.empty()) {
        error = "scripts/controlplane.sh source-dir " + module + "@" + version +
                " failed: " + got.stderr_text;
      } else {
        dir = got.stdout_text;
      }
    }
    known = found.emplace(module, std::make_pair(dir, error)).first;
  }
  if (known->second.first.empty()) throw std::runtime_error(known->second.second);
  return known->second.first;
}

std::string JobSetCrd() {
  return PinnedModuleDir("sigs.k8s.io/jobset", "JOBSET_VERSION") +
         "/config/components/crd/bases/jobset.x-k8s.io_jobsets.yaml";
}

std::string PolicyReportCrd() {
  return PinnedModuleDir("github.com/kyverno/kyverno", "KYVERNO_VERSION") +
         "/config/crds/policyreport/wgpolicyk8s.io_policyreports.yaml";
}

std::vector<std::string> TrainerCrds() {
  const std::string crds = PinnedModuleDir("github.com/kubeflow/trainer/v2", "TRAINER_VERSION") +
                           "/manifests/base/crds/";
  return {crds + "trainer.kubeflow.org_trainjobs.yaml",
          crds + "trainer.kubeflow.org_trainingruntimes.yaml",
          crds + "trainer.kubeflow.org_clustertrainingruntimes.yaml"};
}

std::string JobCrd(const std::string& kind) {
  if (kind == "PyTorchJob")
    return PinnedModuleDir("github.com/kubeflow/training-operator", "TRAINING_OPERATOR_VERSION") +
           "/manifests/base/crds/kubeflow.org_pytorchjobs.yaml";
  if (kind == "MPIJob") return TestCrdDir() + "/mpijob-crd.yaml";
  if (kind == "JobSet") return JobSetCrd();
  if (kind == "HyperPodPyTorchJob") return TestCrdDir() + "/hyperpodpytorchjob-crd.yaml";
  throw std::invalid_argument("JobCrd: no CRD for kind " + kind);
}

}  // namespace ncclguard::testenv
