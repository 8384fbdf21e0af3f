// Drives bench/scale.sh and bench/scale_faults.sh against a control plane with kwok
// (scripts/kwok.sh): simulated p5.48xlarge nodes, their NodeValidations as the probe writes them,
// and gated training jobs spread over opted-in namespaces scale-0..scale-<N-1>.
//   setup  <kubeconfig> <nodes> <namespaces>
//          the namespaces, kwok nodes (8 GPUs, 32 EFA) and a Pass NodeValidation for each
//   jobs   <kubeconfig> <namespaces> <first> <count> <pytorch every> <pod seconds> [operator]
//          gated jobs first..first+count-1 (every <pytorch every>th a PyTorchJob, the others
//          Indexed Jobs labelled ncclguard.io/managed=true; 16-64 pods of 8 GPUs each, 50 on
//          average); waits until each has its Service and is released, then creates the
//          released PyTorchJobs' pods (playing the training operator), unless `operator`: the
//          real training operator runs beside (scripts/training-operator.sh start-local) and
//          makes them. A Job's pods run <pod seconds> (kwok's pod-complete delay)
//   churn  <kubeconfig> <namespaces> <first> <seconds> <per second> <pod seconds>
//          for <seconds>: the oldest jobs deleted and new gated Indexed Jobs created from
//          <first> on, <per second> each; prints how many of the new ones were released
//   rack   <kubeconfig> <nodes> <jobs> <seconds>
//          the repaired rack: <nodes> p5e.48xlarge kwok nodes whose NodeValidations say Fail,
//          <jobs> held Indexed Jobs needing 16-64 of them; then the NodeValidations turn Pass
//          one by one over <seconds>; per job, whether its release came after the write that
//          completed its count in etcd's order (resourceVersions; one before it is a gate bug and
//          fails the run, naming the job), and the time from that write's start and from its
//          return to the release seen on a watch; per NodeValidation, from its write returning to
//          its Pass seen on a watch (the API server's delivery); per job, from that Pass seen to
//          its release seen (the controller, and one more delivery)
//   hold   <kubeconfig> <namespace> <count> <nodes>
//          <count> gated Indexed Jobs in <namespace> (opted in) needing 16-64 p5e.48xlarge nodes,
//          of which <nodes> pass: the jobs needing more stay held (the fault bench)
//   verify <kubeconfig> <namespace> <nodes>
//          every job of <namespace> has exactly one Service, is released iff it needs at most
//          <nodes> nodes, and no (job, reason) Event was written twice; prints PASS/FAIL lines
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <map>
#include <mutex>
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
constexpr const char* kRackInstanceType = "p5e.48xlarge";
constexpr const char* kRackNamespace = "rack";

double Since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
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
          } catch (const ncclguard::kube::ApiError& e) {
            if (e.http_status() == 409) break;  // created by an attempt whose answer was lost
            if (attempt == 5) {
              std::cerr << "scale_bench: " << e.what() << "\n";
              std::exit(1);
            }
          } catch (const std::exception& e) {
            if (attempt == 5) {
              std::cerr << "scale_bench: " << e.what() << "\n";
              std::exit(1);
            }
          }
          std::this_thread::sleep_for(std::chrono::milliseconds(200));
        }
      }
    });
  }
  for (auto& thread : threads) thread.join();
}

// Pods (= nodes, one 8-GPU pod a node) of job i: 16-64, 50 on average (u^0.42 skews the uniform
// draw upwards), so JOBS=2000 makes about 100,000 pods.
int PodsOf(int i) {
  const double u = (static_cast<double>((static_cast<long>(i) * 7919) % 1000) + 0.5) / 1000.0;
  return 16 + std::min(48, static_cast<int>(49 * std::pow(u, 0.42)));
}

std::string NamespaceOf(int i, int namespaces) { return "scale-" + std::to_string(i % namespaces); }
std::string JobName(int i) { return "j-" + std::to_string(i); }

Json Capacity() {
  return {{"cpu", "192"},
          {"memory", "2048Gi"},
          {"pods", "110"},
          {"nvidia.com/gpu", "8"},
          {"vpc.amazonaws.com/efa", "32"}};
}

Json NodeObject(const std::string& name, const std::string& instance_type) {
  return {{"apiVersion", "v1"},
          {"kind", "Node"},
          {"metadata",
           {{"name", name},
            {"annotations", {{"kwok.x-k8s.io/node", "fake"}}},
            {"labels",
             {{"node.kubernetes.io/instance-type", instance_type},
              {"kubernetes.io/hostname", name},
              {"type", "kwok"}}}}},
          {"status", {{"capacity", Capacity()}, {"allocatable", Capacity()}}}};
}

