// Real Kueue (sigs.k8s.io/kueue, KUEUE_VERSION of scripts/controlplane/versions.sh) for the
// integration tests: its manager built through the Go module proxy (`controlplane.sh build
// kueue`, cached), its CRDs read from the Go module cache, run against the test kube-apiserver
// with its own webhooks on 127.0.0.1 (the upstream webhook configurations, pointed at a url
// clientConfig with a CA generated here). Nothing of Kueue's is written by the tests.
#pragma once

#include <sys/types.h>
#include <string>

#include "controlplane_env.h"
#include "test_kube_client.h"

namespace ncclguard::testenv {

// Builds Kueue's manager (cached per machine); `error` says why when it could not be built.
struct KueueBuild {
  std::string binary;
  std::string error;
};
KueueBuild BuildKueue(const ControlPlaneInfo& info);

// `controlplane.sh source-dir MODULE@VERSION`: the module's directory in the Go module cache.
// Throws when the module proxy does not give it.
std::string ModuleSourceDir(const std::string& module_at_version);

// Kueue's CRDs (config/components/crd/bases), the Kubeflow PyTorchJob CRD (training-operator
// manifests/base/crds), JobSet's and Kubeflow Trainer v2's CRDs (manifests.h), from the module
// cache: what the integrations the harness enables (batch/job, kubeflow.org/pytorchjob,
// jobset.x-k8s.io/jobset, trainer.kubeflow.org/trainjob) watch.
void InstallKueueCrds(TestKubeClient& client);

// One Kueue manager process with its webhooks registered; the destructor stops it (SIGTERM to
// its pid) and deletes its webhook configurations.
class KueueManager {
 public:
  KueueManager(const ControlPlaneInfo& info, TestKubeClient& client, const std::string& binary);
  ~KueueManager();
  KueueManager(const KueueManager&) = delete;
  KueueManager& operator=(const KueueManager&) = delete;

  // Whether its readiness endpoint answered and its job webhook suspends a queued Job.
  bool ready() const { return ready_; }
  std::string Log() const;

 private:
  TestKubeClient& client_;
  std::string dir_;
  pid_t pid_ = -1;
  std::vector<std::string> configurations_;  // REST paths, deleted on teardown
  bool ready_ = false;
};

}  // namespace ncclguard::testenv
