// The AdmissionReview admission.k8s.io/v1 wire format: what kube-apiserver sends to a webhook
// and what it expects back. Pure: bytes in, bytes out.
#pragma once

#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "core/json.h"

namespace ncclguard::webhook {

// A request the webhook cannot answer as an AdmissionReview (HTTP 400 with this reason).
class ReviewError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

struct GroupVersionKind {
  std::string group;
  std::string version;
  std::string kind;

  std::string ApiVersion() const { return group.empty() ? version : group + "/" + version; }
};

struct AdmissionRequest {
  std::string uid;
  GroupVersionKind kind;
  std::string operation;  // CREATE, UPDATE, DELETE, CONNECT
  std::string namespace_;
  std::string name;
  std::string sub_resource;
  bool dry_run = false;
  core::Json object;      // null for DELETE and CONNECT
  core::Json old_object;  // UPDATE only; null otherwise
};

// Parses and checks a review: apiVersion/kind, request.uid, request.kind, operation, and that
// request.object is the kind the request claims. Throws ReviewError naming what is wrong.
AdmissionRequest ParseAdmissionReview(std::string_view body);

struct AdmissionResponse {
  std::string uid;
  bool allowed = true;
  core::Json patch;  // RFC 6902 operations; null or empty = no patch
  std::vector<std::string> warnings;
  // For denials: HTTP-style code, reason and the message kubectl prints.
  int status_code = 0;
  std::string status_reason;
  std::string message;
};

// The AdmissionReview answer: patchType JSONPatch with a base64 patch, warnings, status.
std::string EncodeAdmissionReview(const AdmissionResponse& response);

std::string Base64Encode(std::string_view bytes);

}  // namespace ncclguard::webhook
