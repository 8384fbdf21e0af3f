// Shared setup of the kube/ client's integration tests: a Client on the shared control
// plane's kubeconfig and a fresh namespace per test.
#pragma once

#include <gtest/gtest.h>

#include <memory>
#include <string>

#include "controlplane_env.h"
#include "kube/client.h"
#include "test_kube_client.h"

namespace ncclguard::testenv {

class KubeClientTest : public ::testing::Test {
 protected:
  void SetUp() override {
    info_ = ControlPlaneEnvironment::Info();
    admin_ = std::make_unique<TestKubeClient>(info_);
    namespace_ = CreateTestNamespace(*admin_, "kube");
    client_ = std::make_shared<kube::Client>(kube::LoadKubeConfigFile(info_.kubeconfig));
  }
  void TearDown() override {
    if (admin_ && !namespace_.empty()) admin_->Delete("/api/v1/namespaces/" + namespace_);
  }

  kube::ResourceRef ConfigMaps() const { return kube::resources::ConfigMaps().In(namespace_); }

  core::Json ConfigMap(const std::string& name, const core::Json& data = {{"k", "v"}}) const {
    return {{"apiVersion", "v1"},
            {"kind", "ConfigMap"},
            {"metadata", {{"name", name}, {"namespace", namespace_}}},
            {"data", data}};
  }

  ControlPlaneInfo info_;
  std::unique_ptr<TestKubeClient> admin_;
  std::string namespace_;
  std::shared_ptr<kube::Client> client_;
};

// Runs `call` and returns the ApiError code it threw (fails the test if none).
template <typename Call>
kube::ErrorCode ErrorCodeOf(Call&& call, std::string* message = nullptr) {
  try {
    call();
  } catch (const kube::ApiError& error) {
    if (message) *message = error.what();
    return error.code();
  }
  ADD_FAILURE() << "no ApiError thrown";
  return kube::ErrorCode::kUnknown;
}

}  // namespace ncclguard::testenv
