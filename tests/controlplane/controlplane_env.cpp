#include "controlplane_env.h"

#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <mutex>
#include <sstream>
#include <stdexcept>
#include <system_error>
#include <utility>
#include <vector>

#ifndef NCCLGUARD_SOURCE_DIR
#error "NCCLGUARD_SOURCE_DIR must be defined by the build (the repository root)"
#endif

namespace ncclguard::testenv {
namespace {

constexpr const char* kNotBuilt = "control plane not built: run scripts/controlplane.sh build";

// The value of `export NAME=value` in start's output. controlplane.sh quotes
// with printf %q, which only adds backslashes for the paths it writes.
std::string ExportedValue(const std::string& eval_lines, const std::string& name) {
  std::istringstream lines(eval_lines);
  const std::string prefix = "export " + name + "=";
  for (std::string line; std::getline(lines, line);) {
    if (!line.starts_with(prefix)) continue;
    std::string value;
    for (std::size_t i = prefix.size(); i < line.size(); ++i) {
      if (line[i] == '\\' && i + 1 < line.size()) ++i;
      value += line[i];
    }
    return value;
  }
  return "";
}

std::map<std::string, std::string> ReadEnvFile(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw std::runtime_error("reading " + path + ": cannot open");
  std::map<std::string, std::string> values;
  for (std::string line; std::getline(in, line);) {
    auto eq = line.find('=');
    if (eq != std::string::npos) values[line.substr(0, eq)] = line.substr(eq + 1);
  }
  return values;
}

}  // namespace

std::string SourceDir() { return NCCLGUARD_SOURCE_DIR; }

std::string ControlPlaneScript() { return SourceDir() + "/scripts/controlplane.sh"; }

std::string MakeTempDir(const std::string& prefix) {
  std::string pattern = (std::filesystem::temp_directory_path() / (prefix + "-XXXXXX")).string();
  if (mkdtemp(pattern.data()) == nullptr) {
    throw std::system_error(errno, std::generic_category(), "mkdtemp " + pattern);
  }
  // Removed when the test binary exits, so that runs leave nothing in /tmp; only by the process
  // that made them (a forked child that exits must not take its parent's files).
  static std::mutex mutex;
  static std::vector<std::string> made;
  static const pid_t owner = getpid();
  std::lock_guard lock(mutex);
  if (made.empty()) {
    std::atexit([] {
      if (getpid() != owner) return;
      std::lock_guard exiting(mutex);
      for (const std::string& dir : made) {
        std::error_code ignored;
        std::filesystem::remove_all(dir, ignored);
      }
    });
  }
  made.push_back(pattern);
  return pattern;
}

ControlPlane::ControlPlane(std::string state_dir, std::map<std::string, std::string> env)
    : state_dir_(std::move(state_dir)), env_(std::move(env)) {}

ControlPlane::~ControlPlane() {
  if (running_) Stop();
}

std::map<std::string, std::string> ControlPlane::ScriptEnv() const {
  auto env = env_;
  env["NCCLGUARD_CONTROLPLANE_DIR"] = state_dir_;
  // If this process dies without TearDown, the script's watchdog stops the
  // servers instead of leaving them running on the CI machine.
  env.try_emplace("NCCLGUARD_CONTROLPLANE_OWNER_PID", std::to_string(getpid()));
  return env;
}

ProcessResult ControlPlane::Start() {
  ProcessResult result = RunProcess({ControlPlaneScript(), "start"}, ScriptEnv());
  if (result.exit_code != 0) return result;

  info_ = {};
  info_.state_dir = state_dir_;
  info_.kubeconfig = ExportedValue(result.stdout_text, "KUBECONFIG");
  auto values = ReadEnvFile(state_dir_ + "/controlplane.env");
  info_.apiserver_url = values["APISERVER_URL"];
  info_.ca_file = values["CA_FILE"];
  info_.admin_cert_file = values["ADMIN_CERT_FILE"];
  info_.admin_key_file = values["ADMIN_KEY_FILE"];
  info_.bin_dir = values["BIN_DIR"];
  running_ = true;
  if (info_.kubeconfig.empty() || info_.apiserver_url.empty()) {
    result.exit_code = 1;
    result.stderr_text +=
        "\ncontrolplane.sh start printed no KUBECONFIG line or no APISERVER_URL; stdout was:\n" +
        result.stdout_text;
  }
  return result;
}

ProcessResult ControlPlane::Stop() {
  running_ = false;
  return RunProcess({ControlPlaneScript(), "stop"}, ScriptEnv());
}

ProcessResult ControlPlane::StopApiServer() {
  return RunProcess({ControlPlaneScript(), "stop-apiserver"}, ScriptEnv());
}

ProcessResult ControlPlane::StartApiServer() {
  return RunProcess({ControlPlaneScript(), "start-apiserver"}, ScriptEnv());
}

ProcessResult ControlPlane::StopEtcd() {
  return RunProcess({ControlPlaneScript(), "stop-etcd"}, ScriptEnv());
}

ProcessResult ControlPlane::StartEtcd() {
  return RunProcess({ControlPlaneScript(), "start-etcd"}, ScriptEnv());
}

std::unique_ptr<ControlPlane> ControlPlaneEnvironment::instance_;

void ControlPlaneEnvironment::SetUp() {
  instance_ = std::make_unique<ControlPlane>(MakeTempDir("ncclguard-cp"));
  ProcessResult started = instance_->Start();
  if (started.exit_code == 0) {
    std::cerr << "[ controlplane ] kube-apiserver ready at " << instance_->info().apiserver_url
              << " (state in " << instance_->state_dir() << ")\n";
    return;
  }
  if (started.stderr_text.find(kNotBuilt) != std::string::npos) {
    FAIL() << kNotBuilt << "\n" << started.stderr_text;
  }
  FAIL() << "starting the control plane failed (exit " << started.exit_code << "):\n"
         << started.stderr_text;
}

void ControlPlaneEnvironment::TearDown() {
  if (instance_ && instance_->running()) {
    ProcessResult stopped = instance_->Stop();
    EXPECT_EQ(stopped.exit_code, 0) << "stopping the control plane: " << stopped.stderr_text;
  }
  instance_.reset();
}

const ControlPlaneInfo& ControlPlaneEnvironment::Info() {
  if (!instance_ || !instance_->running()) {
    throw std::runtime_error(
        "the control plane is not running (ControlPlaneEnvironment::SetUp failed)");
  }
  return instance_->info();
}

}  // namespace ncclguard::testenv
