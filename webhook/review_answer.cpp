#include "webhook/review_answer.h"

#include <utility>

namespace ncclguard::webhook {
namespace {

RequestSummary Summarize(const AdmissionRequest& request) {
  return {request.uid,        request.operation, request.kind.kind,
          request.namespace_, request.name,      request.dry_run};
}

// The answer's bytes. Encoding fails only on an answer built wrong: the request is then denied
// (fail closed) and counted as an internal error.
std::string EncodeAnswer(AdmissionOutcome& outcome) {
  try {
    return EncodeAdmissionReview(outcome.response);
  } catch (const std::exception& e) {
    AdmissionResponse denial;
    denial.uid = outcome.response.uid;
    denial.allowed = false;
    denial.status_code = 500;
    denial.message = std::string("ncclguard internal error encoding the answer: ") + e.what();
    outcome.response = std::move(denial);
    outcome.result = AdmitResult::Error;
    return EncodeAdmissionReview(outcome.response);
  }
}

}  // namespace

ReviewAnswer AnswerReview(Endpoint endpoint, std::string_view body, const core::Policy& policy,
                          const AdmitOptions& options, std::optional<core::Mode> mode) {
  ReviewAnswer answer;
  AdmissionRequest admission;
  try {
    admission = ParseAdmissionReview(body);
  } catch (const ReviewError& e) {
    answer.error = e.what();
    return answer;
  }
  answer.decoded = true;
  answer.request = Summarize(admission);
  answer.outcome = Admit(endpoint, std::move(admission), policy, options, mode);
  answer.body = EncodeAnswer(answer.outcome);
  return answer;
}

}  // namespace ncclguard::webhook