// The checks `ncclguard probe publish` writes for a p5 node (probes/checks/), all passing, or
// with efa-device-count failing (a rack whose EFA cabling is being repaired).
Json Checks(bool pass) {
  Json checks = Json::array();
  for (const char* id :
       {"gpu-count", "gpu-ecc", "gpu-row-remap", "gpu-p2p", "nvlink-status", "driver-version",
        "nccl-version", "efa-device-count", "efa-provider", "gpudirect-rdma", "pci-acs",
        "memlock-limit", "dev-shm-stale", "removeipc"}) {
    Json check = {{"id", id}, {"status", "Pass"}};
    if (!pass && std::string(id) == "efa-device-count") {
      check = {{"id", id},
               {"status", "Fail"},
               {"observed", "16 EFA devices"},
               {"expected", "32 EFA devices"},
               {"message", "16 of the node's 32 EFA devices are missing"}};
    }
    checks.push_back(check);
  }
  return checks;
}

Json ValidationStatus(const std::string& instance_type, bool pass) {
  return {{"status",
           {{"instanceType", instance_type},
            {"summary", pass ? "Pass" : "Fail"},
            {"lastProbeTime", "2026-12-02T14:00:00Z"},
            {"probeVersion", "scale-bench"},
            {"checks", Checks(pass)}}}};
}

void CreateNodeWithValidation(Client& client, const std::string& name,
                              const std::string& instance_type, bool pass) {
  try {
    client.Create(resources::Nodes(), NodeObject(name, instance_type));
  } catch (const ncclguard::kube::ApiError& e) {
    if (e.http_status() != 409) throw;
  }
  try {
    client.Create(resources::NodeValidations(), {{"apiVersion", "ncclguard.io/v1alpha1"},
                                                 {"kind", "NodeValidation"},
                                                 {"metadata", {{"name", name}}}});
  } catch (const ncclguard::kube::ApiError& e) {
    if (e.http_status() != 409) throw;
  }
  client.PatchStatus(resources::NodeValidations().Named(name), ncclguard::kube::PatchType::kMerge,
                     ValidationStatus(instance_type, pass));
}

void CreateNamespace(Client& client, const std::string& name) {
  try {
    client.Create(resources::Namespaces(),
                  {{"apiVersion", "v1"},
                   {"kind", "Namespace"},
                   {"metadata", {{"name", name}, {"labels", {{"ncclguard.io/enabled", "true"}}}}}});
  } catch (const ncclguard::kube::ApiError& e) {
    if (e.http_status() != 409) throw;
  }
}

Json PodSpec(const std::string& instance_type) {
  return {
      {"nodeSelector", {{"node.kubernetes.io/instance-type", instance_type}}},
      {"restartPolicy", "Never"},
      {"containers",
       {{{"name", "pytorch"},
         {"image", "registry.invalid/trainer:1"},
         {"command", {"torchrun", "train.py"}},
         {"env",
          {{{"name", "NCCL_DEBUG"}, {"value", "INFO"}},
           {{"name", "FI_PROVIDER"}, {"value", "efa"}},
           {{"name", "FI_EFA_USE_DEVICE_RDMA"}, {"value", "1"}}}},
         {"resources",
          {{"limits", {{"nvidia.com/gpu", 8}, {"vpc.amazonaws.com/efa", 32}, {"memory", "1000Gi"}}},
           {"requests",
            {{"nvidia.com/gpu", 8},
             {"vpc.amazonaws.com/efa", 32},
             {"memory", "1000Gi"},
             {"cpu", "96"}}}}}}}}};
}

Json IndexedJob(const std::string& name, int pods, const std::string& instance_type,
                int pod_seconds) {
  Json template_meta = Json::object();
  if (pod_seconds > 0) {
    template_meta = {
        {"annotations",
         {{"pod-complete.stage.kwok.x-k8s.io/delay", std::to_string(pod_seconds) + "s"},
          {"pod-complete.stage.kwok.x-k8s.io/jitter-delay",
           std::to_string(pod_seconds / 10 + 1) + "s"}}}};
  }
  return {{"apiVersion", "batch/v1"},
          {"kind", "Job"},
          {"metadata",
           {{"name", name},
            {"labels", {{"ncclguard.io/managed", "true"}}},
            {"annotations", {{"ncclguard.io/gate", "pending"}}}}},
          {"spec",
           {{"suspend", true},
            {"completionMode", "Indexed"},
            {"completions", pods},
            {"parallelism", pods},
            {"backoffLimit", 0},
            {"template", {{"metadata", template_meta}, {"spec", PodSpec(instance_type)}}}}}};
}

