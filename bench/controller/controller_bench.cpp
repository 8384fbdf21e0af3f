// Drives bench/controller.sh against a control plane:
//   setup <kubeconfig> <namespace> <nodes>   opted-in namespace, validated p5.48xlarge nodes
//   jobs  <kubeconfig> <namespace> <count>   gated PyTorchJobs created at once; prints the seconds
//                                            until every one has its Service and is released
//   pods  <kubeconfig> <namespace> <count>   pods spread over the jobs (as the training operator
//                                            would make them); prints the seconds taken
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <iostream>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "kube/client.h"
#include "kube/config.h"

namespace {

using ncclguard::core::Json;
using ncclguard::kube::Client;
using ncclguard::kube::ResourceRef;
namespace resources = ncclguard::kube::resources;
using Clock = std::chrono::steady_clock;

constexpr int kThreads = 16;
constexpr const char* kInstanceType = "p5.48xlarge";

Json PodSpec() {
  return {{"nodeSelector", {{"node.kubernetes.io/instance-type", kInstanceType}}},
          {"containers",
           {{{"name", "pytorch"},
             {"image", "registry.invalid/trainer:1"},
             {"command", {"torchrun", "--nnodes=2", "train.py"}},
             {"env",
              {{{"name", "NCCL_DEBUG"}, {"value", "INFO"}},
               {{"name", "FI_PROVIDER"}, {"value", "efa"}},
               {{"name", "NCCL_SOCKET_IFNAME"}, {"value", "eth0"}}}},
             {"resources",
              {{"limits",
                {{"nvidia.com/gpu", 8}, {"vpc.amazonaws.com/efa", 32}, {"memory", "1000Gi"}}}}}}}}};
}

template <typename Work>
void Parallel(int count, Work work) {
  std::atomic<int> next{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&] {
      for (int i = next++; i < count; i = next++) {
        for (int attempt = 0;; ++attempt) {
          try {
            work(i);
            break;
          } catch (const std::exception& e) {
            if (attempt == 5) {
              std::cerr << "controller_bench: " << e.what() << "\n";
              std::exit(1);
            }
            std::this_thread::sleep_for(std::chrono::milliseconds(200));
          }
        }
      }
    });
  }
  for (auto& thread : threads) thread.join();
}

std::string JobName(int i) { return "job-" + std::to_string(i); }

// `checks`: every NodeValidation's status.checks (a probe report's "checks"); empty: none.
int Setup(Client& client, const std::string& ns, int nodes, const Json& checks) {
  client.Create(resources::Namespaces(),
                {{"apiVersion", "v1"},
                 {"kind", "Namespace"},
                 {"metadata", {{"name", ns}, {"labels", {{"ncclguard.io/enabled", "true"}}}}}});
  const ResourceRef validations{"ncclguard.io", "v1alpha1", "nodevalidations", false, "", ""};
  for (int i = 0; i < nodes; ++i) {
    const std::string name = "node-" + std::to_string(i);
    client.Create(
        resources::Nodes(),
        {{"apiVersion", "v1"},
         {"kind", "Node"},
         {"metadata",
          {{"name", name}, {"labels", {{"node.kubernetes.io/instance-type", kInstanceType}}}}}});
    client.Create(validations, {{"apiVersion", "ncclguard.io/v1alpha1"},
                                {"kind", "NodeValidation"},
                                {"metadata", {{"name", name}}}});
    client.PatchStatus(validations.Named(name), ncclguard::kube::PatchType::kMerge,
                       {{"status",
                         {{"instanceType", kInstanceType},
                          {"summary", "Pass"},
                          {"lastProbeTime", "2026-12-02T14:00:00Z"},
                          {"probeVersion", "bench"},
                          {"checks", checks}}}});
  }
  return 0;
}

// Counts the objects a watch reports satisfying `done`, from `resource_version` on, until
// `target` are satisfied at once or `stop` fires. Watches, not polling lists: a LIST of 1,000
// PyTorchJobs every 200 ms would cost the API server more CPU than the controller's writes.
class Tally {
 public:
  Tally(Client& client, ResourceRef ref, std::string resource_version,
        std::function<bool(const Json&)> done)
      : client_(client),
        ref_(std::move(ref)),
        resource_version_(std::move(resource_version)),
        done_(std::move(done)) {}

  void Run(const ncclguard::kube::StopToken& stop) {
    while (!stop.stopped()) {
      try {
        ncclguard::kube::WatchOptions options;
        options.resource_version = resource_version_;
        client_.Watch(
            ref_, options,
            [&](ncclguard::kube::WatchEvent&& event) {
              const Json& meta = event.object["metadata"];
              resource_version_ = meta.value("resourceVersion", resource_version_);
              if (event.type == ncclguard::kube::WatchEventType::kBookmark) return;
              const std::string name = meta.value("name", "");
              std::lock_guard lock(mutex_);
              if (event.type != ncclguard::kube::WatchEventType::kDeleted && done_(event.object)) {
                satisfied_.insert(name);
              } else {
                satisfied_.erase(name);
              }
            },
            stop);
      } catch (const std::exception& e) {
        std::cerr << "controller_bench: watch " << ref_.resource << ": " << e.what() << "\n";
        stop.WaitFor(std::chrono::milliseconds(200));
      }
    }
  }

  std::size_t count() const {
    std::lock_guard lock(mutex_);
    return satisfied_.size();
  }

