#include "controllers/pod_logs.h"

#include <algorithm>

#include "controllers/json_fields.h"
#include "core/pod_spec.h"

namespace ncclguard::controllers {
namespace {

bool Started(std::string_view phase) {
  return phase == "Running" || phase == "Succeeded" || phase == "Failed";
}

bool RequestsEfa(const core::Json& container) {
  const auto resources = container.find("resources");
  if (resources == container.end() || !resources->is_object()) return false;
  for (const char* which : {"limits", "requests"}) {
    const auto list = resources->find(which);
    if (list == resources->end() || !list->is_object()) continue;
    const auto efa = list->find(std::string(core::kEfaResource));
    if (efa == list->end()) continue;
    if (efa->is_number() && efa->get<double>() > 0) return true;
    if (efa->is_string() && !efa->get<std::string>().empty() && efa->get<std::string>() != "0") {
      return true;
    }
  }
  return false;
}

}  // namespace

PodLogDigest DigestPodLog(std::string_view subject, std::string_view container,
                          std::string_view phase, bool efa_requested, std::string_view log_tail) {
  LogScan scan;
  const std::size_t source = scan.AddSource({"pod " + std::string(subject), efa_requested});
  LineSplitter splitter;
  const auto feed = [&](std::string_view line) { scan.Feed(source, line); };
  splitter.Push(log_tail, feed);
  splitter.Finish(feed);
  return {std::string(subject), std::string(container), std::string(phase), scan.Transport(source),
          scan.Finish()};
}

PodLogDigest MergeDigests(const PodLogDigest& earlier, PodLogDigest later) {
  if (later.transport.kind == NcclTransportKind::Unknown && later.transport.why.empty()) {
    later.transport = earlier.transport;
  }
  for (const LogFinding& old : earlier.findings) {
    const bool again = std::any_of(later.findings.begin(), later.findings.end(),
                                   [&](const LogFinding& f) { return f.id == old.id; });
    if (!again) later.findings.push_back(old);
  }
  return later;
}

std::vector<LogContainer> LogContainers(const core::Json& pod) {
  std::vector<LogContainer> out;
  const auto spec = pod.find("spec");
  if (spec == pod.end() || !spec->is_object()) return out;
  const auto containers = spec->find("containers");
  if (containers == spec->end() || !containers->is_array()) return out;
  for (const core::Json& c : *containers) {
    if (!c.is_object()) continue;
    const std::string name = StringField(c, "name");
    if (!name.empty()) out.push_back({name, RequestsEfa(c)});
  }
  return out;
}

std::string PodPhase(const core::Json& pod) {
  const auto status = pod.find("status");
  return status != pod.end() && status->is_object() ? StringField(*status, "phase") : "";
}

bool LogReadPlanner::Due(const std::string& pod, std::string_view phase, Timestamp now) const {
  if (!Started(phase)) return false;
  const auto last = reads_.find(pod);
  if (last == reads_.end() || last->second.phase != phase) return true;
  return phase == "Running" && now - last->second.at >= limits_.running_interval;
}

bool LogReadPlanner::TakeToken(Timestamp now) {
  if (refilled_ && now > *refilled_) {
    const double elapsed = static_cast<double>((now - *refilled_).count());
    tokens_ = std::min(limits_.burst, tokens_ + elapsed * limits_.rate);
  }
  if (!refilled_ || now > *refilled_) refilled_ = now;
  if (tokens_ < 1.0) return false;
  tokens_ -= 1.0;
  return true;
}

void LogReadPlanner::Read(const std::string& pod, std::string_view phase, Timestamp now) {
  reads_[pod] = {std::string(phase), now};
}

}  // namespace ncclguard::controllers

namespace ncclguard::controllers {

void LogReadPlanner::Retain(const std::function<bool(const std::string& pod)>& live) {
  std::erase_if(reads_, [&](const auto& entry) { return !live(entry.first); });
}

}  // namespace ncclguard::controllers