Json PyTorchJob(const std::string& name, int pods) {
  return {{"apiVersion", "kubeflow.org/v1"},
          {"kind", "PyTorchJob"},
          {"metadata", {{"name", name}, {"annotations", {{"ncclguard.io/gate", "pending"}}}}},
          {"spec",
           {{"runPolicy", {{"suspend", true}}},
            {"pytorchReplicaSpecs",
             {{"Master", {{"replicas", 1}, {"template", {{"spec", PodSpec(kInstanceType)}}}}},
              {"Worker",
               {{"replicas", pods - 1}, {"template", {{"spec", PodSpec(kInstanceType)}}}}}}}}}};
}

bool IsPyTorchJob(int i, int pytorch_every) {
  return pytorch_every > 0 && i % pytorch_every == pytorch_every - 1;
}

bool Released(const Json& job) {
  const Json annotations = job["metadata"].value("annotations", Json::object());
  if (annotations.value("ncclguard.io/gate", "") != "admitted") return false;
  if (job.value("kind", "") == "PyTorchJob") {
    return job["spec"].value("runPolicy", Json::object()).value("suspend", false) == false;
  }
  return job["spec"].value("suspend", false) == false;
}

std::string Key(const Json& object) {
  return object["metadata"].value("namespace", "") + "/" + object["metadata"].value("name", "");
}

// Watches `ref` (every namespace unless it names one) and calls `seen` with each object's
// key, the object and whether it was deleted; a watch that ends or fails is resumed, a 410
// relists.
class Watcher {
 public:
  Watcher(const ncclguard::kube::ClientConfig& config, ResourceRef ref,
          std::function<void(const std::string&, const Json&, bool deleted)> seen)
      : client_(config, {.qps = 0}), ref_(std::move(ref)), seen_(std::move(seen)) {
    Relist();
    thread_ = std::thread([this] { Run(); });
  }
  ~Watcher() {
    stop_.Stop();
    thread_.join();
  }
  Watcher(const Watcher&) = delete;
  Watcher& operator=(const Watcher&) = delete;

 private:
  void Relist() {
    const auto page = client_.List(ref_);
    for (const Json& item : page.items) seen_(Key(item), item, false);
    resource_version_ = page.resource_version;
  }
  void Run() {
    while (!stop_.stopped()) {
      try {
        ncclguard::kube::WatchOptions options;
        options.resource_version = resource_version_;
        client_.Watch(
            ref_, options,
            [&](ncclguard::kube::WatchEvent&& event) {
              resource_version_ =
                  event.object["metadata"].value("resourceVersion", resource_version_);
              if (event.type == ncclguard::kube::WatchEventType::kBookmark) return;
              seen_(Key(event.object), event.object,
                    event.type == ncclguard::kube::WatchEventType::kDeleted);
            },
            stop_);
      } catch (const ncclguard::kube::ApiError& e) {
        if (stop_.stopped()) break;
        if (e.http_status() == 410) {
          try {
            Relist();
          } catch (const std::exception&) {
            stop_.WaitFor(std::chrono::milliseconds(200));
          }
        } else {
          stop_.WaitFor(std::chrono::milliseconds(200));
        }
      } catch (const std::exception&) {
        stop_.WaitFor(std::chrono::milliseconds(200));
      }
    }
  }

  Client client_;
  ResourceRef ref_;
  std::function<void(const std::string&, const Json&, bool)> seen_;
  std::string resource_version_;
  ncclguard::kube::StopToken stop_;
  std::thread thread_;
};

// Where a resourceVersion stands in etcd's order. Kubernetes asks clients to treat
// resourceVersions as opaque; within one etcd they are its revisions, one global increasing count
// over every object, so this bench (against its own control plane, one etcd) compares them to
// tell which of two writes to different objects came first, without clocks. 0: none.
std::uint64_t EtcdOrder(const Json& object) {
  return std::strtoull(object["metadata"].value("resourceVersion", std::string("0")).c_str(),
                       nullptr, 10);
}

// When a key was first seen satisfying the predicate, and the resourceVersion of that state.
struct Seen {
  Clock::time_point at;
  std::uint64_t resource_version = 0;
};

