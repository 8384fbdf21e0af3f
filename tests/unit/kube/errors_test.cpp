// Typed errors from the API server's Status bodies.
#include <gtest/gtest.h>

#include <string>

#include "kube/errors.h"
#include "kube/resource.h"

namespace ncclguard::kube {
namespace {

std::string Status(long code, const std::string& reason, const std::string& message,
                   const std::string& details = "") {
  return R"({"kind":"Status","apiVersion":"v1","status":"Failure","message":")" + message +
         R"(","reason":")" + reason + R"(","code":)" + std::to_string(code) +
         (details.empty() ? "" : R"(,"details":)" + details) + "}";
}

TEST(ApiErrors, StatusReasonsBecomeCodesWithTheServersMessage) {
  struct Case {
    long http;
    std::string reason;
    ErrorCode expected;
  };
  for (const auto& c : std::vector<Case>{
           {404, "NotFound", ErrorCode::kNotFound},
           {409, "AlreadyExists", ErrorCode::kAlreadyExists},
           {409, "Conflict", ErrorCode::kConflict},
           {410, "Expired", ErrorCode::kGone},
           {410, "Gone", ErrorCode::kGone},
           {403, "Forbidden", ErrorCode::kForbidden},
           {401, "Unauthorized", ErrorCode::kUnauthorized},
           {422, "Invalid", ErrorCode::kInvalid},
           {400, "BadRequest", ErrorCode::kBadRequest},
           {500, "InternalError", ErrorCode::kServerError},
           {503, "ServiceUnavailable", ErrorCode::kServerError},
       }) {
    ApiError error = ErrorFromResponse("get configmaps ns/x", c.http,
                                       Status(c.http, c.reason, "the server says why"));
    EXPECT_EQ(error.code(), c.expected) << c.reason;
    EXPECT_EQ(error.http_status(), c.http);
    EXPECT_EQ(error.reason(), c.reason);
    std::string what = error.what();
    EXPECT_NE(what.find("get configmaps ns/x: HTTP " + std::to_string(c.http)), std::string::npos);
    EXPECT_NE(what.find("the server says why"), std::string::npos) << what;
  }
}

TEST(ApiErrors, TooManyRequestsCarriesRetryAfter) {
  ApiError from_details = ErrorFromResponse(
      "list pods", 429, Status(429, "TooManyRequests", "slow down", R"({"retryAfterSeconds":7})"));
  EXPECT_EQ(from_details.code(), ErrorCode::kTooManyRequests);
  EXPECT_EQ(from_details.retry_after(), std::chrono::seconds(7));
  ApiError from_header = ErrorFromResponse("list pods", 429, "", std::chrono::seconds(3));
  EXPECT_EQ(from_header.retry_after(), std::chrono::seconds(3));
  EXPECT_TRUE(IsRetryable(ErrorCode::kTooManyRequests));
  EXPECT_FALSE(IsRetryable(ErrorCode::kInvalid));
}

TEST(ApiErrors, NonStatusBodiesFallBackToTheHttpStatus) {
  ApiError error = ErrorFromResponse("get x", 502, "<html>bad gateway</html>");
  EXPECT_EQ(error.code(), ErrorCode::kServerError);
  EXPECT_NE(std::string(error.what()).find("bad gateway"), std::string::npos);
  EXPECT_EQ(ErrorFromResponse("get x", 404, "").code(), ErrorCode::kNotFound);
  EXPECT_EQ(ErrorFromResponse("get x", 418, "{").code(), ErrorCode::kUnknown);
  std::string huge(100000, 'z');
  EXPECT_LT(std::string(ErrorFromResponse("get x", 500, huge).what()).size(), 2200u);
}

TEST(ResourceRef, PathsForCoreGroupedNamespacedAndClusterScoped) {
  EXPECT_EQ(resources::Pods().In("a").Named("p").ObjectPath(), "/api/v1/namespaces/a/pods/p");
  EXPECT_EQ(resources::Pods().CollectionPath(), "/api/v1/pods");
  EXPECT_EQ(resources::PyTorchJobs().In("ml").CollectionPath(),
            "/apis/kubeflow.org/v1/namespaces/ml/pytorchjobs");
  EXPECT_EQ(resources::Nodes().Named("n1").ObjectPath(), "/api/v1/nodes/n1");
  EXPECT_EQ(resources::Leases().ApiVersion(), "coordination.k8s.io/v1");
  EXPECT_THROW(resources::Pods().Named("p").ObjectPath(), std::invalid_argument);
  EXPECT_THROW(resources::Pods().In("a").ObjectPath(), std::invalid_argument);
  EXPECT_EQ(UrlEncode("app=a,tier in (x y)"), "app%3Da%2Ctier%20in%20%28x%20y%29");
}

}  // namespace
}  // namespace ncclguard::kube
