// What reading JSON costs (core::ReadJson, core/json_reader.h) on the bytes ncclguard reads most:
// the webhook's AdmissionReview (bench/webhook/worker-pod-review.json, 4.2 KB, once a request)
// and a pod list as the informers decode it at cluster size (1,000 pods of an Indexed Job, about
// 2 MB). nlohmann's own parser on the same bytes is printed beside it. One line per run; the
// script (bench/json_read.sh) prints the medians.
#include <chrono>
#include <cstdio>
#include <fstream>
#include <iterator>
#include <string>

#include "core/json.h"
#include "core/json_reader.h"

namespace {

using ncclguard::core::Json;

// A pod of an Indexed Job with the fields the API server and the Job controller add.
std::string PodText(int index) {
  const std::string n = std::to_string(index);
  return R"({"metadata": {"name": "scale-job-10042-)" + n +
         R"(-x7k2q", "namespace": "scale-3", "uid": "0b4f8a3c-1d2e-4f5a-9b8c-7d6e5)" + n +
         R"(", "resourceVersion": "1204)" + n +
         R"(", "creationTimestamp": "2026-12-06T21:03:00Z", "labels": {"batch.kubernetes.io/controller-uid": "5d4c3b2a-1f0e-4d9c-8b7a-6f5e4d310042", "batch.kubernetes.io/job-completion-index": ")" +
         n +
         R"(", "batch.kubernetes.io/job-name": "scale-job-10042", "job-name": "scale-job-10042"},
    "annotations": {"kubectl.kubernetes.io/default-container": "pytorch"},
    "ownerReferences": [{"apiVersion": "batch/v1", "kind": "Job", "name": "scale-job-10042",
      "uid": "5d4c3b2a-1f0e-4d9c-8b7a-6f5e4d310042", "controller": true, "blockOwnerDeletion": true}]},
  "apiVersion": "v1", "kind": "Pod",
  "spec": {"nodeName": "kwok-node-)" +
         n + R"(", "restartPolicy": "Never", "subdomain": "scale-job-10042",
    "containers": [{"name": "pytorch", "image": "registry.invalid/trainer:1",
      "env": [{"name": "NCCL_DEBUG", "value": "INFO"}, {"name": "FI_PROVIDER", "value": "efa"},
              {"name": "FI_EFA_USE_DEVICE_RDMA", "value": "1"}, {"name": "NCCL_SOCKET_IFNAME", "value": "^lo,docker"},
              {"name": "JOB_COMPLETION_INDEX", "valueFrom": {"fieldRef": {"apiVersion": "v1",
                "fieldPath": "metadata.labels['batch.kubernetes.io/job-completion-index']"}}}],
      "resources": {"limits": {"nvidia.com/gpu": "8", "vpc.amazonaws.com/efa": "32", "memory": "1000Gi"},
                    "requests": {"nvidia.com/gpu": "8", "vpc.amazonaws.com/efa": "32", "memory": "1000Gi", "cpu": "96"}},
      "securityContext": {"capabilities": {"add": ["IPC_LOCK"]}},
      "volumeMounts": [{"name": "dshm", "mountPath": "/dev/shm"}, {"name": "kube-api-access-x7k2q", "readOnly": true,
                        "mountPath": "/var/run/secrets/kubernetes.io/serviceaccount"}]}],
    "volumes": [{"name": "dshm", "emptyDir": {"medium": "Memory", "sizeLimit": "512Gi"}}, {"name": "kube-api-access-x7k2q"}],
    "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}],
    "nodeSelector": {"node.kubernetes.io/instance-type": "p5.48xlarge"}},
  "status": {"phase": "Running", "podIP": "10.244.)" +
         std::to_string(index % 250) + R"(.7", "startTime": "2026-12-06T21:03:05Z",
    "conditions": [{"type": "Ready", "status": "True", "lastTransitionTime": "2026-12-06T21:03:09Z"}],
    "containerStatuses": [{"name": "pytorch", "ready": true, "restartCount": 0, "started": true,
      "state": {"running": {"startedAt": "2026-12-06T21:03:08Z"}}}]}})";
}

std::string PodList(int pods) {
  std::string text =
      R"({"kind": "PodList", "apiVersion": "v1", "metadata": {"resourceVersion": "1204999"}, "items": [)";
  for (int i = 0; i < pods; ++i) text += (i == 0 ? "" : ",") + PodText(i);
  return text + "]}";
}

template <typename Read>
double NanosecondsPerRead(const std::string& text, int reads, Read read) {
  std::size_t sink = 0;
  const auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < reads; ++i) sink += read(text).size();
  const auto took = std::chrono::steady_clock::now() - start;
  if (sink == 0) std::puts("nothing read");
  return std::chrono::duration<double, std::nano>(took).count() / reads;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s REVIEW_JSON\n", argv[0]);
    return 2;
  }
  std::ifstream in(argv[1], std::ios::binary);
  const std::string review((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const std::string list = PodList(1000);
  const auto ours = [](const std::string& text) { return ncclguard::core::ReadJson(text); };
  const auto theirs = [](const std::string& text) { return Json::parse(text); };
  // Warm the allocator and the caches once.
  NanosecondsPerRead(review, 200, ours);
  NanosecondsPerRead(list, 2, ours);
  std::printf(
      "review_us=%.2f review_nlohmann_us=%.2f list_ms=%.2f list_nlohmann_ms=%.2f list_mb=%.2f\n",
      NanosecondsPerRead(review, 20000, ours) / 1e3,
      NanosecondsPerRead(review, 20000, theirs) / 1e3, NanosecondsPerRead(list, 20, ours) / 1e6,
      NanosecondsPerRead(list, 20, theirs) / 1e6, static_cast<double>(list.size()) / 1e6);
  return 0;
}