// The set of keys whose latest state satisfies a predicate, fed by a Watcher.
class KeySet {
 public:
  void Update(const std::string& key, bool in, const Json* object = nullptr) {
    std::lock_guard lock(mutex_);
    if (in) {
      keys_.emplace(key, Seen{Clock::now(), object != nullptr ? EtcdOrder(*object) : 0});
    } else {
      keys_.erase(key);
    }
  }
  std::size_t Count() const {
    std::lock_guard lock(mutex_);
    return keys_.size();
  }
  bool Contains(const std::string& key) const {
    std::lock_guard lock(mutex_);
    return keys_.count(key) != 0;
  }
  std::map<std::string, Seen> Snapshot() const {
    std::lock_guard lock(mutex_);
    return keys_;
  }

 private:
  mutable std::mutex mutex_;
  std::map<std::string, Seen> keys_;  // key -> when first seen satisfying
};

bool ManagedService(const Json& service) {
  return service["metadata"]
             .value("labels", Json::object())
             .value("app.kubernetes.io/managed-by", "") == "ncclguard";
}

int Setup(Client& client, int nodes, int namespaces) {
  const auto start = Clock::now();
  for (int n = 0; n < namespaces; ++n) CreateNamespace(client, "scale-" + std::to_string(n));
  Parallel(nodes, [&](int i) {
    CreateNodeWithValidation(client, "scale-node-" + std::to_string(i), kInstanceType, true);
  });
  std::printf("{\"nodes\":%d,\"namespaces\":%d,\"setup_s\":%.1f}\n", nodes, namespaces,
              Since(start));
  return 0;
}

void CreatePyTorchJobPods(Client& client, const std::vector<Json>& jobs) {
  std::vector<std::pair<std::size_t, int>> pods;  // (job, replica index)
  for (std::size_t j = 0; j < jobs.size(); ++j) {
    const int workers = jobs[j]["spec"]["pytorchReplicaSpecs"]["Worker"].value("replicas", 0);
    for (int r = 0; r <= workers; ++r) pods.emplace_back(j, r);
  }
  Parallel(static_cast<int>(pods.size()), [&](int p) {
    const Json& job = jobs[pods[static_cast<std::size_t>(p)].first];
    const int replica = pods[static_cast<std::size_t>(p)].second;
    const std::string job_name = job["metadata"]["name"];
    const std::string type = replica == 0 ? "master" : "worker";
    const int index = replica == 0 ? 0 : replica - 1;
    client.Create(resources::Pods().In(job["metadata"]["namespace"]),
                  {{"apiVersion", "v1"},
                   {"kind", "Pod"},
                   {"metadata",
                    {{"name", job_name + "-" + type + "-" + std::to_string(index)},
                     {"labels",
                      {{"training.kubeflow.org/job-name", job_name},
                       {"training.kubeflow.org/replica-type", type},
                       {"training.kubeflow.org/replica-index", std::to_string(index)},
                       {"training.kubeflow.org/operator-name", "pytorchjob-controller"}}},
                     {"ownerReferences",
                      {{{"apiVersion", "kubeflow.org/v1"},
                        {"kind", "PyTorchJob"},
                        {"name", job_name},
                        {"uid", job["metadata"]["uid"]},
                        {"controller", true}}}}}},
                   {"spec", PodSpec(kInstanceType)}});
  });
}

