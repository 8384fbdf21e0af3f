// Memory of an informer holding 10,000 training pods, projected to what controllers read.
// Starts its own control plane, creates the pods, then lists+watches them and prints the
// RSS growth. Run through bench/kube_informer_bench.sh (median of runs), not by ctest.
#include <malloc.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <string>
#include <thread>
#include <vector>

#include "controlplane_env.h"
#include "kube/client.h"
#include "kube/informer.h"
#include "test_kube_client.h"

namespace {

using ncclguard::core::Json;
namespace kube = ncclguard::kube;
namespace testenv = ncclguard::testenv;

long RssKiB() {
  std::ifstream status("/proc/self/status");
  for (std::string line; std::getline(status, line);) {
    if (line.starts_with("VmRSS:")) return std::stol(line.substr(6));
  }
  return -1;
}

// A worker pod as a PyTorchJob creates it, after the webhook's fixes: ~3 KB of JSON.
Json TrainingPod(const std::string& name, int job) {
  Json env = Json::array();
  for (const char* var :
       {"NCCL_DEBUG", "NCCL_SOCKET_IFNAME", "FI_PROVIDER", "FI_EFA_USE_DEVICE_RDMA", "NCCL_PROTO",
        "NCCL_ALGO", "MASTER_ADDR", "MASTER_PORT", "WORLD_SIZE", "RANK", "PYTHONUNBUFFERED",
        "NCCL_NVLS_ENABLE"}) {
    env.push_back({{"name", var}, {"value", std::string("value-of-") + var}});
  }
  Json resources = {{"nvidia.com/gpu", "8"},
                    {"vpc.amazonaws.com/efa", "32"},
                    {"hugepages-2Mi", "5120Mi"},
                    {"memory", "1000Gi"},
                    {"cpu", "180"}};
  std::string job_name = "train-" + std::to_string(job);
  return {
      {"apiVersion", "v1"},
      {"kind", "Pod"},
      {"metadata",
       {{"name", name},
        {"labels",
         {{"training.kubeflow.org/job-name", job_name},
          {"training.kubeflow.org/replica-type", "worker"},
          {"ncclguard.io/managed", "true"}}},
        {"annotations", {{"ncclguard.io/fixed", "efa-resources,nccl-env,ipc-lock,dev-shm"}}},
        {"ownerReferences",
         {{{"apiVersion", "kubeflow.org/v1"},
           {"kind", "PyTorchJob"},
           {"name", job_name},
           {"uid", "00000000-0000-0000-0000-" + std::to_string(100000000000 + job)},
           {"controller", true}}}}}},
      {"spec",
       {{"containers",
         {{{"name", "pytorch"},
           {"image", "123456789012.dkr.ecr.us-west-2.amazonaws.com/train:2.5.1-cuda12.4"},
           {"command", {"torchrun", "--nnodes=16", "--nproc-per-node=8", "train.py"}},
           {"env", env},
           {"resources", {{"limits", resources}, {"requests", resources}}},
           {"securityContext", {{"capabilities", {{"add", {"IPC_LOCK"}}}}}},
           {"volumeMounts",
            {{{"name", "shm"}, {"mountPath", "/dev/shm"}},
             {{"name", "data"}, {"mountPath", "/fsx"}}}}}}},
        {"volumes",
         {{{"name", "shm"}, {"emptyDir", {{"medium", "Memory"}, {"sizeLimit", "64Gi"}}}},
          {{"name", "data"}, {"persistentVolumeClaim", {{"claimName", "fsx"}}}}}},
        {"tolerations",
         {{{"key", "nvidia.com/gpu"}, {"operator", "Exists"}, {"effect", "NoSchedule"}},
          {{"key", "vpc.amazonaws.com/efa"}, {"operator", "Exists"}, {"effect", "NoSchedule"}}}},
        {"nodeSelector", {{"node.kubernetes.io/instance-type", "p5.48xlarge"}}}}}};
}

}  // namespace

int main(int argc, char** argv) {
  int pods = argc > 1 ? std::stoi(argv[1]) : 10000;
  long page_size = argc > 2 ? std::stol(argv[2]) : 200;
  testenv::ControlPlane plane(testenv::MakeTempDir("ncclguard-bench-informer"));
  testenv::ProcessResult started = plane.Start();
  if (started.exit_code != 0) {
    std::cerr << started.stderr_text;
    return 1;
  }
  testenv::TestKubeClient admin(plane.info());
  std::string ns = testenv::CreateTestNamespace(admin, "bench");
  kube::ClientOptions fast;
  fast.qps = 0;
  auto client =
      std::make_shared<kube::Client>(kube::LoadKubeConfigFile(plane.info().kubeconfig), fast);

  auto create_began = std::chrono::steady_clock::now();
  std::vector<std::thread> creators;
  const int threads = 8;
  for (int t = 0; t < threads; ++t) {
    creators.emplace_back([&, t] {
      for (int i = t; i < pods; i += threads) {
        client->Create(kube::resources::Pods().In(ns),
                       TrainingPod("w-" + std::to_string(i), i / 16));
      }
    });
  }
  for (auto& creator : creators) creator.join();
  double create_s =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - create_began).count();

  malloc_trim(0);
  long before = RssKiB();
  std::size_t heap_before = mallinfo2().uordblks;
  kube::InformerOptions options;
  options.resource = kube::resources::Pods();  // all namespaces, as the controller watches
  options.projection =
      kube::KeepFields({"/metadata/labels", "/metadata/ownerReferences", "/spec/nodeName",
                        "/status/phase", "/status/containerStatuses"});
  options.page_size = page_size;
  kube::Informer informer(client, options);
  informer.AddIndex("job", kube::IndexByLabel("training.kubeflow.org/job-name"));
  auto sync_began = std::chrono::steady_clock::now();
  informer.Start();
  if (!informer.WaitForSync(std::chrono::minutes(5)) ||
      informer.size() != static_cast<size_t>(pods)) {
    std::cerr << "informer did not sync " << pods << " pods (has " << informer.size() << ")\n";
    return 1;
  }
  double sync_s =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - sync_began).count();
  malloc_trim(0);
  long after = RssKiB();
  auto mib = [](long kib) { return static_cast<double>(kib) / 1024.0; };
  std::printf(
      "pods=%d create_s=%.1f sync_s=%.2f rss_before_mib=%.1f rss_after_mib=%.1f "
      "informer_mib=%.1f per_pod_bytes=%.0f\n",
      pods, create_s, sync_s, mib(before), mib(after), mib(after - before),
      mib(after - before) * 1024.0 * 1024.0 / pods);
  if (std::getenv("NCCLGUARD_BENCH_MALLOC_STATS")) {
    std::size_t in_use = mallinfo2().uordblks;
    auto gone = std::make_unique<kube::Informer>(client, options);
    informer.Stop();
    std::printf("heap in use: before informer %zu, synced %zu\n", heap_before, in_use);
  }
  informer.Stop();
  plane.Stop();
  return 0;
}
