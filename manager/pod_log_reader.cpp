#include "manager/pod_log_reader.h"

#include <algorithm>
#include <unordered_map>

#include "controllers/labels.h"
#include "controllers/training_job_reconciler.h"
#include "log/log.h"

namespace ncclguard::manager {
namespace {

std::string Key(std::string_view namespace_, std::string_view pod) {
  return std::string(namespace_) + "/" + std::string(pod);
}

// Path segments and query values here are Kubernetes names: DNS labels, no escaping needed.
std::string LogPath(const std::string& namespace_, const std::string& pod,
                    const std::string& container) {
  return "/api/v1/namespaces/" + namespace_ + "/pods/" + pod + "/log?container=" + container +
         "&tailLines=" + std::to_string(controllers::kPodLogTailLines) +
         "&limitBytes=" + std::to_string(controllers::kPodLogLimitBytes);
}

}  // namespace

std::vector<controllers::PodLogDigest> PodLogStore::Get(std::string_view namespace_,
                                                        std::string_view pod) const {
  std::lock_guard lock(mutex_);
  const auto it = digests_.find(Key(namespace_, pod));
  return it == digests_.end() ? std::vector<controllers::PodLogDigest>{} : it->second;
}

void PodLogStore::Put(const std::string& pod_key, controllers::PodLogDigest digest) {
  std::lock_guard lock(mutex_);
  auto& list = digests_[pod_key];
  for (auto& existing : list) {
    if (existing.container == digest.container) {
      existing = controllers::MergeDigests(existing, std::move(digest));
      return;
    }
  }
  list.push_back(std::move(digest));
}

void PodLogStore::Retain(const std::function<bool(const std::string& pod_key)>& live) {
  std::lock_guard lock(mutex_);
  std::erase_if(digests_, [&](const auto& entry) { return !live(entry.first); });
}

std::size_t PodLogStore::Size() const {
  std::lock_guard lock(mutex_);
  return digests_.size();
}

PodLogSource KubePodLogSource(std::shared_ptr<kube::Client> client) {
  return [client](const std::string& namespace_, const std::string& pod,
                  const std::string& container) -> std::optional<std::string> {
    kube::HttpRequest request;
    request.path = LogPath(namespace_, pod, container);
    request.timeout = std::chrono::milliseconds(10000);
    kube::HttpResponse response;
    try {
      response = client->Send(std::move(request));
    } catch (const kube::ApiError& error) {
      // No answer (the API server away or slower than the timeout): not read this time. Thrown
      // on, it ended the reader's thread and with it the controller process (std::terminate).
      log::Debug("pod log not read", {{"namespace", namespace_},
                                      {"pod", pod},
                                      {"container", container},
                                      {"error", error.what()}});
      return std::nullopt;
    }
    if (response.status != 200) return std::nullopt;
    // limitBytes bounds it already; a server that ignores it is cut here.
    if (response.body.size() > static_cast<std::size_t>(controllers::kPodLogLimitBytes)) {
      response.body.erase(0, response.body.size() - controllers::kPodLogLimitBytes);
    }
    return std::move(response.body);
  };
}

std::vector<controllers::JobKey> PodLogReader::Tick(
    const Pods& pods, const Live& live,
    const std::function<bool(const controllers::JobKey&)>& managed, controllers::Timestamp now) {
  std::vector<controllers::JobKey> touched;
  // Whether each job is managed, asked once a pass: a job has up to hundreds of pods, and the
  // answer reads the job from its cache.
  std::unordered_map<std::string, bool> managed_jobs;
  pods([&](const core::Json& pod) {
    std::vector<controllers::JobKey> jobs = controllers::JobKeysForPod(pod);
    std::erase_if(jobs, [&](const controllers::JobKey& job) {
      const auto [known, added] = managed_jobs.try_emplace(job.ToString(), false);
      if (added) known->second = managed(job);
      return !known->second;
    });
    if (jobs.empty()) return true;
    const std::string ns = controllers::Meta(pod, "namespace");
    const std::string name = controllers::Meta(pod, "name");
    const std::string key = Key(ns, name);
    const std::string phase = controllers::PodPhase(pod);
    if (!planner_.Due(key, phase, now)) return true;
    if (!planner_.TakeToken(now)) {
      Count(LogRead::kRateLimited);  // this pod and the rest wait for the next pass
      return false;
    }
    planner_.Read(key, phase, now);
    bool read = false;
    for (const controllers::LogContainer& c : controllers::LogContainers(pod)) {
      const std::optional<std::string> tail = source_(ns, name, c.name);
      ++reads_;
      Count(tail ? LogRead::kRead : LogRead::kError);
      if (!tail) continue;
      store_.Put(key, controllers::DigestPodLog(name + " container " + c.name, c.name, phase,
                                                c.efa_requested, *tail));
      read = true;
    }
    if (read) touched.insert(touched.end(), jobs.begin(), jobs.end());
    return true;
  });
  store_.Retain(live);
  planner_.Retain(live);
  return touched;
}

}  // namespace ncclguard::manager