int Jobs(Client& client, const ncclguard::kube::ClientConfig& config, int namespaces, int first,
         int count, int pytorch_every, int pod_seconds, bool operator_makes_pods) {
  KeySet served, released;
  std::mutex jobs_mutex;
  std::map<std::string, Json> pytorch_released;
  const auto on_job = [&](const std::string& key, const Json& job, bool deleted) {
    const bool is = !deleted && Released(job);
    released.Update(key, is);
    if (is && job.value("kind", "") == "PyTorchJob") {
      std::lock_guard lock(jobs_mutex);
      pytorch_released.emplace(key, job);
    }
  };
  Watcher service_watch(config, resources::Services(), [&](auto& key, auto& service, bool deleted) {
    served.Update(key, !deleted && ManagedService(service));
  });
  Watcher job_watch(config, resources::Jobs(), on_job);
  std::unique_ptr<Watcher> pytorch_watch;
  if (pytorch_every > 0) {
    pytorch_watch = std::make_unique<Watcher>(config, resources::PyTorchJobs(), on_job);
  }
  const std::size_t served_before = served.Count(), released_before = released.Count();

  const auto start = Clock::now();
  int pods = 0, pytorch_jobs = 0;
  for (int i = first; i < first + count; ++i) {
    pods += PodsOf(i);
    pytorch_jobs += IsPyTorchJob(i, pytorch_every) ? 1 : 0;
  }
  Parallel(count, [&](int k) {
    const int i = first + k;
    const std::string ns = NamespaceOf(i, namespaces);
    if (IsPyTorchJob(i, pytorch_every)) {
      client.Create(resources::PyTorchJobs().In(ns), PyTorchJob(JobName(i), PodsOf(i)));
    } else {
      client.Create(resources::Jobs().In(ns),
                    IndexedJob(JobName(i), PodsOf(i), kInstanceType, pod_seconds));
    }
  });
  const double created = Since(start);
  const auto target_served = served_before + static_cast<std::size_t>(count);
  const auto target_released = released_before + static_cast<std::size_t>(count);
  while ((served.Count() < target_served || released.Count() < target_released) &&
         Since(start) < 1800) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  const double done = Since(start);
  const bool timed_out = served.Count() < target_served || released.Count() < target_released;
  std::vector<Json> to_run;
  {
    std::lock_guard lock(jobs_mutex);
    for (auto& [key, job] : pytorch_released) to_run.push_back(job);
  }
  const auto pods_start = Clock::now();
  if (!operator_makes_pods) CreatePyTorchJobPods(client, to_run);
  std::printf(
      "{\"jobs\":%d,\"pytorchjobs\":%d,\"pods\":%d,\"created_s\":%.1f,"
      "\"served_and_released_s\":%.1f,\"timeout\":%s,\"services\":%zu,\"released\":%zu,"
      "\"pytorchjob_pods_by\":\"%s\",\"pytorchjob_pods_created_s\":%.1f}\n",
      count, pytorch_jobs, pods, created, done, timed_out ? "true" : "false",
      served.Count() - served_before, released.Count() - released_before,
      operator_makes_pods ? "training-operator" : "driver", Since(pods_start));
  if (timed_out) {
    std::cerr << "scale_bench: jobs: after 1800 s, " << served.Count() - served_before << " of "
              << count << " jobs served and " << released.Count() - released_before
              << " released\n";
  }
  return timed_out ? 1 : 0;
}