 private:
  Client& client_;
  ResourceRef ref_;
  std::string resource_version_;
  std::function<bool(const Json&)> done_;
  mutable std::mutex mutex_;
  std::set<std::string> satisfied_;
};

int Jobs(Client& client, const ncclguard::kube::ClientConfig& config, const std::string& ns,
         int count) {
  const ResourceRef jobs = resources::PyTorchJobs().In(ns);
  const ResourceRef services = resources::Services().In(ns);
  Client service_watch_client(config, {.qps = 0});
  Client job_watch_client(config, {.qps = 0});
  Tally served(service_watch_client, services, client.ListOnePage(services).resource_version,
               [](const Json& service) {
                 return service["metadata"]
                            .value("labels", Json::object())
                            .value("app.kubernetes.io/managed-by", "") == "ncclguard";
               });
  Tally released(job_watch_client, jobs, client.ListOnePage(jobs).resource_version,
                 [](const Json& job) {
                   const Json annotations = job["metadata"].value("annotations", Json::object());
                   return annotations.value("ncclguard.io/gate", "") == "admitted" &&
                          job["spec"]["runPolicy"].value("suspend", true) == false;
                 });
  const ncclguard::kube::StopToken stop;
  std::thread served_thread([&] { served.Run(stop); });
  std::thread released_thread([&] { released.Run(stop); });

  const auto start = Clock::now();
  Parallel(count, [&](int i) {
    client.Create(
        jobs,
        {{"apiVersion", "kubeflow.org/v1"},
         {"kind", "PyTorchJob"},
         {"metadata", {{"name", JobName(i)}, {"annotations", {{"ncclguard.io/gate", "pending"}}}}},
         {"spec",
          {{"runPolicy", {{"suspend", true}}},
           {"pytorchReplicaSpecs",
            {{"Master", {{"replicas", 1}, {"template", {{"spec", PodSpec()}}}}},
             {"Worker", {{"replicas", 1}, {"template", {{"spec", PodSpec()}}}}}}}}}});
  });
  const double created = std::chrono::duration<double>(Clock::now() - start).count();
  const auto target = static_cast<std::size_t>(count);
  int rc = 1;
  for (;;) {
    const double elapsed = std::chrono::duration<double>(Clock::now() - start).count();
    if (served.count() >= target && released.count() >= target) {
      std::printf("{\"jobs\":%d,\"created_s\":%.2f,\"served_and_released_s\":%.2f}\n", count,
                  created, elapsed);
      rc = 0;
      break;
    }
    if (elapsed > 300) {
      std::printf("{\"jobs\":%d,\"timeout\":true,\"services\":%zu,\"released\":%zu}\n", count,
                  served.count(), released.count());
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  stop.Stop();
  served_thread.join();
  released_thread.join();
  return rc;
}

int Pods(Client& client, const std::string& ns, int count) {
  const auto jobs = client.List(resources::PyTorchJobs().In(ns)).items;
  if (jobs.empty()) {
    std::cerr << "controller_bench: no jobs in " << ns << "\n";
    return 1;
  }
  const ResourceRef pods = resources::Pods().In(ns);
  const auto start = Clock::now();
  Parallel(count, [&](int i) {
    const Json& job = jobs[static_cast<std::size_t>(i) % jobs.size()];
    const std::string job_name = job["metadata"]["name"];
    const std::string name = job_name + "-worker-" + std::to_string(i / jobs.size());
    client.Create(pods, {{"apiVersion", "v1"},
                         {"kind", "Pod"},
                         {"metadata",
                          {{"name", name},
                           {"labels",
                            {{"training.kubeflow.org/job-name", job_name},
                             {"training.kubeflow.org/replica-type", "worker"},
                             {"training.kubeflow.org/operator-name", "pytorchjob-controller"}}},
                           {"ownerReferences",
                            {{{"apiVersion", "kubeflow.org/v1"},
                              {"kind", "PyTorchJob"},
                              {"name", job_name},
                              {"uid", job["metadata"]["uid"]},
                              {"controller", true}}}}}},
                         {"spec", PodSpec()}});
  });
  std::printf("{\"pods\":%d,\"created_s\":%.2f}\n", count,
              std::chrono::duration<double>(Clock::now() - start).count());
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 5 && !(argc == 6 && std::string(argv[1]) == "setup")) {
    std::cerr << "usage: ncclguard_controller_bench setup|jobs|pods <kubeconfig> <namespace> <n>\n"
                 "       ncclguard_controller_bench setup <kubeconfig> <namespace> <n> "
                 "<probe report JSON: its checks go to every NodeValidation>\n";
    return 2;
  }
  const std::string command = argv[1];
  ncclguard::kube::ClientOptions options;
  options.qps = 0;  // the benchmark loads the API server as hard as it takes
  const ncclguard::kube::ClientConfig config = ncclguard::kube::LoadKubeConfigFile(argv[2]);
  Client client(config, options);
  const int n = std::atoi(argv[4]);
  try {
    if (command == "setup") {
      Json checks = Json::array();
      if (argc == 6) {
        std::ifstream report(argv[5]);
        checks = Json::parse(report).at("checks");
      }
      return Setup(client, argv[3], n, checks);
    }
    if (command == "jobs") return Jobs(client, config, argv[3], n);
    if (command == "pods") return Pods(client, argv[3], n);
  } catch (const std::exception& e) {
    std::cerr << "controller_bench: " << e.what() << "\n";
    return 1;
  }
  std::cerr << "controller_bench: unknown command " << command << "\n";
  return 2;
}
