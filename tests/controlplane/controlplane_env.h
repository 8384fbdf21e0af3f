// A real etcd + kube-apiserver for integration tests, started through
// scripts/controlplane.sh (see docs/controlplane.md).
#pragma once

#include <gtest/gtest.h>

#include <map>
#include <memory>
#include <string>

#include "process.h"

namespace ncclguard::testenv {

// Where one running instance can be reached; all paths are absolute.
struct ControlPlaneInfo {
  std::string state_dir;
  std::string kubeconfig;
  std::string apiserver_url;  // https://127.0.0.1:<port>
  std::string ca_file;
  std::string admin_cert_file;  // CN=ncclguard-admin, O=system:masters
  std::string admin_key_file;
  std::string bin_dir;  // kube-apiserver, etcd, kubectl, helm
};

// The repository root, compiled in by CMake.
std::string SourceDir();
std::string ControlPlaneScript();

// A fresh empty directory under /tmp, unique per call.
std::string MakeTempDir(const std::string& prefix);

// One control plane instance owned by this object; the destructor stops it.
class ControlPlane {
 public:
  // `state_dir` becomes NCCLGUARD_CONTROLPLANE_DIR; `env` adds variables
  // (tests use the NCCLGUARD_CONTROLPLANE_* knobs).
  explicit ControlPlane(std::string state_dir, std::map<std::string, std::string> env = {});
  ~ControlPlane();
  ControlPlane(const ControlPlane&) = delete;
  ControlPlane& operator=(const ControlPlane&) = delete;

  // Runs `controlplane.sh start`; on success info() is filled. The result is
  // returned as is so tests can inspect failures.
  ProcessResult Start();
  ProcessResult Stop();
  // Stops / starts kube-apiserver alone; etcd (and its data) and the URL stay.
  ProcessResult StopApiServer();
  ProcessResult StartApiServer();
  // Stops / starts etcd alone; its data and ports stay, kube-apiserver keeps running.
  ProcessResult StopEtcd();
  ProcessResult StartEtcd();

  bool running() const { return running_; }
  const ControlPlaneInfo& info() const { return info_; }
  const std::string& state_dir() const { return state_dir_; }

 private:
  std::map<std::string, std::string> ScriptEnv() const;

  std::string state_dir_;
  std::map<std::string, std::string> env_;
  ControlPlaneInfo info_;
  bool running_ = false;
};

// Starts one control plane per test binary before the first test and stops
// it after the last. Register it in main() with AddGlobalTestEnvironment.
class ControlPlaneEnvironment : public ::testing::Environment {
 public:
  void SetUp() override;
  void TearDown() override;

  // The running instance; fails the calling test if SetUp did not succeed.
  static const ControlPlaneInfo& Info();

 private:
  static std::unique_ptr<ControlPlane> instance_;
};

}  // namespace ncclguard::testenv
