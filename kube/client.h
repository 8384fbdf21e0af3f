// The Kubernetes API client: typed-enough REST verbs over any group/version/resource, with
// typed errors (ApiError), client-side rate limiting and retries where the server asks.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "core/json.h"
#include "kube/config.h"
#include "kube/errors.h"
#include "kube/metrics.h"
#include "kube/rate_limiter.h"
#include "kube/resource.h"
#include "kube/stop_token.h"
#include "kube/transport.h"
#include "kube/watch_stream.h"

namespace ncclguard::kube {

struct ClientOptions {
  // Client-side rate limiting, a token bucket per Client: a guard against a runaway loop (the
  // API server's Priority and Fairness is what protects it). The controller's --kube-api-qps and
  // --kube-api-burst, and so the chart's controller.kubeApiQps and kubeApiBurst, default to these.
  double qps = 500;  // <= 0: no client-side limit
  int burst = 1000;
  std::chrono::milliseconds request_timeout{30000};
  int max_retries_on_429 = 3;  // honours Retry-After (capped at 10 s each)
  // Where its requests (and its informers' watch restarts) are counted; null: Metrics::Process().
  Metrics* metrics = nullptr;
};

struct ListOptions {
  std::string label_selector;
  std::string field_selector;
  long limit = 0;  // page size; 0: the server's default (everything)
  std::string continue_token;
  std::string resource_version;  // "0": any cached state is fine
};

struct ListPage {
  core::Json items = core::Json::array();
  std::string resource_version;
  std::string continue_token;  // empty on the last page
};

enum class PatchType {
  kMerge,      // application/merge-patch+json (RFC 7386)
  kJson,       // application/json-patch+json (RFC 6902)
  kStrategic,  // application/strategic-merge-patch+json (built-in types only)
};

struct WriteOptions {
  std::string field_manager;
  bool dry_run = false;
};

struct DeleteOptions {
  std::string precondition_uid;
  std::string precondition_resource_version;
  std::string propagation_policy;  // Foreground, Background, Orphan
  std::optional<long> grace_period_seconds;
};

struct WatchOptions {
  std::string resource_version;
  std::string label_selector;
  std::string field_selector;
  bool allow_bookmarks = true;
  long timeout_seconds = 0;  // server closes the stream after this; 0: server default
};

class Client {
 public:
  explicit Client(ClientConfig config, ClientOptions options = {});

  core::Json Get(const ResourceRef& ref);
  ListPage ListOnePage(const ResourceRef& ref, const ListOptions& options = {});
  // The same, handing each item to `on_item` as it is parsed (page.items stays empty): a
  // large page is never held as one JSON tree.
  ListPage ListOnePage(const ResourceRef& ref, const ListOptions& options,
                       const std::function<void(core::Json&& item)>& on_item);
  // Every page (limit per page from options); items plus the list's resourceVersion. A
  // continue token that expires midway (410) restarts the list once without paging.
  ListPage List(const ResourceRef& ref, ListOptions options = {});

  core::Json Create(const ResourceRef& ref, const core::Json& object,
                    const WriteOptions& options = {});
  core::Json Update(const ResourceRef& ref, const core::Json& object,
                    const WriteOptions& options = {});
  core::Json Patch(const ResourceRef& ref, PatchType type, const core::Json& patch,
                   const WriteOptions& options = {});
  // Server-side apply of `object` as `field_manager`; `force` takes over conflicting fields.
  core::Json Apply(const ResourceRef& ref, const core::Json& object,
                   const std::string& field_manager, bool force = false);
  // The same on the status subresource.
  core::Json ApplyStatus(const ResourceRef& ref, const core::Json& object,
                         const std::string& field_manager, bool force = false);
  // Returns the deleted object or the Status the server sent.
  core::Json Delete(const ResourceRef& ref, const DeleteOptions& options = {});

  core::Json GetStatus(const ResourceRef& ref);
  core::Json UpdateStatus(const ResourceRef& ref, const core::Json& object,
                          const WriteOptions& options = {});
  core::Json PatchStatus(const ResourceRef& ref, PatchType type, const core::Json& patch,
                         const WriteOptions& options = {});

  // One watch request: events go to `on_event` in order until the server ends the stream
  // (returns normally), `stop` fires (returns), or an error: an ERROR event or HTTP error
  // throws ApiError (kGone for a too-old resourceVersion), a malformed line throws kDecode,
  // a dropped connection throws kTransport.
  void Watch(const ResourceRef& ref, const WatchOptions& options,
             const std::function<void(WatchEvent&&)>& on_event, const StopToken& stop);

  // Raw access for what the verbs do not cover; still rate-limited, errors not thrown.
  HttpResponse Send(HttpRequest request);

  const ClientConfig& config() const { return transport_->config(); }
  Metrics& metrics() const { return *metrics_; }
  std::string default_namespace() const { return config().default_namespace; }

 private:
  core::Json Call(const std::string& method, const std::string& path, const std::string& body,
                  const std::string& content_type, const std::string& what);
  // The response body of a successful request; errors thrown.
  std::string CallRaw(const std::string& method, const std::string& path, const std::string& body,
                      const std::string& content_type, const std::string& what);
  // One request on the wire, counted by its method and answer.
  HttpResponse Perform(const HttpRequest& request);

  std::shared_ptr<Transport> transport_;
  std::shared_ptr<TokenBucket> limiter_;
  ClientOptions options_;
  Metrics* metrics_;
};

// "namespace/name", or "name" for cluster-scoped objects: the key informers and queues use.
std::string ObjectKey(const core::Json& object);
std::string ObjectKey(const std::string& ns, const std::string& name);

// metadata.resourceVersion of an object ("" when absent).
std::string ResourceVersionOf(const core::Json& object);

}  // namespace ncclguard::kube
