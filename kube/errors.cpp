#include "kube/errors.h"

#include <utility>

#include "core/json.h"
#include "core/json_reader.h"

namespace ncclguard::kube {

const char* ErrorCodeName(ErrorCode code) {
  switch (code) {
    case ErrorCode::kTransport:
      return "Transport";
    case ErrorCode::kDecode:
      return "Decode";
    case ErrorCode::kBadRequest:
      return "BadRequest";
    case ErrorCode::kUnauthorized:
      return "Unauthorized";
    case ErrorCode::kForbidden:
      return "Forbidden";
    case ErrorCode::kNotFound:
      return "NotFound";
    case ErrorCode::kMethodNotAllowed:
      return "MethodNotAllowed";
    case ErrorCode::kAlreadyExists:
      return "AlreadyExists";
    case ErrorCode::kConflict:
      return "Conflict";
    case ErrorCode::kGone:
      return "Gone";
    case ErrorCode::kInvalid:
      return "Invalid";
    case ErrorCode::kTooManyRequests:
      return "TooManyRequests";
    case ErrorCode::kServerError:
      return "ServerError";
    case ErrorCode::kUnknown:
      return "Unknown";
  }
  return "Unknown";
}

ApiError::ApiError(ErrorCode code, std::string message, long http_status, std::string reason,
                   std::chrono::seconds retry_after)
    : std::runtime_error(std::move(message)),
      code_(code),
      http_status_(http_status),
      reason_(std::move(reason)),
      retry_after_(retry_after) {}

ErrorCode ClassifyStatus(long http_status, const std::string& reason) {
  if (reason == "AlreadyExists") return ErrorCode::kAlreadyExists;
  if (reason == "Conflict") return ErrorCode::kConflict;
  if (reason == "Expired" || reason == "Gone") return ErrorCode::kGone;
  if (reason == "NotFound") return ErrorCode::kNotFound;
  if (reason == "Invalid") return ErrorCode::kInvalid;
  if (reason == "Forbidden") return ErrorCode::kForbidden;
  if (reason == "Unauthorized") return ErrorCode::kUnauthorized;
  if (reason == "TooManyRequests") return ErrorCode::kTooManyRequests;
  switch (http_status) {
    case 400:
      return ErrorCode::kBadRequest;
    case 401:
      return ErrorCode::kUnauthorized;
    case 403:
      return ErrorCode::kForbidden;
    case 404:
      return ErrorCode::kNotFound;
    case 405:
      return ErrorCode::kMethodNotAllowed;
    case 409:
      return ErrorCode::kConflict;
    case 410:
      return ErrorCode::kGone;
    case 422:
      return ErrorCode::kInvalid;
    case 429:
      return ErrorCode::kTooManyRequests;
    default:
      break;
  }
  if (http_status >= 500 && http_status < 600) return ErrorCode::kServerError;
  return ErrorCode::kUnknown;
}

ApiError ErrorFromResponse(const std::string& what, long http_status, const std::string& body,
                           std::chrono::seconds retry_after) {
  std::string message = body;
  std::string reason;
  long code = http_status;
  core::Json status;
  try {
    status = core::ReadJson(body);
  } catch (const core::JsonReadError&) {
    // not a Status: the body is the message
  }
  if (status.is_object() && status.value("kind", "") == "Status") {
    message = status.value("message", "");
    reason = status.value("reason", "");
    if (status.contains("code") && status["code"].is_number_integer()) code = status["code"];
    if (retry_after.count() == 0 && status.contains("details") && status["details"].is_object() &&
        status["details"].contains("retryAfterSeconds") &&
        status["details"]["retryAfterSeconds"].is_number_integer()) {
      retry_after = std::chrono::seconds(status["details"]["retryAfterSeconds"].get<long>());
    }
  }
  if (message.size() > 2048) message = message.substr(0, 2048) + "...";
  ErrorCode error_code = ClassifyStatus(code, reason);
  std::string text = what + ": HTTP " + std::to_string(http_status) + " " +
                     ErrorCodeName(error_code) + (message.empty() ? "" : ": " + message);
  return ApiError(error_code, text, http_status, reason, retry_after);
}

bool IsRetryable(ErrorCode code) {
  return code == ErrorCode::kTransport || code == ErrorCode::kTooManyRequests ||
         code == ErrorCode::kServerError;
}

}  // namespace ncclguard::kube