int Churn(Client& client, const ncclguard::kube::ClientConfig& config, int namespaces, int first,
          int seconds, double per_second, int pod_seconds) {
  // Jobs seen released, kept when deleted: once the churn has gone through the <first> jobs
  // before it (seconds * per second > first), it deletes the oldest of its own.
  KeySet released;
  Watcher job_watch(config, resources::Jobs(), [&](auto& key, auto& job, bool deleted) {
    if (!deleted && Released(job)) released.Update(key, true);
  });
  // The oldest jobs first: PyTorchJobs and Jobs alike, by number.
  int oldest = 0, next = first, deleted = 0, created = 0;
  const auto start = Clock::now();
  const auto period = std::chrono::duration<double>(1.0 / per_second);
  ncclguard::kube::DeleteOptions background;
  background.propagation_policy = "Background";
  for (int step = 0; Since(start) < seconds; ++step) {
    const auto due = start + std::chrono::duration_cast<Clock::duration>(period * step);
    std::this_thread::sleep_until(due);
    try {
      const std::string ns = NamespaceOf(oldest, namespaces);
      try {
        client.Delete(resources::Jobs().In(ns).Named(JobName(oldest)), background);
      } catch (const ncclguard::kube::ApiError& e) {
        if (e.http_status() != 404) throw;
        client.Delete(resources::PyTorchJobs().In(ns).Named(JobName(oldest)), background);
      }
      ++deleted;
    } catch (const ncclguard::kube::ApiError& e) {
      if (e.http_status() != 404) std::cerr << "scale_bench: churn delete: " << e.what() << "\n";
    }
    ++oldest;
    client.Create(resources::Jobs().In(NamespaceOf(next, namespaces)),
                  IndexedJob(JobName(next), PodsOf(next), kInstanceType, pod_seconds));
    ++next;
    ++created;
  }
  // The last ones a few seconds to be released.
  const auto settle = Clock::now();
  int new_released = 0;
  for (;;) {
    new_released = 0;
    for (int i = first; i < next; ++i) {
      if (released.Contains(NamespaceOf(i, namespaces) + "/" + JobName(i))) ++new_released;
    }
    if (new_released == created || Since(settle) > 30) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  std::printf("{\"churn_s\":%d,\"deleted\":%d,\"created\":%d,\"released\":%d,\"next\":%d}\n",
              seconds, deleted, created, new_released, next);
  if (new_released != created) {
    std::cerr << "scale_bench: churn: " << new_released << " of the " << created
              << " jobs created released within 30 s of the last\n";
  }
  return new_released == created ? 0 : 1;
}

double Percentile(std::vector<double> values, double p) {
  if (values.empty()) return 0;
  std::sort(values.begin(), values.end());
  const auto index = static_cast<std::size_t>(std::ceil(p * static_cast<double>(values.size())));
  return values[std::min(values.size() - 1, index == 0 ? 0 : index - 1)];
}

int RackNeeds(int j) { return 16 + (j * 37) % 49; }

double Round(double value, int digits) {
  const double scale = std::pow(10.0, digits);
  return std::round(value * scale) / scale;
}

// One NodeValidation's turn to Pass in the repaired rack.
struct RackWrite {
  Clock::time_point start, returned;
  std::uint64_t resource_version = 0;  // of the object the write returned
};

// The rack's releases judged against the writes that completed their counts. Early is decided by
// etcd's order alone: a job whose release has a lower resourceVersion than the write that made
// its count reach its need was released on fewer nodes than it needs (a gate bug). By the clocks,
// a release may be seen before that write's answer has returned to this process (the API server
// commits, then answers; a thread waits to run): that is within the write's round trip and counted
// apart, not early. Latencies are taken from the write's start and from its return.
struct ReleaseOrder {
  std::vector<double> from_start, from_return, round_trips, watch_lags, after_seen;
  std::vector<std::string> early_jobs, not_released, errors;
  int seen_before_write_returned = 0;
};

ReleaseOrder JudgeRackReleases(const std::map<std::string, Seen>& released,
                               const std::map<std::string, Seen>& passed,
                               const std::vector<RackWrite>& writes, int jobs) {
  const auto seconds = [](Clock::time_point from, Clock::time_point to) {
    return std::chrono::duration<double>(to - from).count();
  };
  ReleaseOrder order;
  for (int j = 0; j < jobs; ++j) {
    const std::string name = "rack-" + std::to_string(j);
    const auto release = released.find(std::string(kRackNamespace) + "/" + name);
    const int completing = RackNeeds(j) - 1;  // node k's Pass makes k + 1 nodes pass
    const std::string completing_node = "rack-node-" + std::to_string(completing);
    if (release == released.end()) {
      order.not_released.push_back(name);
      order.errors.push_back("job " + std::string(kRackNamespace) + "/" + name +
                             " not released within 60 s of the last write (needs " +
                             std::to_string(RackNeeds(j)) + " nodes)");
      continue;
    }
    const RackWrite& write = writes[static_cast<std::size_t>(completing)];
    if (release->second.resource_version < write.resource_version) {
      order.early_jobs.push_back(name);
      order.errors.push_back(
          "job " + std::string(kRackNamespace) + "/" + name + " released at resourceVersion " +
          std::to_string(release->second.resource_version) + ", before the write that completed " +
          "its count of " + std::to_string(RackNeeds(j)) + " nodes (" + completing_node +
          "'s Pass, resourceVersion " + std::to_string(write.resource_version) +
          "): released early, a gate bug");
    }
    order.from_start.push_back(seconds(write.start, release->second.at));
    order.from_return.push_back(seconds(write.returned, release->second.at));
    if (release->second.at < write.returned) ++order.seen_before_write_returned;
    // From this process's watch seeing the completing Pass: the controller's share, plus one
    // watch delivery of the release.
    const auto pass = passed.find("/" + completing_node);
    if (pass != passed.end())
      order.after_seen.push_back(seconds(pass->second.at, release->second.at));
  }
  for (std::size_t k = 0; k < writes.size(); ++k) {
    order.round_trips.push_back(seconds(writes[k].start, writes[k].returned));
    const auto pass = passed.find("/rack-node-" + std::to_string(k));
    if (pass != passed.end())
      order.watch_lags.push_back(seconds(writes[k].returned, pass->second.at));
  }
  return order;
}

int Rack(Client& client, const ncclguard::kube::ClientConfig& config, int nodes, int jobs,
         int seconds) {
  CreateNamespace(client, kRackNamespace);
  Parallel(nodes, [&](int i) {
    CreateNodeWithValidation(client, "rack-node-" + std::to_string(i), kRackInstanceType, false);
  });
  KeySet served, released;
  Watcher service_watch(config, resources::Services().In(kRackNamespace),
                        [&](auto& key, auto& service, bool deleted) {
                          served.Update(key, !deleted && ManagedService(service));
                        });
  // A watch delivers every version of a job in etcd's order, so the first released version seen
  // is the release's own write (one patch sets suspend=false and the gate annotation); after a
  // relist (410) it may be a later version, which can only make a release look later, not early.
  Watcher job_watch(config, resources::Jobs().In(kRackNamespace),
                    [&](auto& key, auto& job, bool deleted) {
                      released.Update(key, !deleted && Released(job), &job);
                    });
  // When a watch (this one, like the controller's) sees a NodeValidation's Pass: the API
  // server's delivery, which the controller's watch waits for too before it can count the node;
  // the release is seen another watch delivery later.
  KeySet passed;
  Watcher validation_watch(
      config, resources::NodeValidations(), [&](auto& key, auto& validation, bool deleted) {
        passed.Update(
            key, !deleted && key.starts_with("/rack-node-") &&
                     validation.value("status", Json::object()).value("summary", "") == "Pass");
      });
  Parallel(jobs, [&](int j) {
    client.Create(resources::Jobs().In(kRackNamespace),
                  IndexedJob("rack-" + std::to_string(j), RackNeeds(j), kRackInstanceType, 0));
  });
  // Held and served: the controller has seen every job.
  const auto wait_start = Clock::now();
  while (served.Count() < static_cast<std::size_t>(jobs) && Since(wait_start) < 300) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  if (released.Count() != 0) {
    std::printf("{\"error\":\"%zu rack jobs released before any node passed\"}\n",
                released.Count());
    std::cerr << "scale_bench: rack: " << released.Count()
              << " jobs released before any rack node passed (a gate bug)\n";
    return 1;
  }
  std::this_thread::sleep_for(std::chrono::seconds(2));
  // The repair: node k's NodeValidation turns Pass at k * seconds / nodes; each write's start,
  // return and resourceVersion (its place in etcd's order).
  std::vector<RackWrite> writes(static_cast<std::size_t>(nodes));
  const auto start = Clock::now();
  for (int k = 0; k < nodes; ++k) {
    std::this_thread::sleep_until(
        start + std::chrono::duration_cast<Clock::duration>(
                    std::chrono::duration<double>(static_cast<double>(seconds) * k / nodes)));
    RackWrite& write = writes[static_cast<std::size_t>(k)];
    write.start = Clock::now();
    const Json validation = client.PatchStatus(
        resources::NodeValidations().Named("rack-node-" + std::to_string(k)),
        ncclguard::kube::PatchType::kMerge, ValidationStatus(kRackInstanceType, true));
    write.returned = Clock::now();
    write.resource_version = EtcdOrder(validation);
  }
  const auto end = Clock::now();
  while (released.Count() < static_cast<std::size_t>(jobs) && Since(end) < 60) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  const ReleaseOrder order =
      JudgeRackReleases(released.Snapshot(), passed.Snapshot(), writes, jobs);
  for (const std::string& line : order.errors) std::cerr << "scale_bench: rack: " << line << "\n";
  if (!order.errors.empty()) {
    // Last: scale.sh takes the driver's last line for why the run failed.
    const auto names = [](const std::vector<std::string>& jobs_named) {
      std::string joined;
      for (const std::string& name : jobs_named) joined += (joined.empty() ? "" : " ") + name;
      return joined;
    };
    std::cerr << "scale_bench: rack: " << order.early_jobs.size() << " of " << jobs
              << " jobs released before the write that completed their count (a gate bug)"
              << (order.early_jobs.empty() ? "" : ": " + names(order.early_jobs)) << "; "
              << order.not_released.size() << " not released"
              << (order.not_released.empty() ? "" : ": " + names(order.not_released)) << "\n";
  }
  Json result = {{"rack_nodes", nodes},
                 {"rack_jobs", jobs},
                 {"released", order.from_return.size()},
                 {"released_early", order.early_jobs.size()},
                 {"early_jobs", order.early_jobs},
                 {"not_released", order.not_released},
                 {"seen_before_write_returned", order.seen_before_write_returned},
                 {"writes_s", Round(std::chrono::duration<double>(end - start).count(), 1)}};
  const auto percentiles = [&](const std::string& prefix, const std::vector<double>& values,
                               bool max) {
    result[prefix + "p50_s"] = Round(Percentile(values, 0.5), 3);
    result[prefix + "p99_s"] = Round(Percentile(values, 0.99), 3);
    if (max) result[prefix + "max_s"] = Round(Percentile(values, 1.0), 3);
  };
  percentiles("", order.from_return, true);
  percentiles("from_start_", order.from_start, true);
  percentiles("write_round_trip_", order.round_trips, false);
  percentiles("validation_watch_lag_", order.watch_lags, false);
  percentiles("after_pass_seen_", order.after_seen, false);
  std::printf("%s\n", result.dump().c_str());
  return order.errors.empty() ? 0 : 1;
}

int Hold(Client& client, const std::string& ns, int count, int nodes) {
  CreateNamespace(client, ns);
  Parallel(64, [&](int i) {
    CreateNodeWithValidation(client, ns + "-node-" + std::to_string(i), kRackInstanceType,
                             i < nodes);
  });
  Parallel(count, [&](int j) {
    client.Create(resources::Jobs().In(ns),
                  IndexedJob("held-" + std::to_string(j), RackNeeds(j), kRackInstanceType, 0));
  });
  std::printf("{\"held_jobs\":%d,\"passing_nodes\":%d}\n", count, nodes);
  return 0;
}

int Verify(Client& client, const std::string& ns, int nodes) {
  const auto jobs = client.List(resources::Jobs().In(ns)).items;
  const auto services = client.List(resources::Services().In(ns)).items;
  const auto events = client.List(resources::Events().In(ns)).items;
  std::map<std::string, int> services_of;  // owner uid -> Services
  for (const Json& service : services) {
    for (const Json& owner : service["metadata"].value("ownerReferences", Json::array())) {
      ++services_of[owner.value("uid", "")];
    }
  }
  std::map<std::string, int> events_of;  // regarding uid + reason + note -> Events
  for (const Json& event : events) {
    if (event.value("reportingController", "").find("ncclguard") == std::string::npos) continue;
    ++events_of[event["regarding"].value("uid", "") + "|" + event.value("reason", "") + "|" +
                event.value("note", "")];
  }
  int lost = 0, wrong_gate = 0, duplicate_services = 0, duplicate_events = 0;
  for (const Json& job : jobs) {
    const std::string name = job["metadata"]["name"];
    const std::string uid = job["metadata"]["uid"];
    const int index = std::atoi(name.substr(name.find('-') + 1).c_str());
    const int services_count = services_of[uid];
    if (services_count == 0) ++lost;
    if (services_count > 1) ++duplicate_services;
    const bool should_release = RackNeeds(index) <= nodes;
    const bool released = Released(job);
    const std::string gate =
        job["metadata"].value("annotations", Json::object()).value("ncclguard.io/gate", "");
    if (released != should_release || (!released && gate != "pending")) ++wrong_gate;
  }
  for (const auto& [key, count] : events_of) duplicate_events += count > 1 ? count - 1 : 0;
  std::printf("%s nothing lost: %zu jobs, %d without their Service\n", lost ? "FAIL" : "PASS",
              jobs.size(), lost);
  std::printf("%s gate states: %d jobs released or held against their nodes (%d pass)\n",
              wrong_gate ? "FAIL" : "PASS", wrong_gate, nodes);
  std::printf("%s no duplicate Service: %d extra\n", duplicate_services ? "FAIL" : "PASS",
              duplicate_services);
  std::printf("%s no duplicate Event: %d extra of %zu ncclguard Events\n",
              duplicate_events ? "FAIL" : "PASS", duplicate_events, events.size());
  return lost || wrong_gate || duplicate_services || duplicate_events ? 1 : 0;
}

}  // namespace

