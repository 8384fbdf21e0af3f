#include "kube/client.h"

#include <algorithm>
#include <thread>
#include <utility>

#include "core/json_reader.h"
#include "log/log.h"

namespace ncclguard::kube {
namespace {

const char* PatchContentType(PatchType type) {
  switch (type) {
    case PatchType::kMerge:
      return "application/merge-patch+json";
    case PatchType::kJson:
      return "application/json-patch+json";
    case PatchType::kStrategic:
      return "application/strategic-merge-patch+json";
  }
  return "application/merge-patch+json";
}

class Query {
 public:
  void Add(const std::string& key, const std::string& value) {
    if (value.empty()) return;
    text_ += (text_.empty() ? "?" : "&") + key + "=" + UrlEncode(value);
  }
  const std::string& str() const { return text_; }

 private:
  std::string text_;
};

std::string WriteQuery(const WriteOptions& options) {
  Query query;
  query.Add("fieldManager", options.field_manager);
  if (options.dry_run) query.Add("dryRun", "All");
  return query.str();
}

core::Json ParseBody(const std::string& body, const std::string& what) {
  try {
    return core::ReadJson(body);
  } catch (const core::JsonReadError&) {
    throw ApiError(ErrorCode::kDecode, what + ": response is not JSON: " +
                                           body.substr(0, std::min<size_t>(200, body.size())));
  }
}

}  // namespace

std::string ObjectKey(const std::string& ns, const std::string& name) {
  return ns.empty() ? name : ns + "/" + name;
}

std::string ObjectKey(const core::Json& object) {
  auto metadata = object.find("metadata");
  if (metadata == object.end() || !metadata->is_object()) return "";
  std::string ns = metadata->value("namespace", "");
  return ObjectKey(ns, metadata->value("name", ""));
}

std::string ResourceVersionOf(const core::Json& object) {
  auto metadata = object.find("metadata");
  if (metadata == object.end() || !metadata->is_object()) return "";
  auto rv = metadata->find("resourceVersion");
  return rv != metadata->end() && rv->is_string() ? rv->get<std::string>() : "";
}

Client::Client(ClientConfig config, ClientOptions options)
    : transport_(std::make_shared<Transport>(std::move(config))),
      limiter_(std::make_shared<TokenBucket>(options.qps, options.burst)),
      options_(options),
      metrics_(options.metrics != nullptr ? options.metrics : &Metrics::Process()) {}

HttpResponse Client::Perform(const HttpRequest& request) {
  try {
    HttpResponse response = transport_->Perform(request);
    metrics_->CountRequest(request.method, response.status);
    return response;
  } catch (const ApiError&) {
    metrics_->CountRequest(request.method, 0);
    throw;
  }
}

HttpResponse Client::Send(HttpRequest request) {
  limiter_->Wait(StopToken());
  HttpResponse response = Perform(request);
  // A rotated service-account token: the file changed under us; retry once with the new one.
  if (response.status == 401 && transport_->tokens().Refresh()) {
    response = Perform(request);
  }
  return response;
}

core::Json Client::Call(const std::string& method, const std::string& path, const std::string& body,
                        const std::string& content_type, const std::string& what) {
  std::string response = CallRaw(method, path, body, content_type, what);
  return ParseBody(response, what + " (" + method + " " + path + ")");
}

std::string Client::CallRaw(const std::string& method, const std::string& path,
                            const std::string& body, const std::string& content_type,
                            const std::string& what) {
  HttpRequest request{method, path, body, content_type, options_.request_timeout};
  std::string description = what + " (" + method + " " + path + ")";
  for (int attempt = 0;; ++attempt) {
    HttpResponse response = Send(request);
    if (response.status >= 200 && response.status < 300) return std::move(response.body);
    ApiError error =
        ErrorFromResponse(description, response.status, response.body, response.retry_after);
    if (error.code() == ErrorCode::kTooManyRequests && attempt < options_.max_retries_on_429) {
      auto wait = std::min(std::max(error.retry_after(), std::chrono::seconds(1)),
                           std::chrono::seconds(10));
      log::Debug("throttled by the server; retrying",
                 {{"request", description}, {"retryInS", wait.count()}});
      std::this_thread::sleep_for(wait);
      continue;
    }
    throw error;
  }
}

core::Json Client::Get(const ResourceRef& ref) {
  return Call("GET", ref.ObjectPath(), "", "", "get " + ref.Describe());
}

ListPage Client::ListOnePage(const ResourceRef& ref, const ListOptions& options) {
  core::Json items = core::Json::array();
  ListPage page =
      ListOnePage(ref, options, [&](core::Json&& item) { items.push_back(std::move(item)); });
  page.items = std::move(items);
  return page;
}

ListPage Client::ListOnePage(const ResourceRef& ref, const ListOptions& options,
                             const std::function<void(core::Json&& item)>& on_item) {
  Query query;
  query.Add("labelSelector", options.label_selector);
  query.Add("fieldSelector", options.field_selector);
  if (options.limit > 0) query.Add("limit", std::to_string(options.limit));
  query.Add("continue", options.continue_token);
  query.Add("resourceVersion", options.resource_version);
  std::string what = "list " + ref.Describe();
  std::string body = CallRaw("GET", ref.CollectionPath() + query.str(), "", "", what);
  // Each item goes to `on_item` as soon as it is read and is then dropped, so a page never
  // exists as one big JSON tree. An item nests one level deeper here than in a watch event
  // (kube/watch_stream.cpp), and may nest as deep.
  bool bad_items = false;
  bool in_on_item = false;  // what `on_item` throws is its caller's, never "not JSON"
  core::Json list;
  try {
    list = core::ReadJsonStreamingList(body, "items",
                                       [&](core::Json&& item) {
                                         if (!item.is_object()) {
                                           bad_items =
                                               true;  // a number or string where an object belongs
                                           return;
                                         }
                                         in_on_item = true;
                                         on_item(std::move(item));
                                         in_on_item = false;
                                       },
                                       {.max_depth = core::JsonReadOptions{}.max_depth + 1});
  } catch (const core::JsonReadError& e) {
    if (in_on_item) throw;
    if (e.kind() == core::JsonReadError::Kind::TooDeep) {
      throw ApiError(ErrorCode::kDecode, what + ": response " + e.what());
    }
    throw ApiError(ErrorCode::kDecode, what + ": response is not JSON: " +
                                           body.substr(0, std::min<size_t>(200, body.size())));
  }
  if (!list.is_object()) throw ApiError(ErrorCode::kDecode, what + ": response is not an object");
  const auto items = list.find("items");
  if (items != list.end() && !items->is_null() && !items->is_array()) bad_items = true;
  if (bad_items) throw ApiError(ErrorCode::kDecode, what + ": 'items' is not a list");
  ListPage page;
  auto metadata = list.find("metadata");
  if (metadata != list.end() && metadata->is_object()) {
    page.resource_version = metadata->value("resourceVersion", "");
    page.continue_token = metadata->value("continue", "");
  }
  return page;
}

ListPage Client::List(const ResourceRef& ref, ListOptions options) {
  ListPage all;
  bool restarted = false;
  while (true) {
    ListPage page;
    try {
      page = ListOnePage(ref, options);
    } catch (const ApiError& error) {
      // The continue token outlived etcd's compaction window: start over in one request.
      if (error.code() != ErrorCode::kGone || options.continue_token.empty() || restarted) throw;
      log::Info("list continue token expired; listing again without paging",
                {{"resource", ref.Describe()}});
      restarted = true;
      all = ListPage{};
      options.continue_token.clear();
      options.limit = 0;
      continue;
    }
    for (auto& item : page.items) all.items.push_back(std::move(item));
    // Later pages are served at the first page's resourceVersion.
    if (all.resource_version.empty()) all.resource_version = page.resource_version;
    if (page.continue_token.empty()) return all;
    options.continue_token = page.continue_token;
    options.resource_version.clear();
  }
}

core::Json Client::Create(const ResourceRef& ref, const core::Json& object,
                          const WriteOptions& options) {
  return Call("POST", ref.CollectionPath() + WriteQuery(options), object.dump(), "application/json",
              "create " + ref.Describe());
}

core::Json Client::Update(const ResourceRef& ref, const core::Json& object,
                          const WriteOptions& options) {
  return Call("PUT", ref.ObjectPath() + WriteQuery(options), object.dump(), "application/json",
              "update " + ref.Describe());
}

core::Json Client::Patch(const ResourceRef& ref, PatchType type, const core::Json& patch,
                         const WriteOptions& options) {
  return Call("PATCH", ref.ObjectPath() + WriteQuery(options), patch.dump(), PatchContentType(type),
              "patch " + ref.Describe());
}

namespace {

std::string ApplyQuery(const ResourceRef& ref, const std::string& field_manager, bool force) {
  if (field_manager.empty()) {
    throw std::invalid_argument("server-side apply of " + ref.Describe() +
                                " needs a field manager");
  }
  return "?fieldManager=" + UrlEncode(field_manager) + (force ? "&force=true" : "");
}

}  // namespace

core::Json Client::Apply(const ResourceRef& ref, const core::Json& object,
                         const std::string& field_manager, bool force) {
  return Call("PATCH", ref.ObjectPath() + ApplyQuery(ref, field_manager, force), object.dump(),
              "application/apply-patch+yaml", "apply " + ref.Describe());
}

core::Json Client::ApplyStatus(const ResourceRef& ref, const core::Json& object,
                               const std::string& field_manager, bool force) {
  return Call("PATCH", ref.ObjectPath() + "/status" + ApplyQuery(ref, field_manager, force),
              object.dump(), "application/apply-patch+yaml", "apply status of " + ref.Describe());
}

core::Json Client::Delete(const ResourceRef& ref, const DeleteOptions& options) {
  core::Json body = {{"apiVersion", "v1"}, {"kind", "DeleteOptions"}};
  if (!options.precondition_uid.empty()) body["preconditions"]["uid"] = options.precondition_uid;
  if (!options.precondition_resource_version.empty()) {
    body["preconditions"]["resourceVersion"] = options.precondition_resource_version;
  }
  if (!options.propagation_policy.empty()) body["propagationPolicy"] = options.propagation_policy;
  if (options.grace_period_seconds) body["gracePeriodSeconds"] = *options.grace_period_seconds;
  return Call("DELETE", ref.ObjectPath(), body.dump(), "application/json",
              "delete " + ref.Describe());
}

core::Json Client::GetStatus(const ResourceRef& ref) {
  return Call("GET", ref.ObjectPath() + "/status", "", "", "get status of " + ref.Describe());
}

core::Json Client::UpdateStatus(const ResourceRef& ref, const core::Json& object,
                                const WriteOptions& options) {
  return Call("PUT", ref.ObjectPath() + "/status" + WriteQuery(options), object.dump(),
              "application/json", "update status of " + ref.Describe());
}

core::Json Client::PatchStatus(const ResourceRef& ref, PatchType type, const core::Json& patch,
                               const WriteOptions& options) {
  return Call("PATCH", ref.ObjectPath() + "/status" + WriteQuery(options), patch.dump(),
              PatchContentType(type), "patch status of " + ref.Describe());
}

void Client::Watch(const ResourceRef& ref, const WatchOptions& options,
                   const std::function<void(WatchEvent&&)>& on_event, const StopToken& stop) {
  Query query;
  query.Add("watch", "true");
  query.Add("resourceVersion", options.resource_version);
  query.Add("labelSelector", options.label_selector);
  query.Add("fieldSelector", options.field_selector);
  if (options.allow_bookmarks) query.Add("allowWatchBookmarks", "true");
  if (options.timeout_seconds > 0)
    query.Add("timeoutSeconds", std::to_string(options.timeout_seconds));
  std::string what = "watch " + ref.Describe();
  if (!limiter_->Wait(stop)) return;

  WatchStreamParser parser;
  auto deliver = [&](WatchEvent&& event) {
    if (event.type == WatchEventType::kError) {
      const core::Json& status = event.object;
      long code = status.contains("code") && status["code"].is_number_integer()
                      ? status["code"].get<long>()
                      : 500;
      throw ErrorFromResponse(what, code, status.dump());
    }
    on_event(std::move(event));
  };
  HttpRequest request{"GET", ref.CollectionPath() + query.str(), "", "", {}};
  HttpResponse response;
  bool streamed = false;  // the body is handed over only after a 200
  try {
    response = transport_->Stream(
        request,
        [&](std::string_view chunk) {
          streamed = true;
          parser.Feed(chunk, deliver);
          return !stop.stopped();
        },
        stop);
  } catch (...) {
    // An ERROR event or a stream cut short after it began was answered 200; else no answer.
    metrics_->CountRequest(request.method, streamed ? 200 : 0);
    throw;
  }
  metrics_->CountRequest(request.method, response.status);
  if (stop.stopped()) return;
  if (response.status == 401 && transport_->tokens().Refresh()) {
    throw ApiError(ErrorCode::kUnauthorized, what + ": token rotated, reconnect", 401);
  }
  if (response.status != 200) {
    throw ErrorFromResponse(what, response.status, response.body, response.retry_after);
  }
  parser.Finish();
}

}  // namespace ncclguard::kube
