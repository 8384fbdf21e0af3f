#include "kube/event_recorder.h"

#include <cstdio>
#include <utility>

#include "kube/leader_election.h"
#include "log/log.h"

namespace ncclguard::kube {
namespace {

// Bounds the names kept for retries (a job deleted while its Event failed never retries it).
constexpr std::size_t kMaxUnconfirmedNames = 4096;

std::string Field(const core::Json& object, const char* name) {
  auto found = object.find(name);
  return found != object.end() && found->is_string() ? found->get<std::string>() : "";
}

}  // namespace

core::Json ReferenceTo(const core::Json& object) {
  core::Json reference = core::Json::object();
  reference["apiVersion"] = Field(object, "apiVersion");
  reference["kind"] = Field(object, "kind");
  auto metadata = object.find("metadata");
  if (metadata != object.end() && metadata->is_object()) {
    for (const char* field : {"namespace", "name", "uid"}) {
      std::string value = Field(*metadata, field);
      if (!value.empty()) reference[field] = value;
    }
  }
  return reference;
}

EventDeduplicator::EventDeduplicator(std::chrono::seconds window, std::size_t max_entries)
    : window_(window), max_entries_(std::max<std::size_t>(1, max_entries)) {}

std::string EventDeduplicator::Key(const EventSpec& spec) {
  // uid first: a deleted and re-created object of the same name gets new Events.
  std::string key;
  for (const char* field : {"uid", "apiVersion", "kind", "namespace", "name"}) {
    key += Field(spec.regarding, field);
    key += '\x1f';
  }
  return key + spec.type + '\x1f' + spec.reason + '\x1f' + spec.action + '\x1f' + spec.note;
}

std::optional<EventDeduplicator::Existing> EventDeduplicator::Observe(const std::string& key,
                                                                      Clock::time_point now) {
  auto found = entries_.find(key);
  if (found == entries_.end()) return std::nullopt;
  Entry& entry = found->second;
  if (now - entry.last_seen > window_) {
    by_age_.erase(entry.age);
    entries_.erase(found);
    return std::nullopt;
  }
  ++entry.count;
  entry.last_seen = now;
  by_age_.splice(by_age_.end(), by_age_, entry.age);
  return Existing{entry.name, entry.namespace_, entry.count};
}

void EventDeduplicator::Remember(const std::string& key, const std::string& name,
                                 const std::string& ns, Clock::time_point now) {
  Forget(key);
  while (entries_.size() >= max_entries_) {
    entries_.erase(by_age_.front());
    by_age_.pop_front();
  }
  by_age_.push_back(key);
  entries_.emplace(key, Entry{name, ns, 1, now, std::prev(by_age_.end())});
}

void EventDeduplicator::Forget(const std::string& key) {
  auto found = entries_.find(key);
  if (found == entries_.end()) return;
  by_age_.erase(found->second.age);
  entries_.erase(found);
}

EventRecorder::EventRecorder(std::shared_ptr<Client> client, std::string reporting_controller,
                             std::string reporting_instance, std::chrono::seconds window)
    : client_(std::move(client)),
      reporting_controller_(std::move(reporting_controller)),
      reporting_instance_(std::move(reporting_instance)),
      dedup_(window) {}

std::string EventRecorder::Create(const EventSpec& spec, const std::string& key,
                                  EventDeduplicator::Clock::time_point now) {
  std::string ns = Field(spec.regarding, "namespace");
  if (ns.empty()) ns = "default";  // cluster-scoped objects (nodes) have their Events there
  std::string name;
  if (auto unconfirmed = unconfirmed_names_.find(key); unconfirmed != unconfirmed_names_.end()) {
    name = unconfirmed->second;
  } else {
    auto nanos = std::chrono::duration_cast<std::chrono::nanoseconds>(now.time_since_epoch());
    char suffix[32];
    std::snprintf(suffix, sizeof suffix, ".%llx", static_cast<unsigned long long>(nanos.count()));
    name = Field(spec.regarding, "name") + suffix;
  }
  std::string note = spec.note.size() > 1024 ? spec.note.substr(0, 1021) + "..." : spec.note;
  core::Json event = {{"apiVersion", "events.k8s.io/v1"},
                      {"kind", "Event"},
                      {"metadata", {{"name", name}, {"namespace", ns}}},
                      {"eventTime", FormatMicroTime(now)},
                      {"reportingController", reporting_controller_},
                      {"reportingInstance", reporting_instance_},
                      {"action", spec.action},
                      {"reason", spec.reason},
                      {"regarding", spec.regarding},
                      {"note", note},
                      {"type", spec.type}};
  if (!spec.annotations.empty()) event["metadata"]["annotations"] = core::Json(spec.annotations);
  try {
    client_->Create(resources::Events().In(ns), event);
  } catch (const ApiError& error) {
    // AlreadyExists: an earlier attempt under this name was stored after all.
    if (error.code() != ErrorCode::kAlreadyExists) {
      if (unconfirmed_names_.size() >= kMaxUnconfirmedNames) unconfirmed_names_.clear();
      unconfirmed_names_[key] = name;
      throw;
    }
  }
  unconfirmed_names_.erase(key);
  dedup_.Remember(key, name, ns, now);
  return name;
}

std::string EventRecorder::Record(const EventSpec& spec) {
  std::string key = EventDeduplicator::Key(spec);
  auto now = EventDeduplicator::Clock::now();
  std::lock_guard lock(mutex_);
  try {
    auto existing = dedup_.Observe(key, now);
    if (!existing) return Create(spec, key, now);
    core::Json patch = {
        {"series", {{"count", existing->count}, {"lastObservedTime", FormatMicroTime(now)}}}};
    try {
      client_->Patch(resources::Events().In(existing->namespace_).Named(existing->name),
                     PatchType::kMerge, patch);
      return existing->name;
    } catch (const ApiError& error) {
      // The Event exists; the server could not count this occurrence now (it is away or
      // overloaded): keep the entry, so the next occurrence counts it again rather than writing
      // a second Event with the same note.
      if (IsRetryable(error.code())) throw;
      // Someone deleted the Event (or it expired), or it cannot be updated: start a new one.
      dedup_.Forget(key);
      if (error.code() != ErrorCode::kNotFound) throw;
      return Create(spec, key, now);
    }
  } catch (const std::exception& error) {
    // A failed create left no entry (its name waits in unconfirmed_names_ for the retry).
    log::Warn("event not recorded", {{"reason", spec.reason},
                                     {"kind", Field(spec.regarding, "kind")},
                                     {"namespace", Field(spec.regarding, "namespace")},
                                     {"name", Field(spec.regarding, "name")},
                                     {"error", error.what()}});
    return "";
  }
}

}  // namespace ncclguard::kube
