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

double Milliseconds(std::chrono::steady_clock::duration d) {
  return std::chrono::duration<double, std::milli>(d).count();
}

// A pod of an Indexed Job as the controller caches it (the training-job controller's and the
// audit's projections together), with the fields the API server and the Job controller add.
Json CachedPod(int job, int index) {
  const std::string j = std::to_string(10000 + job);
  const std::string n = std::to_string(index);
  const std::string job_uid = "5d4c3b2a-1f0e-4d9c-8b7a-6f5e4d3" + j;
  Json pod = Json::parse(R"({
    "metadata": {"name": "scale-job-)" +
                         j + "-" + n + R"(-x7k2q", "namespace": "scale-3",
      "uid": "0b4f8a3c-1d2e-4f5a-9b8c-7d6e5)" +
                         j + std::to_string(100 + index) + R"(",
      "resourceVersion": "12)" +
                         j + n + R"(",
      "labels": {"batch.kubernetes.io/controller-uid": ")" +
                         job_uid + R"(",
                 "batch.kubernetes.io/job-completion-index": ")" +
                         n + R"(",
                 "batch.kubernetes.io/job-name": "scale-job-)" +
                         j + R"(",
                 "controller-uid": ")" +
                         job_uid + R"(",
                 "job-name": "scale-job-)" +
                         j + R"("},
      "ownerReferences": [{"kind": "Job", "controller": true}]},
    "apiVersion": "v1", "kind": "Pod",
    "spec": {"nodeName": "kwok-node-)" +
                         std::to_string(job * 50 + index) + R"(",
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

std::string Owner(const Json& pod) {
  return pod["metadata"]["namespace"].get<std::string>() + "/" +
         pod["metadata"]["name"].get<std::string>();
}

}  // namespace

int main(int argc, char** argv) {
  constexpr int kPodsPerJob = 50;
  const int pods = argc > 1 ? std::stoi(argv[1]) : 100000;
  using Clock = std::chrono::steady_clock;
  ncclguard::kube::PackedJson packed;
  std::vector<std::vector<std::uint8_t>> packed_bytes;
  std::vector<std::vector<std::uint8_t>> msgpack_bytes;
  packed_bytes.reserve(pods);
  msgpack_bytes.reserve(pods);
  Clock::duration pack{};
  Clock::duration msgpack_pack{};
  for (int i = 0; i < pods; ++i) {
    const Json pod = CachedPod(i / kPodsPerJob, i % kPodsPerJob);
    const std::string owner = Owner(pod);
    const auto t0 = Clock::now();
    packed_bytes.push_back(packed.Pack(pod, owner));
    const auto t1 = Clock::now();
    msgpack_bytes.push_back(Json::to_msgpack(pod));
    const auto t2 = Clock::now();
    pack += t1 - t0;
    msgpack_pack += t2 - t1;
  }
  std::size_t packed_size = 0;
  std::size_t msgpack_size = 0;
  for (int i = 0; i < pods; ++i) {
    packed_size += packed_bytes[i].size();
    msgpack_size += msgpack_bytes[i].size();
  }
  const std::size_t dictionary = packed.dictionary_bytes();
  const std::size_t entries = packed.dictionary_entries();
  std::size_t checksum = 0;
  const auto t3 = Clock::now();
  for (const auto& bytes : packed_bytes) checksum += packed.Unpack(bytes).size();
  const auto t4 = Clock::now();
  for (const auto& bytes : msgpack_bytes) checksum += Json::from_msgpack(bytes).size();
  const auto t5 = Clock::now();
  for (const auto& bytes : packed_bytes) packed.Release(bytes);
  std::printf(
      "pods=%d packed_bytes_per_pod=%.0f msgpack_bytes_per_pod=%.0f dictionary_entries=%zu "
      "dictionary_bytes=%zu packed_pack_ms=%.0f msgpack_pack_ms=%.0f packed_unpack_ms=%.0f "
      "msgpack_unpack_ms=%.0f entries_after_release=%zu\n",
      pods, static_cast<double>(packed_size + dictionary) / pods,
      static_cast<double>(msgpack_size) / pods, entries, dictionary, Milliseconds(pack),
      Milliseconds(msgpack_pack), Milliseconds(t4 - t3), Milliseconds(t5 - t4),
      packed.dictionary_entries());
  return checksum == 0 ? 1 : 0;
}
