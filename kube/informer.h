// A list+watch loop that keeps a cache of PROJECTED objects keyed namespace/name and tells
// handlers what changed. The watch resumes from the last resourceVersion it saw (events and
// bookmarks), re-lists on 410 Gone or a malformed stream, and reconnects with jittered
// exponential backoff when the API server goes away. Stop() ends it promptly.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "core/json.h"
#include "kube/backoff.h"
#include "kube/client.h"
#include "kube/packed_json.h"
#include "kube/stop_token.h"

namespace ncclguard::kube {

using CachedObject = std::shared_ptr<const core::Json>;

struct InformerHandlers {
  std::function<void(const CachedObject& object)> on_add;
  std::function<void(const CachedObject& old_object, const CachedObject& new_object)> on_update;
  std::function<void(const CachedObject& object)> on_delete;
};

// Keeps only the fields controllers read. metadata.name, namespace, uid and resourceVersion
// are always kept.
using Projection = std::function<core::Json(const core::Json& object)>;

// Whether the informer caches an object at all (run on the object as the server sends it).
using ObjectFilter = std::function<bool(const core::Json& object)>;

// The values an object is filed under in an index (run on the projected object).
using IndexFunction = std::function<std::vector<std::string>(const core::Json& object)>;

struct InformerOptions {
  ResourceRef resource;  // namespace_ empty: all namespaces
  std::string label_selector;
  std::string field_selector;
  Projection projection;  // null: whole objects
  // Objects it does not keep are not cached and raise no event; one cached before that stops
  // being kept is removed (its handlers hear a delete). Null: every object. For a resource whose
  // objects the controllers mostly do not read (the Events of a busy cluster), unlike a field
  // selector it can say "this reason or that reporting controller".
  ObjectFilter keep = nullptr;
  long page_size = 200;  // smaller pages: less transient memory, hardly slower
  BackoffOptions backoff{std::chrono::milliseconds(800), std::chrono::milliseconds(30000), 2.0,
                         0.5};
  // While the resource is not served (a CRD not installed), the list is tried again at least
  // this often, so a CRD installed later is picked up soon.
  std::chrono::milliseconds not_served_retry{5000};
  // Each watch asks the server to end it after a random time in [min, 2*min): a silently
  // dead connection is noticed, and many informers do not reconnect at once.
  long watch_timeout_seconds = 300;
};

struct InformerStats {
  int lists = 0;
  int relists_after_gone = 0;
  int resyncs_after_bad_stream = 0;
  int watches = 0;
  int short_watches = 0;  // ended at once without events: backed off like an error
  int reconnects_after_error = 0;
};

class Informer {
 public:
  Informer(std::shared_ptr<Client> client, InformerOptions options);
  ~Informer();
  Informer(const Informer&) = delete;
  Informer& operator=(const Informer&) = delete;

  // Before Start().
  void AddHandlers(InformerHandlers handlers);
  void AddIndex(const std::string& name, IndexFunction function);

  void Start();
  void Stop();

  // True once the first list has been stored (and handlers told).
  bool HasSynced() const;
  // Waits for HasSynced; false on timeout or stop.
  bool WaitForSync(std::chrono::milliseconds timeout) const;
  // True while the list answers 404 (the resource is not served: a CRD not installed) and no
  // list has succeeded yet. The informer keeps trying; HasSynced turns true once it is served.
  bool NotServed() const;
  // Waits until HasSynced or NotServed (nothing more to wait for); false on timeout or stop.
  bool WaitForSyncOrNotServed(std::chrono::milliseconds timeout) const;
  const ResourceRef& resource() const { return options_.resource; }

  CachedObject Get(const std::string& key) const;  // null when absent
  std::vector<CachedObject> List() const;
  // Visits every object, decoded one at a time and without the lock held (the visitor may take
  // its time): for a pass over 100,000 pods, where List would hold them all decoded at once
  // (a gigabyte). Objects added during the pass may be missed, removed ones skipped.
  void ForEach(const std::function<void(const core::Json& object)>& visit) const;
  // ForEach until `visit` returns false: a pass that wants a few objects decodes only those it
  // reaches.
  void ForEachWhile(const std::function<bool(const core::Json& object)>& visit) const;
  bool Contains(const std::string& key) const;
  std::vector<CachedObject> ByIndex(const std::string& index, const std::string& value) const;
  std::size_t size() const;
  std::string last_resource_version() const;
  InformerStats stats() const;

 private:
  struct Change {
    CachedObject old_object;
    CachedObject new_object;
  };

  void Run();
  void ListAndReplace();
  int WatchOnce(Backoff& backoff);  // returns the number of events received
  CachedObject Project(const core::Json& object) const;
  CachedObject UnpackLocked(const std::vector<std::uint8_t>& packed) const;
  std::vector<std::uint8_t> PackLocked(const std::string& key, const core::Json& object);
  void ReleaseLocked(const std::vector<std::uint8_t>& packed);
  void CountDictionaryLocked();
  // False when no handler is told: the stored object is byte-for-byte the same (nothing stored),
  // or only its resourceVersion changed (the new version stored).
  bool Upsert(const CachedObject& object, std::vector<Change>& changes);
  void Remove(const std::string& key, std::vector<Change>& changes);
  void IndexLocked(const std::string& key, const core::Json& object, bool add);
  // Moves the cache gauges (ncclguard_informer_objects, _stored_bytes) by an entry's change.
  void CountLocked(double objects, double bytes);
  void Notify(const std::vector<Change>& changes);

  std::shared_ptr<Client> client_;
  InformerOptions options_;
  std::vector<InformerHandlers> handlers_;
  std::map<std::string, IndexFunction> index_functions_;

  mutable std::mutex mutex_;
  mutable std::condition_variable synced_changed_;
  // Stored packed (kube/packed_json.h): the strings objects share are stored once. Readers get a
  // freshly unpacked object.
  PackedJson packed_json_;
  std::unordered_map<std::string, std::vector<std::uint8_t>> objects_;
  std::map<std::string, std::map<std::string, std::set<std::string>>> indexes_;
  std::string resource_version_;
  Metrics::CacheSeries cache_series_;
  double stored_bytes_ = 0;
  std::size_t dictionary_bytes_ = 0;  // of packed_json_, as last counted in stored_bytes_
  bool synced_ = false;
  bool not_served_ = false;
  InformerStats stats_;

  StopToken stop_;
  std::thread thread_;
};

// Index functions the controllers need: by a label's value ("pods of a job"), by owner uid.
IndexFunction IndexByLabel(const std::string& label);
IndexFunction IndexByOwnerUid();

// A projection keeping the given JSON Pointers (plus the identity fields always kept).
Projection KeepFields(std::vector<std::string> json_pointers);

}  // namespace ncclguard::kube
