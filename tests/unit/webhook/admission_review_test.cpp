#include "webhook/admission_review.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace ncclguard::webhook {
namespace {

using core::Json;

Json Pod() {
  return Json{{"apiVersion", "v1"},
              {"kind", "Pod"},
              {"metadata", {{"name", "w0"}, {"namespace", "ml"}}},
              {"spec", {{"containers", Json::array({{{"name", "main"}, {"image", "x:1"}}})}}}};
}

Json Review(Json object, std::string operation = "CREATE") {
  return Json{{"apiVersion", "admission.k8s.io/v1"},
              {"kind", "AdmissionReview"},
              {"request",
               {{"uid", "705ab4f5-6393-11e8-b7cc-42010a800002"},
                {"kind", {{"group", ""}, {"version", "v1"}, {"kind", "Pod"}}},
                {"resource", {{"group", ""}, {"version", "v1"}, {"resource", "pods"}}},
                {"namespace", "ml"},
                {"name", "w0"},
                {"operation", operation},
                {"dryRun", true},
                {"object", std::move(object)}}}};
}

// The reason ParseAdmissionReview gives for `body`, or "" when it parses.
std::string Reason(const std::string& body) {
  try {
    ParseAdmissionReview(body);
    return "";
  } catch (const ReviewError& e) {
    return e.what();
  }
}

TEST(AdmissionReview, ParsesTheRequestFields) {
  const AdmissionRequest request = ParseAdmissionReview(Review(Pod()).dump());
  EXPECT_EQ(request.uid, "705ab4f5-6393-11e8-b7cc-42010a800002");
  EXPECT_EQ(request.kind.kind, "Pod");
  EXPECT_EQ(request.kind.ApiVersion(), "v1");
  EXPECT_EQ(request.operation, "CREATE");
  EXPECT_EQ(request.namespace_, "ml");
  EXPECT_TRUE(request.dry_run);
  EXPECT_EQ(request.object, Pod());
}

TEST(AdmissionReview, DeleteNeedsNoObject) {
  Json review = Review(nullptr, "DELETE");
  const AdmissionRequest request = ParseAdmissionReview(review.dump());
  EXPECT_EQ(request.operation, "DELETE");
  EXPECT_TRUE(request.object.is_null());
}

TEST(AdmissionReview, RefusesWhatIsNotAReviewWithAReason) {
  EXPECT_EQ(Reason("not json"), "body is not JSON");
  EXPECT_EQ(Reason("[1,2]"), "body is not a JSON object");
  EXPECT_EQ(Reason(""), "body is not JSON");

  Json wrong_version = Review(Pod());
  wrong_version["apiVersion"] = "admission.k8s.io/v1beta1";
  EXPECT_NE(Reason(wrong_version.dump()).find("admission.k8s.io/v1beta1"), std::string::npos);

  Json wrong_kind = Review(Pod());
  wrong_kind["kind"] = "TokenReview";
  EXPECT_NE(Reason(wrong_kind.dump()).find("TokenReview"), std::string::npos);

  Json no_request = Review(Pod());
  no_request.erase("request");
  EXPECT_EQ(Reason(no_request.dump()), "review.request is missing or not an object");

  Json no_uid = Review(Pod());
  no_uid["request"].erase("uid");
  EXPECT_EQ(Reason(no_uid.dump()), "request.uid is missing");

  Json empty_uid = Review(Pod());
  empty_uid["request"]["uid"] = "";
  EXPECT_EQ(Reason(empty_uid.dump()), "request.uid is empty");

  Json numeric_uid = Review(Pod());
  numeric_uid["request"]["uid"] = 7;
  EXPECT_EQ(Reason(numeric_uid.dump()), "request.uid must be a string, not number");

  Json bad_operation = Review(Pod(), "PATCH");
  EXPECT_NE(Reason(bad_operation.dump()).find("PATCH"), std::string::npos);

  Json no_object = Review(nullptr);
  EXPECT_EQ(Reason(no_object.dump()), "request.object is missing for CREATE");

  Json bad_dry_run = Review(Pod());
  bad_dry_run["request"]["dryRun"] = "yes";
  EXPECT_EQ(Reason(bad_dry_run.dump()), "request.dryRun must be a boolean");
}

TEST(AdmissionReview, RefusesAnObjectThatIsNotTheKindItClaims) {
  Json deployment = Pod();
  deployment["apiVersion"] = "apps/v1";
  deployment["kind"] = "Deployment";
  EXPECT_EQ(Reason(Review(deployment).dump()),
            "request.object is a apps/v1 Deployment but request.kind is v1 Pod");

  EXPECT_EQ(Reason(Review(Json::array()).dump()), "request.object must be an object, not array");
  Json no_kind = Pod();
  no_kind.erase("kind");
  EXPECT_EQ(Reason(Review(no_kind).dump()), "request.object.kind is missing");
}

TEST(AdmissionReview, RefusesHostileNestingWithoutRecursing) {
  const std::string deep = std::string(100000, '[') + std::string(100000, ']');
  Json review = Review(Pod());
  std::string body = review.dump();
  body.insert(body.size() - 2, ",\"x\":" + deep);
  EXPECT_NE(Reason(body).find("nests deeper than"), std::string::npos);
  // Brackets inside strings do not count.
  Json harmless = Review(Pod());
  harmless["request"]["object"]["metadata"]["annotations"] = {{"a", std::string(1000, '[')}};
  EXPECT_EQ(Reason(harmless.dump()), "");
}

TEST(AdmissionReview, EncodesAPatchAsBase64JsonPatch) {
  AdmissionResponse response;
  response.uid = "u1";
  response.patch = Json::array({{{"op", "add"}, {"path", "/a"}, {"value", 1}}});
  const Json answer = Json::parse(EncodeAdmissionReview(response));
  EXPECT_EQ(answer["apiVersion"], "admission.k8s.io/v1");
  EXPECT_EQ(answer["kind"], "AdmissionReview");
  EXPECT_EQ(answer["response"]["uid"], "u1");
  EXPECT_EQ(answer["response"]["allowed"], true);
  EXPECT_EQ(answer["response"]["patchType"], "JSONPatch");
  EXPECT_EQ(answer["response"]["patch"], Base64Encode(response.patch.dump()));
  EXPECT_FALSE(answer["response"].contains("status"));
}

TEST(AdmissionReview, AnEmptyPatchIsLeftOut) {
  AdmissionResponse response;
  response.uid = "u1";
  response.patch = Json::array();
  const Json answer = Json::parse(EncodeAdmissionReview(response));
  EXPECT_FALSE(answer["response"].contains("patch"));
  EXPECT_FALSE(answer["response"].contains("patchType"));
}

TEST(AdmissionReview, EncodesDenialsAndWarnings) {
  AdmissionResponse response;
  response.uid = "u2";
  response.allowed = false;
  response.status_code = 403;
  response.status_reason = "Forbidden";
  response.message = "no";
  response.warnings = {"w1", "w2"};
  const Json answer = Json::parse(EncodeAdmissionReview(response));
  EXPECT_EQ(answer["response"]["allowed"], false);
  EXPECT_EQ(answer["response"]["status"]["code"], 403);
  EXPECT_EQ(answer["response"]["status"]["reason"], "Forbidden");
  EXPECT_EQ(answer["response"]["status"]["message"], "no");
  EXPECT_EQ(answer["response"]["warnings"], Json::array({"w1", "w2"}));
}

TEST(AdmissionReview, InvalidUtf8InAMessageIsReplacedNotThrown) {
  AdmissionResponse response;
  response.uid = "u3";
  response.allowed = false;
  response.message = std::string("bad \xff byte");
  EXPECT_NO_THROW(Json::parse(EncodeAdmissionReview(response)));
}

// The answer as a Json tree of it dumps: the bytes kube-apiserver has always been sent.
std::string DumpedAsATree(const AdmissionResponse& response) {
  Json answer = Json::object();
  answer["uid"] = response.uid;
  answer["allowed"] = response.allowed;
  if (response.allowed && response.patch.is_array() && !response.patch.empty()) {
    answer["patchType"] = "JSONPatch";
    answer["patch"] = Base64Encode(response.patch.dump());
  }
  if (!response.warnings.empty()) answer["warnings"] = response.warnings;
  if (!response.allowed || response.status_code != 0) {
    Json status = Json::object();
    status["code"] = response.status_code != 0 ? response.status_code : 403;
    if (!response.status_reason.empty()) status["reason"] = response.status_reason;
    if (!response.message.empty()) status["message"] = response.message;
    answer["status"] = std::move(status);
  }
  Json review = Json::object();
  review["apiVersion"] = "admission.k8s.io/v1";
  review["kind"] = "AdmissionReview";
  review["response"] = std::move(answer);
  return review.dump(-1, ' ', false, Json::error_handler_t::replace);
}

TEST(AdmissionReview, TheAnswerIsByteForByteWhatItsJsonTreeDumps) {
  const std::string escaped = "q\"uote \\ tab\t nl\n \x01 é \u2028";
  const std::string awkward = escaped + "\xff\xfe end";  // invalid UTF-8: replaced
  std::vector<AdmissionResponse> responses(5);
  responses[0].uid = "u1";
  responses[0].patch = Json::array({{{"op", "add"}, {"path", "/a~1b"}, {"value", escaped}}});
  responses[0].warnings = {awkward, "plain"};
  responses[1].uid = awkward;
  responses[1].allowed = false;
  responses[2].uid = "u3";
  responses[2].allowed = false;
  responses[2].status_code = 400;
  responses[2].status_reason = "BadRequest";
  responses[2].message = awkward;
  responses[2].warnings = {"w"};
  responses[2].patch = Json::array({{{"op", "add"}, {"path", "/a"}, {"value", 1}}});  // not sent
  responses[3].uid = "u4";
  responses[3].status_code = 200;  // allowed with a status
  responses[3].message = "m";
  responses[4].uid = "";
  responses[4].patch = Json::array();
  for (const AdmissionResponse& response : responses) {
    EXPECT_EQ(EncodeAdmissionReview(response), DumpedAsATree(response)) << response.uid;
  }
}

TEST(AdmissionReview, Base64MatchesRfc4648Vectors) {
  EXPECT_EQ(Base64Encode(""), "");
  EXPECT_EQ(Base64Encode("f"), "Zg==");
  EXPECT_EQ(Base64Encode("fo"), "Zm8=");
  EXPECT_EQ(Base64Encode("foo"), "Zm9v");
  EXPECT_EQ(Base64Encode("foob"), "Zm9vYg==");
  EXPECT_EQ(Base64Encode("fooba"), "Zm9vYmE=");
  EXPECT_EQ(Base64Encode("foobar"), "Zm9vYmFy");
}

}  // namespace
}  // namespace ncclguard::webhook
