// Loading YAML manifests and applying them to the test API server.
#pragma once

#include <chrono>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "test_kube_client.h"

namespace ncclguard::testenv {

// Every non-empty document of a (multi-document) YAML file, as JSON. Plain
// scalars become bools, numbers or null where YAML 1.2 core would; quoted
// scalars stay strings.
std::vector<nlohmann::json> LoadYamlDocuments(const std::string& path);

// The REST path of a cluster-scoped CustomResourceDefinition.
std::string CrdPath(const std::string& name);

// Server-side applies each CRD in `path` and waits until all are Established;
// throws with the server's answer or the last seen conditions otherwise.
void ApplyCrds(TestKubeClient& client, const std::string& path,
               std::chrono::milliseconds timeout = std::chrono::seconds(30));

// The CRDs under tests/controlplane/crds (MPIJob, HyperPodPyTorchJob).
std::string TestCrdDir();

// The directory of `module` at the version that `version_key` (e.g. "JOBSET_VERSION") pins in
// scripts/controlplane/versions.sh, in the Go module cache (scripts/controlplane.sh source-dir
// downloads it once); looked up once per test binary. Throws when it cannot be had.
std::string PinnedModuleDir(const std::string& module, const std::string& version_key);

// JobSet's own CRD (config/components/crd/bases of sigs.k8s.io/jobset at JOBSET_VERSION).
std::string JobSetCrd();

// The policy working group's PolicyReport CRD (wgpolicyk8s.io/v1alpha2), as Kyverno's module
// publishes it (config/crds/policyreport of github.com/kyverno/kyverno at KYVERNO_VERSION).
std::string PolicyReportCrd();

// Kubeflow Trainer v2's CRDs (manifests/base/crds of github.com/kubeflow/trainer/v2 at
// TRAINER_VERSION): TrainJob, TrainingRuntime, ClusterTrainingRuntime.
std::vector<std::string> TrainerCrds();

// The CRD file of a training-job kind. "PyTorchJob": the Kubeflow training operator's own
// (manifests/base/crds of github.com/kubeflow/training-operator at the version pinned in
// scripts/controlplane/versions.sh, from the Go module cache). "JobSet": JobSetCrd(). "MPIJob"
// (kubeflow.org/v2beta1, the mpi-operator's) and "HyperPodPyTorchJob": the minimal ones in
// TestCrdDir(). Throws for another kind or when the module cannot be had.
std::string JobCrd(const std::string& kind);

}  // namespace ncclguard::testenv
