#include "test_kube_client.h"

#include <curl/curl.h>

#include <memory>
#include <mutex>
#include <stdexcept>
#include <thread>

namespace ncclguard::testenv {
namespace {

void InitCurlOnce() {
  static std::once_flag once;
  std::call_once(once, [] {
    if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK)
      throw std::runtime_error("curl_global_init failed");
  });
}

CURL* Handle(const std::shared_ptr<void>& curl) { return static_cast<CURL*>(curl.get()); }

void ApplyTls(CURL* curl, const ControlPlaneInfo& info) {
  curl_easy_setopt(curl, CURLOPT_CAINFO, info.ca_file.c_str());
  curl_easy_setopt(curl, CURLOPT_SSLCERT, info.admin_cert_file.c_str());
  curl_easy_setopt(curl, CURLOPT_SSLKEY, info.admin_key_file.c_str());
  curl_easy_setopt(curl, CURLOPT_NOSIGNAL, 1L);
}

size_t AppendToString(char* data, size_t size, size_t count, void* sink) {
  static_cast<std::string*>(sink)->append(data, size * count);
  return size * count;
}

struct WatchState {
  std::string pending;
  WatchResult* result;
  const std::function<bool(const nlohmann::json&)>* until;
};

// Splits the stream into lines (one event each); returning 0 aborts the
// transfer once the predicate is satisfied.
size_t ConsumeWatchStream(char* data, size_t size, size_t count, void* raw_state) {
  auto* state = static_cast<WatchState*>(raw_state);
  state->pending.append(data, size * count);
  for (auto newline = state->pending.find('\n'); newline != std::string::npos;
       newline = state->pending.find('\n')) {
    std::string line = state->pending.substr(0, newline);
    state->pending.erase(0, newline + 1);
    if (line.empty()) continue;
    auto event = nlohmann::json::parse(line, nullptr, false);
    if (event.is_discarded()) {
      state->result->error = "watch: undecodable event: " + line;
      return 0;
    }
    state->result->events.push_back(event);
    if ((*state->until)(event)) {
      state->result->matched = true;
      return 0;
    }
  }
  return size * count;
}

}  // namespace

nlohmann::json KubeResponse::Json() const {
  auto parsed = nlohmann::json::parse(body, nullptr, false);
  if (parsed.is_discarded())
    throw std::runtime_error("response is not JSON (HTTP " + std::to_string(status) + "): " + body);
  return parsed;
}

TestKubeClient::TestKubeClient(const ControlPlaneInfo& info) : info_(info) {
  InitCurlOnce();
  curl_ = std::shared_ptr<void>(curl_easy_init(),
                                [](void* c) { curl_easy_cleanup(static_cast<CURL*>(c)); });
  if (!curl_) throw std::runtime_error("curl_easy_init failed");
}

TestKubeClient::~TestKubeClient() = default;

KubeResponse TestKubeClient::Request(const std::string& method, const std::string& path,
                                     const std::string& body, const std::string& content_type) {
  CURL* curl = Handle(curl_);
  curl_easy_reset(curl);
  ApplyTls(curl, info_);
  std::string url = info_.apiserver_url + path;
  curl_easy_setopt(curl, CURLOPT_URL, url.c_str());
  curl_easy_setopt(curl, CURLOPT_CUSTOMREQUEST, method.c_str());
  curl_easy_setopt(curl, CURLOPT_TIMEOUT_MS, 30000L);
  curl_slist* headers = curl_slist_append(nullptr, "Accept: application/json");
  if (!body.empty() || method == "POST" || method == "PUT" || method == "PATCH") {
    headers = curl_slist_append(headers, ("Content-Type: " + content_type).c_str());
    curl_easy_setopt(curl, CURLOPT_POSTFIELDS, body.c_str());
    curl_easy_setopt(curl, CURLOPT_POSTFIELDSIZE_LARGE, static_cast<curl_off_t>(body.size()));
  }
  curl_easy_setopt(curl, CURLOPT_HTTPHEADER, headers);

  KubeResponse response;
  curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, AppendToString);
  curl_easy_setopt(curl, CURLOPT_WRITEDATA, &response.body);
  CURLcode code = curl_easy_perform(curl);
  curl_slist_free_all(headers);
  if (code != CURLE_OK) {
    response.error = method + " " + url + ": " + curl_easy_strerror(code);
    return response;
  }
  curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &response.status);
  return response;
}

WatchResult TestKubeClient::Watch(const std::string& path,
                                  const std::function<bool(const nlohmann::json&)>& until,
                                  std::chrono::milliseconds timeout) {
  // A watch holds its connection open, so it gets its own handle and may
  // run on another thread than Request().
  std::unique_ptr<CURL, decltype(&curl_easy_cleanup)> curl(curl_easy_init(), curl_easy_cleanup);
  WatchResult result;
  if (!curl) {
    result.error = "curl_easy_init failed";
    return result;
  }
  ApplyTls(curl.get(), info_);
  std::string url =
      info_.apiserver_url + path + (path.find('?') == std::string::npos ? "?" : "&") + "watch=1";
  WatchState state{"", &result, &until};
  curl_easy_setopt(curl.get(), CURLOPT_URL, url.c_str());
  curl_easy_setopt(curl.get(), CURLOPT_TIMEOUT_MS, static_cast<long>(timeout.count()));
  curl_easy_setopt(curl.get(), CURLOPT_WRITEFUNCTION, ConsumeWatchStream);
  curl_easy_setopt(curl.get(), CURLOPT_WRITEDATA, &state);
  CURLcode code = curl_easy_perform(curl.get());
  long status = 0;
  curl_easy_getinfo(curl.get(), CURLINFO_RESPONSE_CODE, &status);
  if (result.matched || !result.error.empty()) return result;
  if (status != 0 && status != 200) {
    result.error = "watch " + url + ": HTTP " + std::to_string(status) + ": " + state.pending;
  } else if (code == CURLE_OPERATION_TIMEDOUT) {
    result.error =
        "watch " + url + ": no matching event within " + std::to_string(timeout.count()) + " ms";
  } else {
    result.error = "watch " + url + ": " + curl_easy_strerror(code);
  }
  return result;
}

bool Eventually(const std::function<bool()>& condition, std::chrono::milliseconds timeout,
                std::chrono::milliseconds interval) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  while (true) {
    if (condition()) return true;
    if (std::chrono::steady_clock::now() >= deadline) return false;
    std::this_thread::sleep_for(interval);
  }
}

std::string CreateTestNamespace(TestKubeClient& client, const std::string& prefix,
                                const nlohmann::json& labels) {
  nlohmann::json ns = {{"apiVersion", "v1"},
                       {"kind", "Namespace"},
                       {"metadata", {{"generateName", prefix + "-"}, {"labels", labels}}}};
  KubeResponse created = client.Post("/api/v1/namespaces", ns);
  if (created.status != 201) {
    throw std::runtime_error("creating namespace " + prefix + "-*: HTTP " +
                             std::to_string(created.status) + " " + created.error + created.body);
  }
  return created.Json()["metadata"]["name"].get<std::string>();
}

}  // namespace ncclguard::testenv