int main(int argc, char** argv) {
  const std::vector<std::string> args(argv + 1, argv + argc);
  const auto usage = [] {
    std::cerr << "usage: ncclguard_scale_bench setup|jobs|churn|rack|hold|verify <kubeconfig> ...\n"
                 "(see bench/scale/scale_bench.cpp)\n";
    return 2;
  };
  if (args.size() < 2) return usage();
  const auto n = [&](std::size_t i) { return std::atoi(args.at(i).c_str()); };
  const ncclguard::kube::ClientConfig config = ncclguard::kube::LoadKubeConfigFile(args[1]);
  Client client(config, {.qps = 0});  // the bench loads the API server as hard as it takes
  try {
    const std::string& command = args[0];
    if (command == "setup" && args.size() == 4) return Setup(client, n(2), n(3));
    if (command == "jobs" && (args.size() == 7 || (args.size() == 8 && args[7] == "operator")))
      return Jobs(client, config, n(2), n(3), n(4), n(5), n(6), args.size() == 8);
    if (command == "churn" && args.size() == 7)
      return Churn(client, config, n(2), n(3), n(4), std::atof(args[5].c_str()), n(6));
    if (command == "rack" && args.size() == 5) return Rack(client, config, n(2), n(3), n(4));
    if (command == "hold" && args.size() == 5) return Hold(client, args[2], n(3), n(4));
    if (command == "verify" && args.size() == 4) return Verify(client, args[2], n(3));
  } catch (const std::exception& e) {
    std::cerr << "scale_bench: " << e.what() << "\n";
    return 1;
  }
  return usage();
}
