// What storing a cached pod costs the informer (kube/packed_json.h against the MessagePack it
// replaced): bytes per pod, and the time to pack and to unpack 100,000 of them, which is what a
// pass over the pod cache at 5,000 nodes costs (bench/scale.sh). One line per run; the script
// (bench/cache_codec.sh) prints the medians.
#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include "core/json.h"
#include "kube/packed_json.h"

namespace {

using ncclguard::core::Json;

// A pod of an Indexed Job as the controller caches it (the training-job controller's and the
// audit's projections together), with the fields the API server and the Job controller add.
Json CachedPod(int index) {
  const std::string n = std::to_string(index);
  Json pod = Json::parse(R"({
    "metadata": {"name": "scale-job-01234-)" +
                         n + R"(-x7k2q", "namespace": "scale-3",
      "uid": "0b4f8a3c-1d2e-4f5a-9b8c-7d6e5f)" +
                         std::to_string(100000 + index) + R"(",
      "resourceVersion": "12)" +
                         n + R"(",
      "labels": {"batch.kubernetes.io/controller-uid": "5d4c3b2a-1f0e-4d9c-8b7a-6f5e4d3c2b1a",
                 "batch.kubernetes.io/job-completion-index": ")" +
                         n + R"(",
                 "batch.kubernetes.io/job-name": "scale-job-01234",
                 "controller-uid": "5d4c3b2a-1f0e-4d9c-8b7a-6f5e4d3c2b1a",
                 "job-name": "scale-job-01234"},
      "ownerReferences": [{"kind": "Job", "controller": true}]},
    "apiVersion": "v1", "kind": "Pod",
    "spec": {"nodeName": "kwok-node-)" +
                         n + R"(",
      "containers": [{"name": "pytorch", "image": "registry.invalid/trainer:1",
        "env": [{"name": "NCCL_DEBUG", "value": "INFO"}, {"name": "FI_PROVIDER", "value": "efa"},
                {"name": "FI_EFA_USE_DEVICE_RDMA", "value": "1"},
                {"name": "JOB_COMPLETION_INDEX", "valueFrom": {"fieldRef": {"apiVersion": "v1",
                  "fieldPath": "metadata.labels['batch.kubernetes.io/job-completion-index']"}}}],
        "resources": {"limits": {"nvidia.com/gpu": "8", "vpc.amazonaws.com/efa": "32",
                                 "memory": "1000Gi"},
                      "requests": {"nvidia.com/gpu": "8", "vpc.amazonaws.com/efa": "32",
                                   "memory": "1000Gi", "cpu": "96"}},
        "volumeMounts": [{"name": "kube-api-access-x7k2q", "readOnly": true,
                          "mountPath": "/var/run/secrets/kubernetes.io/serviceaccount"}]}],
      "volumes": [{"name": "kube-api-access-x7k2q"}],
      "nodeSelector": {"node.kubernetes.io/instance-type": "p5.48xlarge"}},
    "status": {"phase": "Running", "containerStatuses": [{"name": "pytorch",
      "image": "registry.invalid/trainer:1", "state": {}, "lastState": {}}]}})");
  return pod;
}

double Milliseconds(std::chrono::steady_clock::duration d) {
  return std::chrono::duration<double, std::milli>(d).count();
}

}  // namespace

int main(int argc, char** argv) {
  const int pods = argc > 1 ? std::stoi(argv[1]) : 100000;
  std::vector<Json> objects;
  objects.reserve(1000);
  for (int i = 0; i < 1000; ++i) objects.push_back(CachedPod(i));

  ncclguard::kube::PackedJson packed;
  std::vector<std::vector<std::uint8_t>> packed_bytes(objects.size());
  std::vector<std::vector<std::uint8_t>> msgpack_bytes(objects.size());
  std::size_t packed_size = 0;
  std::size_t msgpack_size = 0;
  const auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < pods; ++i) {
    packed_bytes[i % objects.size()] = packed.Pack(objects[i % objects.size()]);
  }
  const auto t1 = std::chrono::steady_clock::now();
  for (int i = 0; i < pods; ++i) {
    msgpack_bytes[i % objects.size()] = Json::to_msgpack(objects[i % objects.size()]);
  }
  const auto t2 = std::chrono::steady_clock::now();
  std::size_t checksum = 0;
  for (int i = 0; i < pods; ++i) checksum += packed.Unpack(packed_bytes[i % objects.size()]).size();
  const auto t3 = std::chrono::steady_clock::now();
  for (int i = 0; i < pods; ++i) {
    checksum += Json::from_msgpack(msgpack_bytes[i % objects.size()]).size();
  }
  const auto t4 = std::chrono::steady_clock::now();
  for (std::size_t i = 0; i < objects.size(); ++i) {
    packed_size += packed_bytes[i].size();
    msgpack_size += msgpack_bytes[i].size();
  }
  std::printf(
      "pods=%d packed_bytes_per_pod=%zu msgpack_bytes_per_pod=%zu dictionary_bytes=%zu "
      "packed_pack_ms=%.0f msgpack_pack_ms=%.0f packed_unpack_ms=%.0f msgpack_unpack_ms=%.0f "
      "checksum=%zu\n",
      pods, packed_size / objects.size(), msgpack_size / objects.size(), packed.dictionary_bytes(),
      Milliseconds(t1 - t0), Milliseconds(t2 - t1), Milliseconds(t3 - t2), Milliseconds(t4 - t3),
      checksum);
}
