#include "kube/transport.h"

#include <curl/curl.h>

#include <cstdlib>
#include <exception>
#include <fstream>
#include <sstream>
#include <utility>

#include "kube/errors.h"

namespace ncclguard::kube {
namespace {

void InitCurlOnce() {
  static std::once_flag once;
  std::call_once(once, [] {
    if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK) {
      throw ApiError(ErrorCode::kTransport, "curl_global_init failed");
    }
  });
}

std::string TrimToken(std::string text) {
  while (!text.empty() && (text.back() == '\n' || text.back() == '\r' || text.back() == ' ')) {
    text.pop_back();
  }
  return text;
}

std::string Describe(const HttpRequest& request, const std::string& server) {
  return request.method + " " + server + request.path;
}

struct ResponseSink {
  HttpResponse* response;
  CURL* handle = nullptr;
  const std::function<bool(std::string_view)>* on_data = nullptr;  // null: collect the body
  std::exception_ptr error;
  bool aborted_by_callback = false;
};

size_t WriteBody(char* data, size_t size, size_t count, void* raw) {
  auto* sink = static_cast<ResponseSink*>(raw);
  size_t bytes = size * count;
  if (sink->on_data == nullptr) {
    sink->response->body.append(data, bytes);
    return bytes;
  }
  long status = 0;
  curl_easy_getinfo(sink->handle, CURLINFO_RESPONSE_CODE, &status);
  if (status != 200) {
    if (sink->response->body.size() < 65536) sink->response->body.append(data, bytes);
    return bytes;
  }
  try {
    if ((*sink->on_data)(std::string_view(data, bytes))) return bytes;
  } catch (...) {
    sink->error = std::current_exception();
  }
  sink->aborted_by_callback = true;
  return 0;  // aborts the transfer (CURLE_WRITE_ERROR)
}

size_t ReadHeader(char* data, size_t size, size_t count, void* raw) {
  auto* sink = static_cast<ResponseSink*>(raw);
  std::string_view line(data, size * count);
  constexpr std::string_view kRetryAfter = "retry-after:";
  if (line.size() > kRetryAfter.size()) {
    std::string name(line.substr(0, kRetryAfter.size()));
    for (char& c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    if (name == kRetryAfter) {
      long seconds = std::strtol(std::string(line.substr(kRetryAfter.size())).c_str(), nullptr, 10);
      if (seconds > 0) sink->response->retry_after = std::chrono::seconds(seconds);
    }
  }
  return size * count;
}

void SetBlob(CURL* handle, CURLoption option, const std::string& data) {
  curl_blob blob{const_cast<char*>(data.data()), data.size(), CURL_BLOB_COPY};
  curl_easy_setopt(handle, option, &blob);
}

// The multi handle of one stream, reachable from a StopToken callback that may run after
// the stream ended; the mutex makes "wake" and "clean up" exclusive.
struct Waker {
  std::mutex mutex;
  CURLM* multi = nullptr;
};

}  // namespace

TokenSource::TokenSource(std::string token, std::string token_file)
    : token_(std::move(token)), token_file_(std::move(token_file)) {}

std::string TokenSource::Token() {
  std::lock_guard lock(mutex_);
  if (token_file_.empty()) return token_;
  std::error_code error;
  auto time = std::filesystem::last_write_time(token_file_, error);
  if (!error && (time != file_time_ || token_.empty())) {
    std::ifstream in(token_file_);
    std::ostringstream text;
    text << in.rdbuf();
    std::string token = TrimToken(text.str());
    if (in && !token.empty()) {
      token_ = token;
      file_time_ = time;
    }
  }
  return token_;
}

bool TokenSource::Refresh() {
  std::string before;
  {
    std::lock_guard lock(mutex_);
    if (token_file_.empty()) return false;
    before = token_;
    file_time_ = {};
  }
  return Token() != before;
}

Transport::Transport(ClientConfig config)
    : config_(std::move(config)), tokens_(config_.token, config_.token_file) {
  InitCurlOnce();
}

Transport::~Transport() {
  for (void* handle : idle_handles_) curl_easy_cleanup(static_cast<CURL*>(handle));
}

void* Transport::AcquireHandle() {
  {
    std::lock_guard lock(pool_mutex_);
    if (!idle_handles_.empty()) {
      void* handle = idle_handles_.back();
      idle_handles_.pop_back();
      return handle;
    }
  }
  CURL* handle = curl_easy_init();
  if (handle == nullptr) throw ApiError(ErrorCode::kTransport, "curl_easy_init failed");
  return handle;
}

void Transport::ReleaseHandle(void* handle) {
  std::lock_guard lock(pool_mutex_);
  // A few idle handles keep their connections warm; more would only hold sockets.
  if (idle_handles_.size() < 8) {
    idle_handles_.push_back(handle);
  } else {
    curl_easy_cleanup(static_cast<CURL*>(handle));
  }
}

void Transport::Prepare(void* raw, const HttpRequest& request, void* headers_list) const {
  CURL* handle = static_cast<CURL*>(raw);
  curl_easy_reset(handle);
  std::string url = config_.server + request.path;
  curl_easy_setopt(handle, CURLOPT_URL, url.c_str());
  curl_easy_setopt(handle, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(handle, CURLOPT_CONNECTTIMEOUT_MS, 10000L);
  curl_easy_setopt(handle, CURLOPT_TCP_KEEPALIVE, 1L);
  curl_easy_setopt(handle, CURLOPT_TCP_KEEPIDLE, 30L);
  curl_easy_setopt(handle, CURLOPT_TCP_KEEPINTVL, 10L);
  curl_easy_setopt(handle, CURLOPT_USERAGENT, "ncclguard/0.1");
  curl_easy_setopt(handle, CURLOPT_ACCEPT_ENCODING, "");
  if (request.method == "GET") {
    curl_easy_setopt(handle, CURLOPT_HTTPGET, 1L);
  } else {
    curl_easy_setopt(handle, CURLOPT_CUSTOMREQUEST, request.method.c_str());
  }
  if (!request.body.empty() || request.method == "POST" || request.method == "PUT" ||
      request.method == "PATCH") {
    curl_easy_setopt(handle, CURLOPT_POSTFIELDSIZE_LARGE,
                     static_cast<curl_off_t>(request.body.size()));
    curl_easy_setopt(handle, CURLOPT_COPYPOSTFIELDS, request.body.c_str());
  }
  curl_easy_setopt(handle, CURLOPT_HTTPHEADER, static_cast<curl_slist*>(headers_list));

  if (!config_.ca_data.empty()) {
    SetBlob(handle, CURLOPT_CAINFO_BLOB, config_.ca_data);
  } else if (!config_.ca_file.empty()) {
    curl_easy_setopt(handle, CURLOPT_CAINFO, config_.ca_file.c_str());
  }
  if (config_.insecure_skip_tls_verify) {
    curl_easy_setopt(handle, CURLOPT_SSL_VERIFYPEER, 0L);
    curl_easy_setopt(handle, CURLOPT_SSL_VERIFYHOST, 0L);
  }
  if (!config_.client_cert_data.empty()) {
    curl_easy_setopt(handle, CURLOPT_SSLCERTTYPE, "PEM");
    SetBlob(handle, CURLOPT_SSLCERT_BLOB, config_.client_cert_data);
  } else if (!config_.client_cert_file.empty()) {
    curl_easy_setopt(handle, CURLOPT_SSLCERT, config_.client_cert_file.c_str());
  }
  if (!config_.client_key_data.empty()) {
    curl_easy_setopt(handle, CURLOPT_SSLKEYTYPE, "PEM");
    SetBlob(handle, CURLOPT_SSLKEY_BLOB, config_.client_key_data);
  } else if (!config_.client_key_file.empty()) {
    curl_easy_setopt(handle, CURLOPT_SSLKEY, config_.client_key_file.c_str());
  }
}

namespace {

curl_slist* Headers(const HttpRequest& request, const std::string& token,
                    const ClientConfig& config) {
  curl_slist* headers = curl_slist_append(nullptr, "Accept: application/json");
  if (!config.impersonate_user.empty()) {
    headers = curl_slist_append(headers, ("Impersonate-User: " + config.impersonate_user).c_str());
    // One header per group: the API server reads them as a list.
    for (const std::string& group : config.impersonate_groups) {
      headers = curl_slist_append(headers, ("Impersonate-Group: " + group).c_str());
    }
    if (!config.impersonate_uid.empty()) {
      headers = curl_slist_append(headers, ("Impersonate-Uid: " + config.impersonate_uid).c_str());
    }
  }
  if (!request.body.empty() || request.method == "POST" || request.method == "PUT" ||
      request.method == "PATCH") {
    headers = curl_slist_append(headers, ("Content-Type: " + request.content_type).c_str());
  }
  if (!token.empty())
    headers = curl_slist_append(headers, ("Authorization: Bearer " + token).c_str());
  return headers;
}

}  // namespace

HttpResponse Transport::Perform(const HttpRequest& request) {
  std::unique_ptr<curl_slist, decltype(&curl_slist_free_all)> headers(
      Headers(request, tokens_.Token(), config_), curl_slist_free_all);
  CURL* handle = static_cast<CURL*>(AcquireHandle());
  HttpResponse response;
  ResponseSink sink{&response, nullptr, nullptr, nullptr, false};
  CURLcode code;
  try {
    Prepare(handle, request, headers.get());
    curl_easy_setopt(handle, CURLOPT_TIMEOUT_MS, static_cast<long>(request.timeout.count()));
    curl_easy_setopt(handle, CURLOPT_WRITEFUNCTION, WriteBody);
    curl_easy_setopt(handle, CURLOPT_WRITEDATA, &sink);
    curl_easy_setopt(handle, CURLOPT_HEADERFUNCTION, ReadHeader);
    curl_easy_setopt(handle, CURLOPT_HEADERDATA, &sink);
    code = curl_easy_perform(handle);
    curl_easy_getinfo(handle, CURLINFO_RESPONSE_CODE, &response.status);
  } catch (...) {
    ReleaseHandle(handle);
    throw;
  }
  ReleaseHandle(handle);
  if (code != CURLE_OK) {
    throw ApiError(ErrorCode::kTransport,
                   Describe(request, config_.server) + ": " + curl_easy_strerror(code));
  }
  return response;
}

HttpResponse Transport::Stream(const HttpRequest& request,
                               const std::function<bool(std::string_view)>& on_data,
                               const StopToken& stop) {
  std::unique_ptr<curl_slist, decltype(&curl_slist_free_all)> headers(
      Headers(request, tokens_.Token(), config_), curl_slist_free_all);
  // A stream holds its connection for minutes; it gets a handle of its own, not a pooled one.
  std::unique_ptr<CURL, decltype(&curl_easy_cleanup)> handle(curl_easy_init(), curl_easy_cleanup);
  auto waker = std::make_shared<Waker>();
  waker->multi = curl_multi_init();
  if (!handle || waker->multi == nullptr) {
    if (waker->multi) curl_multi_cleanup(waker->multi);
    throw ApiError(ErrorCode::kTransport, "curl init failed");
  }
  HttpResponse response;
  ResponseSink sink{&response, handle.get(), &on_data, nullptr, false};
  Prepare(handle.get(), request, headers.get());
  curl_easy_setopt(handle.get(), CURLOPT_WRITEFUNCTION, WriteBody);
  curl_easy_setopt(handle.get(), CURLOPT_WRITEDATA, &sink);
  curl_easy_setopt(handle.get(), CURLOPT_HEADERFUNCTION, ReadHeader);
  curl_easy_setopt(handle.get(), CURLOPT_HEADERDATA, &sink);
  curl_multi_add_handle(waker->multi, handle.get());
  int wake_id = stop.OnStop([waker] {
    std::lock_guard lock(waker->mutex);
    if (waker->multi != nullptr) curl_multi_wakeup(waker->multi);
  });

  CURLcode result = CURLE_OK;
  bool finished = false;
  while (!stop.stopped()) {
    int running = 0;
    CURLMcode multi_code = curl_multi_perform(waker->multi, &running);
    if (multi_code != CURLM_OK) {
      result = CURLE_RECV_ERROR;
      finished = true;
      break;
    }
    int queued = 0;
    while (CURLMsg* message = curl_multi_info_read(waker->multi, &queued)) {
      if (message->msg == CURLMSG_DONE) {
        result = message->data.result;
        finished = true;
      }
    }
    if (finished || running == 0) break;
    curl_multi_poll(waker->multi, nullptr, 0, 1000, nullptr);
  }
  stop.RemoveOnStop(wake_id);
  curl_easy_getinfo(handle.get(), CURLINFO_RESPONSE_CODE, &response.status);
  {
    std::lock_guard lock(waker->mutex);
    curl_multi_remove_handle(waker->multi, handle.get());
    curl_multi_cleanup(waker->multi);
    waker->multi = nullptr;
  }
  if (sink.error) std::rethrow_exception(sink.error);
  if (finished && result != CURLE_OK && !sink.aborted_by_callback) {
    throw ApiError(ErrorCode::kTransport,
                   Describe(request, config_.server) + ": " + curl_easy_strerror(result));
  }
  return response;
}

}  // namespace ncclguard::kube
