// HTTP to the API server on libcurl: TLS and credentials from a ClientConfig, a pool of
// easy handles so connections are kept alive, and streaming requests (watches) that a
// StopToken ends at once through the multi interface's wakeup.
#pragma once

#include <chrono>
#include <filesystem>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "kube/config.h"
#include "kube/stop_token.h"

namespace ncclguard::kube {

struct HttpRequest {
  std::string method = "GET";
  std::string path;  // /api/... or /apis/..., with the query string
  std::string body;
  std::string content_type = "application/json";
  std::chrono::milliseconds timeout{30000};  // whole request; ignored for streams
};

struct HttpResponse {
  long status = 0;
  std::string body;
  std::chrono::seconds retry_after{0};  // from the Retry-After header
};

// The bearer token, re-read from its file when the file changes (rotation) or when forced.
class TokenSource {
 public:
  TokenSource(std::string token, std::string token_file);
  std::string Token();
  // After a 401: re-read the file; true when the token changed.
  bool Refresh();

 private:
  std::mutex mutex_;
  std::string token_;
  std::string token_file_;
  std::filesystem::file_time_type file_time_{};
};

class Transport {
 public:
  explicit Transport(ClientConfig config);
  ~Transport();
  Transport(const Transport&) = delete;
  Transport& operator=(const Transport&) = delete;

  // Sends the request and reads the whole response. Throws ApiError(kTransport) when no
  // response arrived; HTTP errors are returned, not thrown.
  HttpResponse Perform(const HttpRequest& request);

  // Sends the request and hands the body to `on_data` as it arrives (only when the status is
  // 200; otherwise the body is collected into the result). Returns when the server ends the
  // response, `on_data` returns false, or `stop` fires (then status is what it was).
  // Exceptions thrown by `on_data` end the stream and are rethrown here.
  HttpResponse Stream(const HttpRequest& request,
                      const std::function<bool(std::string_view chunk)>& on_data,
                      const StopToken& stop);

  const ClientConfig& config() const { return config_; }
  TokenSource& tokens() { return tokens_; }

 private:
  void* AcquireHandle();
  void ReleaseHandle(void* handle);
  void Prepare(void* handle, const HttpRequest& request, void* headers_list) const;

  ClientConfig config_;
  TokenSource tokens_;
  std::mutex pool_mutex_;
  std::vector<void*> idle_handles_;
};

}  // namespace ncclguard::kube
