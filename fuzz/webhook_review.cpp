// The webhook's request path, from the raw HTTP body to the answer's bytes, for both endpoints:
// webhook::AnswerReview is what WebhookServer::AnswerReview calls, and it must never throw.
// Properties: the answer is an AdmissionReview for the same uid; no request ends in an internal
// error; a patch applies to the request's object; every guide link in a message exists; what a
// review allocates at its peak is bounded by its size (memory/allocation_budget.h counts it). In
// audit mode (the /validate/audit path, a policy's mode: audit) every request is admitted
// without a patch.
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

#include "fuzz/fuzz_support.h"
#include "memory/allocation_budget.h"
#include "webhook/review_answer.h"

namespace {

using ncclguard::core::Json;
using namespace ncclguard;

std::string Base64Decode(std::string_view text) {
  std::string out;
  std::uint32_t bits = 0;
  int count = 0;
  for (char c : text) {
    int v;
    if (c >= 'A' && c <= 'Z') {
      v = c - 'A';
    } else if (c >= 'a' && c <= 'z') {
      v = c - 'a' + 26;
    } else if (c >= '0' && c <= '9') {
      v = c - '0' + 52;
    } else if (c == '+') {
      v = 62;
    } else if (c == '/') {
      v = 63;
    } else {
      continue;
    }
    bits = (bits << 6) | static_cast<std::uint32_t>(v);
    count += 6;
    if (count >= 8) {
      count -= 8;
      out.push_back(static_cast<char>((bits >> count) & 0xFF));
    }
  }
  return out;
}

void CheckAnswer(webhook::Endpoint endpoint, std::string_view body,
                 const webhook::ReviewAnswer& answer) {
  const std::string where(webhook::EndpointName(endpoint));
  if (!answer.decoded) {
    fuzz::Require(!answer.error.empty(), "a refused review says why", where);
    return;
  }
  fuzz::Require(answer.outcome.result != webhook::AdmitResult::Error,
                "no request ends in an internal error",
                where + ": " + answer.outcome.response.message);
  const Json review = Json::parse(answer.body, nullptr, false);
  fuzz::Require(!review.is_discarded() && review.is_object(), "the answer is JSON", answer.body);
  const Json& response = review.at("response");
  fuzz::Require(response.at("uid") == answer.request.uid, "the answer carries the request's uid");
  fuzz::RequireGuideLinksExist(answer.outcome.response.message, where + " message", body);
  for (const std::string& warning : answer.outcome.response.warnings) {
    fuzz::RequireGuideLinksExist(warning, where + " warning", body);
  }
  for (const auto& finding : answer.outcome.findings) {
    fuzz::Require(fuzz::GuideLinkExists(finding.guide), "every finding has a guide link",
                  finding.rule + " " + finding.guide);
  }
  if (response.contains("patch")) {
    fuzz::Require(response.value("patchType", "") == "JSONPatch", "a patch says JSONPatch");
    const Json patch =
        Json::parse(Base64Decode(response.at("patch").get<std::string>()), nullptr, false);
    fuzz::Require(patch.is_array(), "the patch is a JSON array of operations");
    const Json object = Json::parse(body).at("request").at("object");
    try {
      (void)object.patch(patch);
    } catch (const std::exception& e) {
      fuzz::Fail("the JSONPatch applies to the request's object", e.what());
    }
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static const core::Policy policy = core::Policy::Defaults();
  static const webhook::AdmitOptions options{.exempt_namespaces = {"ncclguard-system"}};
  const std::string_view body(reinterpret_cast<const char*>(data), size);
  for (webhook::Endpoint endpoint : {webhook::Endpoint::Mutate, webhook::Endpoint::Validate}) {
    for (const std::optional<core::Mode> mode :
         {std::optional<core::Mode>(), std::optional(core::Mode::Audit)}) {
      webhook::ReviewAnswer answer;
      std::size_t peak = 0;
      {
        memory::BudgetScope counted(~std::size_t{0}, nullptr);
        answer = webhook::AnswerReview(endpoint, body, policy, options, mode);
        peak = counted.Peak();
      }
      fuzz::RequireMemoryBoundedBySize(peak, size, webhook::EndpointName(endpoint));
      CheckAnswer(endpoint, body, answer);
      if (mode && answer.decoded) {
        const Json review = Json::parse(answer.body);
        const Json& response = review.at("response");
        fuzz::Require(response.at("allowed") == true && !response.contains("patch"),
                      "audit mode admits every request without a patch", answer.body);
      }
    }
  }
  return 0;
}
