// One error type for every failed API call: the code says what went wrong (from the
// Status body's reason, else the HTTP status), the message is the server's.
#pragma once

#include <chrono>
#include <stdexcept>
#include <string>

namespace ncclguard::kube {

enum class ErrorCode {
  kTransport,         // no HTTP response: connection refused, TLS failure, timeout
  kDecode,            // a response or watch line that is not the JSON we expect
  kBadRequest,        // 400
  kUnauthorized,      // 401
  kForbidden,         // 403
  kNotFound,          // 404
  kMethodNotAllowed,  // 405
  kAlreadyExists,     // 409, reason AlreadyExists
  kConflict,          // 409, reason Conflict (stale resourceVersion)
  kGone,              // 410, or reason Expired / Gone (resourceVersion too old)
  kInvalid,           // 422
  kTooManyRequests,   // 429; retry_after() says when
  kServerError,       // 5xx
  kUnknown,
};

const char* ErrorCodeName(ErrorCode code);

class ApiError : public std::runtime_error {
 public:
  ApiError(ErrorCode code, std::string message, long http_status = 0, std::string reason = "",
           std::chrono::seconds retry_after = std::chrono::seconds(0));

  ErrorCode code() const { return code_; }
  long http_status() const { return http_status_; }
  const std::string& reason() const { return reason_; }  // Status.reason as the server sent it
  std::chrono::seconds retry_after() const { return retry_after_; }

 private:
  ErrorCode code_;
  long http_status_;
  std::string reason_;
  std::chrono::seconds retry_after_;
};

// A kubeconfig or in-cluster environment that cannot be used; the message names the field.
class ConfigError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// The code for an HTTP status and Status.reason (reason wins where it is more precise).
ErrorCode ClassifyStatus(long http_status, const std::string& reason);

// An ApiError from a failed response: the Status body's message, reason and code when the
// body is a Status, else the body itself. `what` names the request ("GET /api/v1/...").
ApiError ErrorFromResponse(const std::string& what, long http_status, const std::string& body,
                           std::chrono::seconds retry_after = std::chrono::seconds(0));

// Whether retrying the same request later may succeed.
bool IsRetryable(ErrorCode code);

}  // namespace ncclguard::kube
