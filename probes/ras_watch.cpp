#include "probes/ras_watch.h"

#include <algorithm>
#include <charconv>
#include <filesystem>
#include <fstream>
#include <set>
#include <utility>

#include "core/contract.h"
#include "log/log.h"
#include "probes/publisher.h"
#include "probes/report.h"

namespace ncclguard::probes {
namespace {

// A process's /proc/PID/cgroup is a few hundred bytes; more is not a cgroup file.
constexpr std::size_t kMaxCgroupBytes = 16 * 1024;

std::string Str(const core::Json& object, std::string_view key) {
  if (!object.is_object()) return "";
  const auto it = object.find(key);
  return it != object.end() && it->is_string() ? it->get<std::string>() : "";
}

const core::Json& Member(const core::Json& object, std::string_view key) {
  static const core::Json kNull;
  if (!object.is_object()) return kNull;
  const auto it = object.find(key);
  return it != object.end() ? *it : kNull;
}

// The earliest start of the pod's running containers; nullopt when none runs.
std::optional<std::chrono::system_clock::time_point> RunningSince(const core::Json& pod) {
  std::optional<std::chrono::system_clock::time_point> since;
  const core::Json& statuses = Member(Member(pod, "status"), "containerStatuses");
  if (!statuses.is_array()) return since;
  for (const core::Json& status : statuses) {
    const std::string started = Str(Member(Member(status, "state"), "running"), "startedAt");
    if (auto at = ParseRfc3339(started); at && (!since || *at < *since)) since = at;
  }
  return since;
}

std::string Seconds(std::chrono::milliseconds duration) {
  return std::to_string(duration.count() / 1000) + "s";
}

std::string ReadBounded(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::string text(kMaxCgroupBytes, '\0');
  in.read(text.data(), static_cast<std::streamsize>(text.size()));
  text.resize(static_cast<std::size_t>(std::max<std::streamsize>(in.gcount(), 0)));
  return text;
}

}  // namespace

KubeRasDirectory::KubeRasDirectory(std::shared_ptr<kube::Client> client, std::string node_name,
                                   std::string field_manager)
    : client_(std::move(client)),
      node_name_(std::move(node_name)),
      field_manager_(std::move(field_manager)) {}

std::vector<core::Json> KubeRasDirectory::ReaderPods() {
  kube::ListOptions options;
  options.resource_version = "0";  // the watch cache
  options.label_selector = std::string(core::kRasReaderLabel) + "=true";
  options.field_selector = "spec.nodeName=" + node_name_ + ",status.phase=Running";
  kube::ListPage page = client_->List(kube::resources::Pods(), options);
  std::vector<core::Json> pods;
  pods.reserve(page.items.size());
  for (core::Json& item : page.items) pods.push_back(std::move(item));
  return pods;
}

void KubeRasDirectory::Publish(const core::Json& ras) {
  client_->PatchStatus(NodeValidations().Named(node_name_), kube::PatchType::kMerge,
                       core::Json{{"status", {{"ras", ras}}}},
                       kube::WriteOptions{field_manager_, false});
}

RasEndpoint RasEndpointOf(const core::Json& pod) {
  RasEndpoint endpoint;
  const core::Json& containers = Member(Member(pod, "spec"), "containers");
  if (!containers.is_array()) return endpoint;
  for (const core::Json& container : containers) {
    const core::Json& env = Member(container, "env");
    if (!env.is_array()) continue;
    for (const core::Json& var : env) {
      const std::string name = Str(var, "name");
      const std::string value = Str(var, "value");
      if (name == "NCCL_RAS_ENABLE" && value == "0") endpoint.disabled = true;
      if (name != "NCCL_RAS_ADDR" || value.empty()) continue;
      const auto address = ParseRasAddress(value);
      if (!address) continue;
      const auto& [host, port] = *address;
      endpoint.port = port;
      if (!host.empty() && host != "localhost") endpoint.host = host;
    }
  }
  return endpoint;
}

namespace {

// What names a pod in a process's cgroup path: "pod<uid>" (cgroupfs) and systemd's "pod<uid with
// _ for ->".
std::pair<std::string, std::string> CgroupNeedles(const std::string& uid) {
  std::string systemd = uid;
  std::replace(systemd.begin(), systemd.end(), '-', '_');
  return {"pod" + uid, "pod" + systemd};
}

}  // namespace

bool StillPodProcess(const std::string& netns, const std::string& uid) {
  const std::filesystem::path process = std::filesystem::path(netns).parent_path().parent_path();
  const std::string cgroup = ReadBounded(process / "cgroup");
  const auto [plain, systemd] = CgroupNeedles(uid);
  return cgroup.find(plain) != std::string::npos || cgroup.find(systemd) != std::string::npos;
}

std::map<std::string, std::string> PodNetworkNamespaces(const std::string& proc_root,
                                                        const std::vector<std::string>& uids) {
  std::map<std::string, std::string> found;
  if (uids.empty()) return found;
  std::vector<std::pair<std::string, std::string>> needles;
  for (const std::string& uid : uids) {
    auto [plain, systemd] = CgroupNeedles(uid);
    needles.emplace_back(std::move(plain), uid);
    needles.emplace_back(std::move(systemd), uid);
  }
  std::error_code error;
  for (std::filesystem::directory_iterator it(proc_root, error), end; !error && it != end;
       it.increment(error)) {
    const std::string pid = it->path().filename().string();
    if (pid.empty() ||
        !std::all_of(pid.begin(), pid.end(), [](char c) { return c >= '0' && c <= '9'; })) {
      continue;
    }
    const std::string cgroup = ReadBounded(it->path() / "cgroup");
    for (const auto& [needle, uid] : needles) {
      if (found.contains(uid) || cgroup.find(needle) == std::string::npos) continue;
      found.emplace(uid, (it->path() / "ns" / "net").string());
    }
    if (found.size() == uids.size()) break;
  }
  return found;
}

bool RasQuerySafeDuringInit(const std::string& version) {
  int parts[3] = {0, 0, 0};
  std::string_view rest = version;
  for (int& part : parts) {
    const auto [end, error] = std::from_chars(rest.data(), rest.data() + rest.size(), part);
    if (error != std::errc()) return false;
    rest.remove_prefix(static_cast<std::size_t>(end - rest.data()));
    if (!rest.empty() && rest.front() == '.') rest.remove_prefix(1);
  }
  return std::tuple(parts[0], parts[1], parts[2]) >= std::tuple(2, 27, 3);
}

core::Json RasPodJson(const RasPodStanding& standing, const std::string& since) {
  core::Json entry{{"namespace", standing.namespace_},
                   {"pod", standing.pod},
                   {"uid", standing.uid},
                   {"answer", standing.answer}};
  if (!since.empty()) entry["since"] = since;
  if (!standing.nccl_version.empty()) entry["ncclVersion"] = standing.nccl_version;
  if (!standing.message.empty()) entry["message"] = standing.message.substr(0, 1000);
  if (standing.verdict) {
    const core::RasVerdict& v = *standing.verdict;
    entry["health"] = std::string(core::RasHealthName(v.health));
    entry["summary"] = v.summary.substr(0, 4000);  // the CRD's maxLength is 4096
    if (v.straggler) entry["straggler"] = true;
    core::Json ranks = core::Json::array();
    for (const core::RasProcess& p : v.ranks) {
      core::Json rank{{"pid", p.pid}, {"address", p.node}};
      if (p.rank) rank["rank"] = *p.rank;
      if (!p.gpu.empty()) rank["gpu"] = p.gpu;
      if (!p.communicator.empty()) rank["communicator"] = p.communicator;
      if (!p.detail.empty()) rank["detail"] = p.detail;
      ranks.push_back(std::move(rank));
    }
    if (!ranks.empty()) entry["ranks"] = std::move(ranks);
  }
  return entry;
}

RasWatcher::RasWatcher(RasWatchOptions options, std::shared_ptr<RasDirectory> directory,
                       Query query)
    : options_(std::move(options)), directory_(std::move(directory)), query_(std::move(query)) {}

std::vector<RasPodStanding> RasWatcher::Round() {
  const auto now = options_.clock();
  std::vector<core::Json> pods;
  try {
    pods = directory_->ReaderPods();
  } catch (const std::exception& e) {
    log::Warn("RAS: cannot list this node's reader pods", {{"error", e.what()}});
    return {};
  }
  std::sort(pods.begin(), pods.end(), [](const core::Json& a, const core::Json& b) {
    const core::Json& ma = Member(a, "metadata");
    const core::Json& mb = Member(b, "metadata");
    return std::pair(Str(ma, "namespace"), Str(ma, "name")) <
           std::pair(Str(mb, "namespace"), Str(mb, "name"));
  });
  std::vector<RasPodStanding> standings;
  std::vector<std::string> uids;
  for (const core::Json& pod : pods) {
    const core::Json& meta = Member(pod, "metadata");
    RasPodStanding s{Str(meta, "namespace"), Str(meta, "name"), Str(meta, "uid"), "", {}, "", ""};
    if (s.uid.empty()) continue;
    standings.push_back(std::move(s));
    uids.push_back(standings.back().uid);
  }
  // The namespaces of pods seen before, where their process still is; a scan for the others.
  std::vector<std::string> unknown;
  for (const std::string& uid : uids) {
    const auto known = namespaces_.find(uid);
    if (known == namespaces_.end() || !StillPodProcess(known->second, uid)) unknown.push_back(uid);
  }
  std::erase_if(namespaces_, [&uids](const auto& entry) {
    return std::find(uids.begin(), uids.end(), entry.first) == uids.end();
  });
  for (auto& [uid, path] : PodNetworkNamespaces(options_.proc_root, unknown)) {
    namespaces_[uid] = std::move(path);
  }
  const std::map<std::string, std::string>& namespaces = namespaces_;

  std::vector<RasQuery> queries;
  std::vector<std::size_t> queried;  // standing index of each query
  const int server_timeout =
      static_cast<int>(std::max<std::int64_t>(1, options_.timeout.count() / 1000 - 1));
  for (std::size_t i = 0; i < standings.size(); ++i) {
    RasPodStanding& s = standings[i];
    const core::Json& pod = pods[i];
    const Memory& memory = memory_[s.uid];
    const RasEndpoint endpoint = RasEndpointOf(pod);
    if (endpoint.disabled) {
      s.answer = "Disabled";
      s.message = "the pod sets NCCL_RAS_ENABLE=0";
      continue;
    }
    const auto since = RunningSince(pod);
    if (!memory.nccl_new_enough && (!since || now - *since < options_.init_grace)) {
      s.answer = "Waiting";
      s.message = "read once its containers have run " + Seconds(options_.init_grace) +
                  " (a query while NCCL initialises could crash NCCL before 2.27.3)";
      continue;
    }
    const auto ns = namespaces.find(s.uid);
    if (ns == namespaces.end()) {
      s.answer = "NoProcess";
      s.message = "no process of the pod under " + options_.proc_root;
      continue;
    }
    RasQuery q;
    q.netns = ns->second;
    q.host = endpoint.host;
    q.port = endpoint.port;
    q.server_timeout_s = server_timeout;
    q.json = options_.json;
    queries.push_back(std::move(q));
    queried.push_back(i);
  }

  const std::vector<RasAnswer> answers =
      queries.empty() ? std::vector<RasAnswer>{}
                      : query_(queries, options_.timeout,
                               std::clamp<std::size_t>(options_.round_bytes / queries.size(),
                                                       64 << 10, core::kMaxRasReportBytes));
  for (std::size_t q = 0; q < answers.size() && q < queried.size(); ++q) {
    RasPodStanding& s = standings[queried[q]];
    Memory& memory = memory_[s.uid];
    const RasAnswer& answer = answers[q];
    s.answer = std::string(RasAnswerStatusName(answer.status));
    if (answer.status != RasAnswerStatus::Answered && answer.status != RasAnswerStatus::TooLarge) {
      s.message = answer.error;
      continue;
    }
    std::vector<core::RasReport> reports = core::ReadRasReports(answer.report);
    if (reports.empty()) {
      s.answer = "Unreadable";
      s.message = "the answer holds no RAS report";
      continue;
    }
    core::RasReport& report = reports.back();
    s.verdict = core::JudgeRas(report, memory.last ? &*memory.last : nullptr);
    s.nccl_version = report.nccl_version;
    if (RasQuerySafeDuringInit(report.nccl_version)) memory.nccl_new_enough = true;
    memory.last = std::move(report);
  }

  // Published: what changed since the last round, each pod's `since` moving only when its entry
  // does.
  core::Json list = core::Json::array();
  for (const RasPodStanding& s : standings) {
    Memory& memory = memory_[s.uid];
    std::string key = RasPodJson(s, "").dump();
    if (key != memory.key) {
      if (!memory.key.empty() || s.verdict) {
        log::Info("RAS: a reader pod's standing changed",
                  {{"pod", s.namespace_ + "/" + s.pod},
                   {"answer", s.answer},
                   {"health", s.verdict ? std::string(core::RasHealthName(s.verdict->health))
                                        : std::string()}});
      }
      memory.key = std::move(key);
      memory.since = Rfc3339(now);
    }
    list.push_back(RasPodJson(s, memory.since));
  }
  std::set<std::string> present(uids.begin(), uids.end());
  std::erase_if(memory_, [&present](const auto& entry) { return !present.contains(entry.first); });
  core::Json ras{{"pods", std::move(list)}};
  if (!published_ || *published_ != ras) {
    try {
      directory_->Publish(ras);
      published_ = std::move(ras);
    } catch (const std::exception& e) {
      log::Warn("RAS: cannot write status.ras", {{"error", e.what()}});
      published_.reset();
    }
  }
  return standings;
}

void RasWatcher::Run(const kube::StopToken& stop) {
  while (!stop.stopped()) {
    const auto started = std::chrono::steady_clock::now();
    const std::vector<RasPodStanding> standings = Round();
    const auto spent = std::chrono::steady_clock::now() - started;
    if (options_.on_round) {
      options_.on_round(standings, std::chrono::duration<double>(spent).count());
    }
    if (stop.WaitFor(std::max<std::chrono::steady_clock::duration>(
            options_.period - spent, std::chrono::milliseconds(100)))) {
      return;
    }
  }
}

}  // namespace ncclguard::probes
