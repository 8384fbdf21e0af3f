#include "kube/informer.h"

#include <random>
#include <utility>

#include "log/log.h"

namespace ncclguard::kube {
namespace {

constexpr std::chrono::seconds kShortWatch{1};

void CopyIdentity(const core::Json& from, core::Json& to) {
  auto metadata = from.find("metadata");
  if (metadata == from.end() || !metadata->is_object()) return;
  if (!to.is_object()) to = core::Json::object();
  core::Json& target = to["metadata"];
  if (!target.is_object()) target = core::Json::object();
  for (const char* field : {"name", "namespace", "uid", "resourceVersion"}) {
    auto value = metadata->find(field);
    if (value != metadata->end()) target[field] = *value;
  }
}

// Whether two versions of an object, as projected, differ in metadata.resourceVersion alone: a
// change of fields the projection drops (a pod's IP, a node's heartbeat, an Event's count).
bool OnlyVersionDiffers(const core::Json& a, const core::Json& b) {
  if (!a.is_object() || !b.is_object() || a.size() != b.size()) return false;
  for (auto field = a.begin(); field != a.end(); ++field) {
    auto other = b.find(field.key());
    if (other == b.end()) return false;
    if (field.key() != "metadata") {
      if (*field != *other) return false;
      continue;
    }
    if (!field->is_object() || !other->is_object() || field->size() != other->size()) return false;
    for (auto m = field->begin(); m != field->end(); ++m) {
      if (m.key() == "resourceVersion") continue;
      auto o = other->find(m.key());
      if (o == other->end() || *m != *o) return false;
    }
  }
  return true;
}

}  // namespace

Informer::Informer(std::shared_ptr<Client> client, InformerOptions options)
    : client_(std::move(client)),
      options_(std::move(options)),
      cache_series_(client_->metrics().Cache(options_.resource.resource)) {}

Informer::~Informer() {
  Stop();
  std::lock_guard lock(mutex_);
  CountLocked(-static_cast<double>(objects_.size()), -stored_bytes_);
}

void Informer::CountLocked(double objects, double bytes) {
  stored_bytes_ += bytes;
  cache_series_.objects->Increment(objects);
  cache_series_.bytes->Increment(bytes);
}

void Informer::AddHandlers(InformerHandlers handlers) { handlers_.push_back(std::move(handlers)); }

void Informer::AddIndex(const std::string& name, IndexFunction function) {
  index_functions_[name] = std::move(function);
}

void Informer::Start() {
  if (thread_.joinable()) return;
  thread_ = std::thread([this] { Run(); });
}

void Informer::Stop() {
  stop_.Stop();
  if (thread_.joinable()) thread_.join();
  synced_changed_.notify_all();
}

bool Informer::HasSynced() const {
  std::lock_guard lock(mutex_);
  return synced_;
}

bool Informer::WaitForSync(std::chrono::milliseconds timeout) const {
  std::unique_lock lock(mutex_);
  return synced_changed_.wait_for(lock, timeout, [&] { return synced_ || stop_.stopped(); }) &&
         synced_;
}

bool Informer::NotServed() const {
  std::lock_guard lock(mutex_);
  return not_served_ && !synced_;
}

bool Informer::WaitForSyncOrNotServed(std::chrono::milliseconds timeout) const {
  std::unique_lock lock(mutex_);
  return synced_changed_.wait_for(lock, timeout, [&] {
    return synced_ || not_served_ || stop_.stopped();
  }) && (synced_ || not_served_);
}

CachedObject Informer::Get(const std::string& key) const {
  std::lock_guard lock(mutex_);
  auto found = objects_.find(key);
  return found == objects_.end() ? nullptr : UnpackLocked(found->second);
}

std::vector<CachedObject> Informer::List() const {
  std::lock_guard lock(mutex_);
  std::vector<CachedObject> all;
  all.reserve(objects_.size());
  for (const auto& [key, packed] : objects_) all.push_back(UnpackLocked(packed));
  return all;
}

std::vector<CachedObject> Informer::ByIndex(const std::string& index,
                                            const std::string& value) const {
  std::lock_guard lock(mutex_);
  std::vector<CachedObject> matches;
  auto by_value = indexes_.find(index);
  if (by_value == indexes_.end()) return matches;
  auto keys = by_value->second.find(value);
  if (keys == by_value->second.end()) return matches;
  for (const auto& key : keys->second) {
    auto found = objects_.find(key);
    if (found != objects_.end()) matches.push_back(UnpackLocked(found->second));
  }
  return matches;
}

void Informer::ForEach(const std::function<void(const core::Json& object)>& visit) const {
  ForEachWhile([&visit](const core::Json& object) {
    visit(object);
    return true;
  });
}

void Informer::ForEachWhile(const std::function<bool(const core::Json& object)>& visit) const {
  std::vector<std::string> keys;
  {
    std::lock_guard lock(mutex_);
    keys.reserve(objects_.size());
    for (const auto& [key, packed] : objects_) keys.push_back(key);
  }
  for (const std::string& key : keys) {
    if (const CachedObject object = Get(key); object && !visit(*object)) return;
  }
}

bool Informer::Contains(const std::string& key) const {
  std::lock_guard lock(mutex_);
  return objects_.contains(key);
}

std::size_t Informer::size() const {
  std::lock_guard lock(mutex_);
  return objects_.size();
}

std::string Informer::last_resource_version() const {
  std::lock_guard lock(mutex_);
  return resource_version_;
}

InformerStats Informer::stats() const {
  std::lock_guard lock(mutex_);
  return stats_;
}

CachedObject Informer::UnpackLocked(const std::vector<std::uint8_t>& packed) const {
  return std::make_shared<const core::Json>(packed_json_.Unpack(packed));
}

std::vector<std::uint8_t> Informer::PackLocked(const std::string& key, const core::Json& object) {
  std::vector<std::uint8_t> packed = packed_json_.Pack(object, key);
  CountDictionaryLocked();
  return packed;
}

void Informer::ReleaseLocked(const std::vector<std::uint8_t>& packed) {
  packed_json_.Release(packed);
  CountDictionaryLocked();
}

void Informer::CountDictionaryLocked() {
  // The shared strings are part of what the cache holds.
  const std::size_t now = packed_json_.dictionary_bytes();
  CountLocked(0, static_cast<double>(now) - static_cast<double>(dictionary_bytes_));
  dictionary_bytes_ = now;
}

CachedObject Informer::Project(const core::Json& object) const {
  if (!options_.projection) return std::make_shared<const core::Json>(object);
  core::Json projected = options_.projection(object);
  CopyIdentity(object, projected);
  return std::make_shared<const core::Json>(std::move(projected));
}

void Informer::IndexLocked(const std::string& key, const core::Json& object, bool add) {
  for (const auto& [name, function] : index_functions_) {
    auto& by_value = indexes_[name];
    for (const auto& value : function(object)) {
      if (add) {
        by_value[value].insert(key);
      } else {
        auto keys = by_value.find(value);
        if (keys == by_value.end()) continue;
        keys->second.erase(key);
        if (keys->second.empty()) by_value.erase(keys);
      }
    }
  }
}

bool Informer::Upsert(const CachedObject& object, std::vector<Change>& changes) {
  std::string key = ObjectKey(*object);
  std::lock_guard lock(mutex_);
  std::vector<std::uint8_t> packed = PackLocked(key, *object);
  auto [slot, inserted] = objects_.try_emplace(key);
  CachedObject old;
  if (!inserted) {
    if (slot->second == packed) {
      ReleaseLocked(packed);
      return false;
    }
    old = UnpackLocked(slot->second);
    if (OnlyVersionDiffers(*old, *object)) {
      // Stored (a write that names a resourceVersion reads the new one), but nobody is told:
      // nothing a handler can read changed. At cluster size most updates are these.
      CountLocked(0, static_cast<double>(packed.size()) - static_cast<double>(slot->second.size()));
      ReleaseLocked(slot->second);
      slot->second = std::move(packed);
      return false;
    }
    IndexLocked(key, *old, false);
    CountLocked(-1, -static_cast<double>(slot->first.size() + slot->second.size()));
    ReleaseLocked(slot->second);
  }
  CountLocked(1, static_cast<double>(slot->first.size() + packed.size()));
  slot->second = std::move(packed);
  IndexLocked(key, *object, true);
  changes.push_back({old, object});
  return true;
}

void Informer::Remove(const std::string& key, std::vector<Change>& changes) {
  std::lock_guard lock(mutex_);
  auto found = objects_.find(key);
  if (found == objects_.end()) return;
  CachedObject old = UnpackLocked(found->second);
  IndexLocked(key, *old, false);
  CountLocked(-1, -static_cast<double>(found->first.size() + found->second.size()));
  changes.push_back({old, nullptr});
  ReleaseLocked(found->second);
  objects_.erase(found);
}

void Informer::Notify(const std::vector<Change>& changes) {
  for (const auto& change : changes) {
    for (const auto& handlers : handlers_) {
      // A throwing handler must not cost the other handlers their events or stop the loop.
      try {
        if (!change.old_object && handlers.on_add) {
          handlers.on_add(change.new_object);
        } else if (change.old_object && change.new_object && handlers.on_update) {
          handlers.on_update(change.old_object, change.new_object);
        } else if (!change.new_object && handlers.on_delete) {
          handlers.on_delete(change.old_object);
        }
      } catch (const std::exception& error) {
        log::Error("informer event handler failed",
                   {{"resource", options_.resource.Describe()}, {"error", error.what()}});
      }
    }
  }
}

void Informer::ListAndReplace() {
  ListOptions list_options;
  list_options.label_selector = options_.label_selector;
  list_options.field_selector = options_.field_selector;
  list_options.limit = options_.page_size;
  // Page by page, projecting each page before fetching the next: the full objects of one
  // page are in memory at a time, never the whole list (10,000 pods).
  std::set<std::string> listed;
  std::string list_version;
  do {
    // Handlers hear about each page before the next: holding every change of a 10,000-pod
    // list until the end would cost more memory than the cache itself.
    std::vector<Change> changes;
    ListPage page = client_->ListOnePage(options_.resource, list_options, [&](core::Json&& item) {
      if (options_.keep && !options_.keep(item)) return;  // not listed: removed below if cached
      CachedObject object = Project(item);
      listed.insert(ObjectKey(*object));
      Upsert(object, changes);  // unchanged objects raise no event
    });
    if (list_version.empty()) list_version = page.resource_version;
    Notify(changes);
    list_options.continue_token = page.continue_token;
  } while (!list_options.continue_token.empty() && !stop_.stopped());
  if (stop_.stopped()) return;  // a partial list says nothing about what was deleted
  std::vector<std::string> gone;
  {
    std::lock_guard lock(mutex_);
    for (const auto& [key, packed] : objects_) {
      if (!listed.contains(key)) gone.push_back(key);
    }
  }
  std::vector<Change> changes;
  for (const auto& key : gone) Remove(key, changes);
  Notify(changes);
  std::lock_guard lock(mutex_);
  resource_version_ = list_version;
  ++stats_.lists;
}

int Informer::WatchOnce(Backoff& backoff) {
  WatchOptions watch_options;
  watch_options.label_selector = options_.label_selector;
  watch_options.field_selector = options_.field_selector;
  watch_options.resource_version = last_resource_version();
  watch_options.allow_bookmarks = true;
  static thread_local std::mt19937 random{std::random_device{}()};
  long min_timeout = std::max(1L, options_.watch_timeout_seconds);
  watch_options.timeout_seconds =
      std::uniform_int_distribution<long>(min_timeout, 2 * min_timeout - 1)(random);
  {
    std::lock_guard lock(mutex_);
    ++stats_.watches;
  }
  int events = 0;
  client_->Watch(
      options_.resource, watch_options,
      [&](WatchEvent&& event) {
        ++events;
        backoff.Reset();
        std::string rv = ResourceVersionOf(event.object);
        std::vector<Change> changes;
        switch (event.type) {
          case WatchEventType::kAdded:
          case WatchEventType::kModified:
            if (options_.keep && !options_.keep(event.object)) {
              Remove(ObjectKey(event.object), changes);  // if it was kept before
            } else {
              Upsert(Project(event.object), changes);
            }
            break;
          case WatchEventType::kDeleted:
            Remove(ObjectKey(event.object), changes);
            break;
          case WatchEventType::kBookmark:
          case WatchEventType::kError:
            break;
        }
        if (!rv.empty()) {
          std::lock_guard lock(mutex_);
          resource_version_ = rv;
        }
        Notify(changes);
      },
      stop_);
  return events;
}

void Informer::Run() {
  Backoff backoff(options_.backoff);
  bool need_list = true;
  const std::string resource = options_.resource.Describe();
  bool said_not_served = false;
  // A watch ended and another follows: counted by why (ncclguard_watch_restarts_total).
  const auto restarted = [this](WatchRestart why) {
    if (!stop_.stopped()) client_->metrics().CountWatchRestart(options_.resource.resource, why);
  };
  client_->metrics().WatchStarted(options_.resource.resource);
  while (!stop_.stopped()) {
    bool watching = false;
    try {
      if (need_list) {
        ListAndReplace();
        need_list = false;
        said_not_served = false;
        {
          std::lock_guard lock(mutex_);
          synced_ = true;
          not_served_ = false;
        }
        synced_changed_.notify_all();
        backoff.Reset();
      }
      auto began = std::chrono::steady_clock::now();
      watching = true;
      const int events = WatchOnce(backoff);
      watching = false;
      restarted(WatchRestart::kClosed);
      if (events > 0 || std::chrono::steady_clock::now() - began > kShortWatch) continue;
      // A server that ends every watch at once, without events, would otherwise be asked
      // again in a tight loop.
      std::lock_guard lock(mutex_);
      ++stats_.short_watches;
    } catch (const ApiError& error) {
      if (stop_.stopped()) break;
      if (watching) {
        restarted(error.code() == ErrorCode::kGone ? WatchRestart::kExpired : WatchRestart::kError);
      }
      std::lock_guard lock(mutex_);
      if (error.code() == ErrorCode::kGone) {
        // Our resourceVersion is older than the server keeps: only a fresh list is correct.
        log::Info("informer watch expired; listing again",
                  {{"resource", resource}, {"error", error.what()}});
        ++stats_.relists_after_gone;
        need_list = true;
        continue;
      }
      if (error.code() == ErrorCode::kNotFound) {
        // The resource is not served: a CRD not installed (a cluster without JobSet, say). Said
        // once; asked again with the backoff (up to its maximum) so a CRD installed later is
        // picked up.
        if (!said_not_served) {
          log::Info(
              "informer resource not served by the API server (CRD not installed?); "
              "checking again periodically",
              {{"resource", resource},
               {"maxIntervalS",
                std::chrono::duration_cast<std::chrono::seconds>(options_.not_served_retry)
                    .count()}});
          said_not_served = true;
        }
        ++stats_.reconnects_after_error;
        if (!synced_) {
          not_served_ = true;
          synced_changed_.notify_all();
        }
      } else if (error.code() == ErrorCode::kDecode) {
        log::Error("informer watch stream unreadable; resyncing with a fresh list",
                   {{"resource", resource}, {"error", error.what()}});
        ++stats_.resyncs_after_bad_stream;
        need_list = true;
      } else {
        log::Warn("informer watch failed; reconnecting",
                  {{"resource", resource}, {"error", error.what()}});
        ++stats_.reconnects_after_error;
      }
    } catch (const std::exception& error) {
      // A projection or index function threw: keep the loop alive and start over.
      if (stop_.stopped()) break;
      if (watching) restarted(WatchRestart::kError);
      log::Error("informer failed; resyncing with a fresh list",
                 {{"resource", resource}, {"error", error.what()}});
      need_list = true;
    }
    auto delay = backoff.Next();
    if (NotServed()) delay = std::min(delay, options_.not_served_retry);
    stop_.WaitFor(delay);
  }
}

IndexFunction IndexByLabel(const std::string& label) {
  return [label](const core::Json& object) -> std::vector<std::string> {
    const core::Json* labels = nullptr;
    auto metadata = object.find("metadata");
    if (metadata != object.end() && metadata->is_object()) {
      auto found = metadata->find("labels");
      if (found != metadata->end() && found->is_object()) labels = &*found;
    }
    if (labels == nullptr) return {};
    auto value = labels->find(label);
    if (value == labels->end() || !value->is_string()) return {};
    return {value->get<std::string>()};
  };
}

IndexFunction IndexByOwnerUid() {
  return [](const core::Json& object) -> std::vector<std::string> {
    std::vector<std::string> uids;
    auto metadata = object.find("metadata");
    if (metadata == object.end() || !metadata->is_object()) return uids;
    auto owners = metadata->find("ownerReferences");
    if (owners == metadata->end() || !owners->is_array()) return uids;
    for (const auto& owner : *owners) {
      if (owner.is_object() && owner.contains("uid") && owner["uid"].is_string()) {
        uids.push_back(owner["uid"].get<std::string>());
      }
    }
    return uids;
  };
}

Projection KeepFields(std::vector<std::string> json_pointers) {
  std::vector<core::JsonPointer> pointers;
  for (const auto& text : json_pointers) pointers.emplace_back(text);
  return [pointers](const core::Json& object) {
    core::Json kept = core::Json::object();
    for (const auto& pointer : pointers) {
      if (object.contains(pointer)) kept[pointer] = object.at(pointer);
    }
    return kept;
  };
}

}  // namespace ncclguard::kube
