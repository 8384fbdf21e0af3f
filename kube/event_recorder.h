// Events (events.k8s.io/v1) about objects, de-duplicated: the same object, type, reason,
// action and note within the window increments the existing Event's series count instead
// of creating a new Event.
#pragma once

#include <chrono>
#include <cstddef>
#include <list>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>

#include "core/json.h"
#include "kube/client.h"

namespace ncclguard::kube {

struct EventSpec {
  // ObjectReference of the object the event is about: apiVersion, kind, namespace, name, uid.
  core::Json regarding;
  std::string type = "Normal";  // Normal or Warning
  std::string reason;           // UpperCamelCase, e.g. InsufficientValidatedNodes
  std::string action;           // what the controller did, e.g. Gate
  std::string note;             // human-readable, at most 1 kB (longer is cut)
  std::map<std::string, std::string, std::less<>> annotations;  // metadata.annotations
};

// An ObjectReference for `object` (its apiVersion, kind, namespace, name and uid).
core::Json ReferenceTo(const core::Json& object);

// Which recorded Event a new occurrence belongs to. Pure: the caller passes the time.
class EventDeduplicator {
 public:
  using Clock = std::chrono::system_clock;

  explicit EventDeduplicator(std::chrono::seconds window = std::chrono::minutes(10),
                             std::size_t max_entries = 4096);

  static std::string Key(const EventSpec& spec);

  struct Existing {
    std::string name;  // the Event to update
    std::string namespace_;
    int count;  // the series count including this occurrence (>= 2)
  };
  // The Event this occurrence repeats (and counts it), or nullopt: create a new Event.
  std::optional<Existing> Observe(const std::string& key, Clock::time_point now);
  // A new Event was created for `key`.
  void Remember(const std::string& key, const std::string& name, const std::string& ns,
                Clock::time_point now);
  void Forget(const std::string& key);
  std::size_t size() const { return entries_.size(); }

 private:
  struct Entry {
    std::string name;
    std::string namespace_;
    int count;
    Clock::time_point last_seen;
    std::list<std::string>::iterator age;
  };
  std::chrono::seconds window_;
  std::size_t max_entries_;
  std::unordered_map<std::string, Entry> entries_;
  std::list<std::string> by_age_;  // least recently seen first
};

class EventRecorder {
 public:
  EventRecorder(std::shared_ptr<Client> client, std::string reporting_controller,
                std::string reporting_instance,
                std::chrono::seconds window = std::chrono::minutes(10));

  // Creates or counts the Event. Never throws: an Event that cannot be written is logged,
  // the caller's reconcile goes on. Returns the Event's name, or "" on failure.
  std::string Record(const EventSpec& spec);

 private:
  std::string Create(const EventSpec& spec, const std::string& key,
                     EventDeduplicator::Clock::time_point now);

  std::shared_ptr<Client> client_;
  std::string reporting_controller_;
  std::string reporting_instance_;
  std::mutex mutex_;
  EventDeduplicator dedup_;
  // Names of creates that failed: the API server may have stored the Event and lost only the
  // answer (it went away mid-request). The next attempt reuses the name, so a stored Event
  // answers AlreadyExists instead of being written twice.
  std::unordered_map<std::string, std::string> unconfirmed_names_;
};

}  // namespace ncclguard::kube
