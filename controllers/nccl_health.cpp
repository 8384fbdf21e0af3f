#include "controllers/nccl_health.h"

#include <algorithm>

#include "controllers/json_fields.h"
#include "controllers/labels.h"
#include "core/contract.h"

namespace ncclguard::controllers {
namespace {

bool Running(const core::Json& pod) {
  const auto status = pod.find("status");
  return status != pod.end() && StringField(*status, "phase") == "Running" &&
         Meta(pod, "deletionTimestamp").empty();
}

std::string NodeOf(const core::Json& pod) {
  const auto spec = pod.find("spec");
  return spec != pod.end() ? StringField(*spec, "nodeName") : "";
}

// The pod whose IP is `address` (status.podIP or one of status.podIPs).
const core::Json* PodAt(const std::vector<core::Json>& pods, std::string_view address) {
  for (const core::Json& pod : pods) {
    const auto status = pod.find("status");
    if (status == pod.end() || !status->is_object()) continue;
    if (StringField(*status, "podIP") == address) return &pod;
    const auto ips = status->find("podIPs");
    if (ips == status->end() || !ips->is_array()) continue;
    for (const core::Json& ip : *ips) {
      if (ip.is_object() && StringField(ip, "ip") == address) return &pod;
    }
  }
  return nullptr;
}

// "rank 21 (GPU 5, PID 3487984) in pod job-worker-2 on node ip-10-0-1-5"; the address where no
// pod of the job has it.
std::string RankInPod(const core::Json& rank, const std::vector<core::Json>& pods,
                      std::vector<std::string>& named_pods) {
  const std::string address = StringField(rank, "address");
  std::string out = rank.contains("rank") && rank["rank"].is_number_integer()
                        ? "rank " + std::to_string(rank["rank"].get<std::int64_t>())
                        : "process " + std::to_string(IntField(rank, "pid"));
  std::string details;
  if (const std::string gpu = StringField(rank, "gpu"); !gpu.empty()) details = "GPU " + gpu;
  if (rank.contains("rank") && IntField(rank, "pid") != 0) {
    details +=
        (details.empty() ? "" : ", ") + std::string("PID ") + std::to_string(IntField(rank, "pid"));
  }
  if (!details.empty()) out += " (" + details + ")";
  if (const core::Json* pod = PodAt(pods, address)) {
    named_pods.push_back(Meta(*pod, "name"));
    out += " in pod " + Meta(*pod, "name");
    if (const std::string node = NodeOf(*pod); !node.empty()) out += " on node " + node;
  } else if (!address.empty()) {
    out += " at " + address + " (no pod of the job has that address)";
  }
  return out;
}

const core::Json* EntryFor(const core::Json& reader,
                           const std::map<std::string, core::Json, std::less<>>& validations) {
  const auto validation = validations.find(NodeOf(reader));
  if (validation == validations.end()) return nullptr;
  const core::Json& v = validation->second;
  const auto status = v.find("status");
  if (status == v.end() || !status->is_object()) return nullptr;
  const auto ras = status->find("ras");
  if (ras == status->end() || !ras->is_object()) return nullptr;
  const auto pods = ras->find("pods");
  if (pods == ras->end() || !pods->is_array()) return nullptr;
  const std::string uid = Meta(reader, "uid");
  for (const core::Json& entry : *pods) {
    if (entry.is_object() && StringField(entry, "uid") == uid) return &entry;
  }
  return nullptr;
}

}  // namespace

std::optional<std::string> PickRasReader(const std::vector<core::Json>& pods,
                                         const std::function<bool(const core::Json&)>& runs_ranks) {
  std::optional<std::string> first;
  for (const core::Json& pod : pods) {
    if (!Running(pod) || NodeOf(pod).empty() || !runs_ranks(pod)) continue;
    if (Label(pod, core::kRasReaderLabel) == std::string("true")) return Meta(pod, "name");
    const std::string name = Meta(pod, "name");
    if (!first || name < *first) first = name;
  }
  return first;
}

std::optional<Condition> NcclHealthCondition(
    const std::vector<core::Json>& pods, const core::Json& reader,
    const std::map<std::string, core::Json, std::less<>>& validations, std::string_view link,
    const std::vector<std::string>& other_views) {
  const core::Json* entry = EntryFor(reader, validations);
  if (entry == nullptr) return std::nullopt;
  const std::string pod_name = Meta(reader, "name");
  const std::string answer = StringField(*entry, "answer");
  const std::string health = StringField(*entry, "health");
  const std::string since = StringField(*entry, "since");
  const std::string read = "Read in pod " + pod_name +
                           (StringField(*entry, "ncclVersion").empty()
                                ? std::string()
                                : " (NCCL " + StringField(*entry, "ncclVersion") + ")") +
                           (since.empty() ? std::string() : " since " + since);
  const std::string see = " \u2014 see " + std::string(link);
  if (health.empty()) {
    // Not read (yet): why, from the probe.
    std::string reason = "RasUnanswered";
    if (answer == "Waiting") reason = "RasWaiting";
    if (answer == "Disabled") reason = "RasDisabled";
    return Condition{
        std::string(core::kHealthCondition), "Unknown", reason,
        "NCCL's RAS in pod " + pod_name + " not read: " + answer +
            (StringField(*entry, "message").empty() ? std::string()
                                                    : ", " + StringField(*entry, "message")) +
            see,
        std::nullopt};
  }
  const std::string summary = StringField(*entry, "summary");
  if (health == "Healthy") {
    return Condition{std::string(core::kHealthCondition), "True", "Healthy",
                     read + ": " + summary + see, std::nullopt};
  }
  // The summary up to its list of ranks, then the ranks with their pods.
  std::string head = summary;
  if (const auto behind = head.find("; behind: "); behind != std::string::npos) {
    head.resize(behind);
    head += "; behind";
  } else if (const auto colon = head.find(": "); colon != std::string::npos) {
    head.resize(colon);
  }
  std::vector<std::string> named_pods;
  std::string ranks;
  const auto list = entry->find("ranks");
  if (list != entry->end() && list->is_array()) {
    for (const core::Json& rank : *list) {
      if (!rank.is_object()) continue;
      ranks += (ranks.empty() ? "" : ", ") + RankInPod(rank, pods, named_pods);
    }
  }
  std::string message = read + ": " + head + (ranks.empty() ? "" : ": " + ranks);
  // Where the pods' statuses and logs name one of these pods too, say they agree.
  for (const std::string& view : other_views) {
    const bool agrees =
        std::any_of(named_pods.begin(), named_pods.end(),
                    [&](const std::string& p) { return view.find(p) != std::string::npos; });
    if (agrees) {
      message += "; the pods' statuses and logs agree: " + view;
      break;
    }
  }
  return Condition{std::string(core::kHealthCondition), "False", health,
                   TruncateUtf8(std::move(message), 3800) + see, std::nullopt};
}

}  // namespace ncclguard::controllers
