// One admission request from body bytes to answer bytes: decode, evaluate, encode. The server's
// request path and the fuzzer (fuzz/webhook_review.cpp) both call this, so what is fuzzed is
// what serves. Pure: no I/O.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "core/policy.h"
#include "webhook/admission_handler.h"

namespace ncclguard::webhook {

// What the admission log line says about a request, taken before Admit consumes it.
struct RequestSummary {
  std::string uid;
  std::string operation;
  std::string kind;
  std::string namespace_;
  std::string name;
  bool dry_run = false;
};

struct ReviewAnswer {
  // false: the body is not an AdmissionReview (answered with HTTP 400 and `error`).
  bool decoded = false;
  std::string body;   // decoded: the AdmissionReview JSON answered with HTTP 200
  std::string error;  // not decoded: why
  RequestSummary request;
  AdmissionOutcome outcome;
};

// Never throws for any body: an undecodable body is `decoded == false`, a rule or encoding
// failure is a denial (fail closed) counted as AdmitResult::Error. `mode`: Admit's.
ReviewAnswer AnswerReview(Endpoint endpoint, std::string_view body, const core::Policy& policy,
                          const AdmitOptions& options,
                          std::optional<core::Mode> mode = std::nullopt);

}  // namespace ncclguard::webhook
