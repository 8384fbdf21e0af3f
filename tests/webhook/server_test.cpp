// The webhook server over real TLS on loopback: endpoints, bad input, concurrency, certificate
// rotation, protocol versions and graceful shutdown.
#include "webhook/server.h"

#include <curl/curl.h>
#include <gtest/gtest.h>
#include <openssl/evp.h>

#include <atomic>
#include <chrono>
#include <fstream>
#include <memory>
#include <optional>
#include <sstream>
#include <thread>
#include <vector>

#include "controlplane_env.h"
#include "core/guide.h"
#include "core/rule.h"
#include "https_client.h"
#include "served_webhook.h"
#include "test_https_server.h"

namespace ncclguard::webhook::testing {
namespace {

using core::Json;

// Present only in this test binary: a rule that throws on a marked pod, to prove fail-closed.
class ThrowingRule final : public core::Rule {
 public:
  ThrowingRule()
      : Rule({"test-rule-throws", "efa-config", core::Level::Deny, core::RuleScope::Pod,
              "test only", "test only"}) {}
  void CheckTemplate(const core::TemplateContext& context, core::RuleReport&) const override {
    if (context.object.contains(core::JsonPointer("/metadata/annotations/ncclguard.test~1throw"))) {
      throw std::runtime_error("injected failure");
    }
  }
};
NCCLGUARD_REGISTER(ThrowingRule);

Json BarePod(const std::string& name = "w0") {
  return Json::parse(
      R"({"apiVersion":"v1","kind":"Pod","metadata":{"name":")" + name +
      R"(","namespace":"ml"},"spec":{"nodeSelector":{"node.kubernetes.io/instance-type":"p5.48xlarge"},
     "containers":[{"name":"pytorch","image":"r/train:1","resources":{"limits":{"nvidia.com/gpu":"8","memory":"1Ti"}}}]}})");
}

Json Review(const Json& object, const std::string& uid = "uid-1") {
  return Json{{"apiVersion", "admission.k8s.io/v1"},
              {"kind", "AdmissionReview"},
              {"request",
               {{"uid", uid},
                {"kind", {{"group", ""}, {"version", "v1"}, {"kind", "Pod"}}},
                {"namespace", "ml"},
                {"operation", "CREATE"},
                {"object", object}}}};
}

Json Answer(const HttpResult& result) {
  EXPECT_EQ(result.status, 200) << result.error << result.body;
  return Json::parse(result.body).at("response");
}

// Sends the whole body over a raw TLS connection (cpprestsdk reads a request's body before it
// writes any answer, so a client that stopped early would see a reset) and returns the raw
// answer: for refusals that close the connection.
std::string PostWhole(int port, const std::string& path, const std::string& body) {
  RawTlsClient client(port);
  client.Send("POST " + path +
              " HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
              "Content-Length: " +
              std::to_string(body.size()) + "\r\n\r\n" + body);
  return client.ReadAll(5000);
}

bool Eventually(const std::function<bool()>& condition) {
  for (int i = 0; i < 100; ++i) {
    if (condition()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return false;
}

std::string Metrics(ServedWebhook& webhook) {
  return Fetch(webhook.Url("/metrics"), webhook.ca_file(), "", {.method = "GET"}).body;
}

// CURL_SSLVERSION_TLSv1_x | CURL_SSLVERSION_MAX_TLSv1_x (the max is the version << 16); spelled
// out because curl's two enums do not mix under -Werror.
constexpr long kTls11Only = 5L | (5L << 16);
constexpr long kTls12Only = 6L | (6L << 16);

class WebhookServerTest : public ::testing::Test {
 protected:
  ServedWebhook webhook_;
};

TEST(WebhookServerReadiness, ReadyzWaitsForTheReadyGate) {
  std::atomic<bool> certificate_written{false};
  ServedWebhook webhook([&](ServerConfig& config) {
    config.ready_gate = [&certificate_written] { return certificate_written.load(); };
  });
  EXPECT_EQ(Fetch(webhook.Url("/healthz"), webhook.ca_file(), "", {.method = "GET"}).status, 200);
  EXPECT_EQ(Fetch(webhook.Url("/readyz"), webhook.ca_file(), "", {.method = "GET"}).status, 503);
  EXPECT_FALSE(webhook.server().Ready());
  certificate_written = true;
  EXPECT_EQ(Fetch(webhook.Url("/readyz"), webhook.ca_file(), "", {.method = "GET"}).status, 200);
}

TEST_F(WebhookServerTest, HealthReadinessAndMetrics) {
  const HttpResult health =
      Fetch(webhook_.Url("/healthz"), webhook_.ca_file(), "", {.method = "GET"});
  EXPECT_EQ(health.status, 200);
  EXPECT_EQ(health.body, "ok\n");
  EXPECT_EQ(Fetch(webhook_.Url("/readyz"), webhook_.ca_file(), "", {.method = "GET"}).status, 200);
  const std::string metrics = Metrics(webhook_);
  EXPECT_NE(metrics.find("# TYPE ncclguard_webhook_requests_total counter"), std::string::npos);
  EXPECT_NE(metrics.find(R"(ncclguard_webhook_requests_total{endpoint="healthz",result="ok"} 1)"),
            std::string::npos);
}

TEST_F(WebhookServerTest, MutateAnswersWithTheSameUidAndABase64JsonPatch) {
  const Json answer = Answer(Fetch(webhook_.Url("/mutate?timeout=10s"), webhook_.ca_file(),
                                   Review(BarePod(), "abc-123").dump()));
  EXPECT_EQ(answer["uid"], "abc-123");
  EXPECT_EQ(answer["allowed"], true);
  EXPECT_EQ(answer["patchType"], "JSONPatch");
  ASSERT_TRUE(answer["patch"].is_string());
  // The patch applies to the pod and adds the EFA devices.
  const std::string encoded = answer["patch"];
  std::string decoded(encoded.size(), '\0');
  const int length = EVP_DecodeBlock(reinterpret_cast<unsigned char*>(decoded.data()),
                                     reinterpret_cast<const unsigned char*>(encoded.data()),
                                     static_cast<int>(encoded.size()));
  ASSERT_GT(length, 0);
  decoded.resize(static_cast<size_t>(length));
  while (!decoded.empty() && decoded.back() == '\0') decoded.pop_back();
  const Json fixed = BarePod().patch(Json::parse(decoded));
  EXPECT_EQ(fixed["spec"]["containers"][0]["resources"]["limits"]["vpc.amazonaws.com/efa"], "32");
}

TEST_F(WebhookServerTest, ValidateDeniesWithAMessageAndCountsTheFinding) {
  Json pod = BarePod();
  pod["spec"]["containers"][0]["env"] = Json::array({{{"name", "NCCL_PROTO"}, {"value", "fast"}}});
  const Json answer =
      Answer(Fetch(webhook_.Url("/validate"), webhook_.ca_file(), Review(pod).dump()));
  EXPECT_EQ(answer["allowed"], false);
  EXPECT_EQ(answer["status"]["code"], 403);
  const std::string message = answer["status"]["message"];
  EXPECT_NE(message.find("[nccl-proto-invalid]"), std::string::npos);
  EXPECT_NE(message.find(core::GuideLink(core::kDefaultGuideBaseUrl, "efa-config")),
            std::string::npos);
  const std::string metrics = Metrics(webhook_);
  EXPECT_NE(
      metrics.find(R"(ncclguard_webhook_requests_total{endpoint="validate",result="denied"} 1)"),
      std::string::npos);
  EXPECT_NE(
      metrics.find(R"(ncclguard_webhook_findings_total{level="deny",rule="nccl-proto-invalid"} 1)"),
      std::string::npos);
}

// Audit mode's paths (docs/operator.md "Audit mode"): /validate/audit admits what /validate
// denies, with warnings, counted as audited; /.../enforce enforce whatever the policy says.
TEST(WebhookServerModes, ThePathNamesTheModeAndAuditIsCountedApart) {
  ServedWebhook webhook([](ServerConfig& config) {
    config.load_policy = [] {
      core::Policy policy = core::Policy::Defaults();
      policy.mode = core::Mode::Audit;
      return policy;
    };
  });
  Json pod = BarePod();
  pod["spec"]["containers"][0]["env"] = Json::array({{{"name", "NCCL_PROTO"}, {"value", "fast"}}});
  const std::string review = Review(pod).dump();
  for (const char* path : {"/validate/audit", "/validate"}) {
    const Json audited = Answer(Fetch(webhook.Url(path), webhook.ca_file(), review));
    EXPECT_EQ(audited["allowed"], true) << path;
    EXPECT_FALSE(audited.contains("status")) << path;
    ASSERT_TRUE(audited["warnings"].is_array()) << path;
    EXPECT_EQ(audited["warnings"][0].get<std::string>().rfind(
                  "ncclguard audit: would deny: [nccl-proto-invalid] ", 0),
              0u)
        << audited["warnings"];
  }
  const Json mutated = Answer(Fetch(webhook.Url("/mutate"), webhook.ca_file(), review));
  EXPECT_EQ(mutated["allowed"], true);
  EXPECT_FALSE(mutated.contains("patch")) << "audit changes nothing";
  const Json enforced = Answer(Fetch(webhook.Url("/validate/enforce"), webhook.ca_file(), review));
  EXPECT_EQ(enforced["allowed"], false);
  const Json fixed = Answer(Fetch(webhook.Url("/mutate/enforce"), webhook.ca_file(), review));
  EXPECT_EQ(fixed["patchType"], "JSONPatch");
  // Audit namespaces have no mutating path.
  EXPECT_EQ(Fetch(webhook.Url("/mutate/audit"), webhook.ca_file(), review).status, 404);

  const std::string metrics = Metrics(webhook);
  for (const char* line :
       {R"(ncclguard_webhook_requests_total{endpoint="validate",result="audited"} 2)",
        R"(ncclguard_webhook_requests_total{endpoint="mutate",result="audited"} 1)",
        R"(ncclguard_webhook_requests_total{endpoint="validate",result="denied"} 1)",
        R"(ncclguard_webhook_requests_total{endpoint="mutate",result="patched"} 1)",
        R"(ncclguard_webhook_audit_findings_total{action="deny",rule="nccl-proto-invalid"} 2)",
        R"(ncclguard_webhook_findings_total{level="deny",rule="nccl-proto-invalid"} 1)"}) {
    EXPECT_NE(metrics.find(std::string(line) + "\n"), std::string::npos) << line;
  }
}

// The controller pushes the NcclPolicy's changes (UsePolicy): a switch of spec.mode takes effect
// on the next request, without a restart.
TEST_F(WebhookServerTest, APushedPolicysModeTakesEffectOnTheNextRequest) {
  Json pod = BarePod();
  pod["spec"]["containers"][0]["env"] = Json::array({{{"name", "NCCL_PROTO"}, {"value", "fast"}}});
  const std::string review = Review(pod).dump();
  auto audit = std::make_shared<core::Policy>(core::Policy::Defaults());
  audit->mode = core::Mode::Audit;
  webhook_.server().UsePolicy(audit);
  EXPECT_EQ(Answer(Fetch(webhook_.Url("/validate"), webhook_.ca_file(), review))["allowed"], true);
  webhook_.server().UsePolicy(std::make_shared<const core::Policy>(core::Policy::Defaults()));
  EXPECT_EQ(Answer(Fetch(webhook_.Url("/validate"), webhook_.ca_file(), review))["allowed"], false);
}

TEST_F(WebhookServerTest, ARuleThatThrowsDeniesThatRequestOnlyAndIsCounted) {
  Json pod = BarePod();
  pod["metadata"]["annotations"] = {{"ncclguard.test/throw", "1"}};
  const Json failed =
      Answer(Fetch(webhook_.Url("/validate"), webhook_.ca_file(), Review(pod).dump()));
  EXPECT_EQ(failed["allowed"], false);
  EXPECT_EQ(failed["status"]["code"], 500);
  EXPECT_NE(failed["status"]["message"].get<std::string>().find("internal error"),
            std::string::npos);
  EXPECT_NE(
      Metrics(webhook_).find(R"(ncclguard_webhook_internal_errors_total{endpoint="validate"} 1)"),
      std::string::npos);
  // The next request is answered normally.
  const Json next =
      Answer(Fetch(webhook_.Url("/validate"), webhook_.ca_file(), Review(BarePod()).dump()));
  EXPECT_EQ(next["allowed"], true);
}

TEST_F(WebhookServerTest, BadRequestsGetA4xxWithAReasonAndTheServerKeepsServing) {
  struct Case {
    std::string name, path, body;
    CurlOptions options;
    long status;
    std::string reason;
  };
  Json wrong_version = Review(BarePod());
  wrong_version["apiVersion"] = "admission.k8s.io/v1beta1";
  Json no_uid = Review(BarePod());
  no_uid["request"].erase("uid");
  Json no_request = Review(BarePod());
  no_request.erase("request");
  Json liar = Review(BarePod());
  liar["request"]["kind"]["kind"] = "Secret";
  const std::vector<Case> cases = {
      {"not json", "/mutate", "{nope", {}, 400, "body is not JSON"},
      {"wrong apiVersion", "/validate", wrong_version.dump(), {}, 400, "v1beta1"},
      {"missing uid", "/mutate", no_uid.dump(), {}, 400, "request.uid is missing"},
      {"missing request", "/mutate", no_request.dump(), {}, 400, "review.request"},
      {"lying kind", "/mutate", liar.dump(), {}, 400, "but request.kind is v1 Secret"},
      {"wrong content type",
       "/mutate",
       Review(BarePod()).dump(),
       {.content_type = "text/plain"},
       415,
       "Content-Type must be application/json"},
      {"unknown path", "/nope", "{}", {}, 404, "no such path"},
      {"GET on mutate", "/mutate", "", {.method = "GET"}, 405, "use POST"},
  };
  for (const Case& c : cases) {
    const HttpResult result = Fetch(webhook_.Url(c.path), webhook_.ca_file(), c.body, c.options);
    EXPECT_EQ(result.status, c.status) << c.name << ": " << result.error << result.body;
    EXPECT_NE(result.body.find(c.reason), std::string::npos) << c.name << ": " << result.body;
    EXPECT_EQ(Fetch(webhook_.Url("/healthz"), webhook_.ca_file(), "", {.method = "GET"}).status,
              200)
        << "after " << c.name;
  }
  EXPECT_NE(Metrics(webhook_).find(
                R"(ncclguard_webhook_requests_total{endpoint="mutate",result="bad_request"} 4)"),
            std::string::npos);
}

TEST_F(WebhookServerTest, SlowAndHalfClosedClientsDoNotStopOthers) {
  const std::string body = Review(BarePod()).dump();
  const std::string head =
      "POST /mutate HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
      "Content-Length: " +
      std::to_string(body.size()) + "\r\n\r\n";
  // Stalls mid-body and never finishes.
  RawTlsClient slow(webhook_.port());
  slow.Send(head + body.substr(0, body.size() / 2));
  // Sends half a body, then closes its side.
  RawTlsClient half_closed(webhook_.port());
  half_closed.Send(head + body.substr(0, 100));
  half_closed.ShutdownWrite();
  // Sends headers only, slowly.
  RawTlsClient headers_only(webhook_.port());
  headers_only.Send("POST /mutate HTTP/1.1\r\nHost: x\r\n");

  for (int i = 0; i < 5; ++i) {
    const Json answer = Answer(Fetch(webhook_.Url("/mutate"), webhook_.ca_file(), body));
    EXPECT_EQ(answer["allowed"], true);
  }
  // The half-closed client can still read why its request failed.
  EXPECT_EQ(half_closed.ReadAll(2000).rfind("HTTP/1.1 400", 0), 0u);
  EXPECT_TRUE(Eventually([&] {
    return Metrics(webhook_).find(R"(endpoint="mutate",result="client_error"} 1)") !=
           std::string::npos;
  }));
}

TEST_F(WebhookServerTest, ABodyOverSevenMebibytesIsRefusedWith413) {
  const std::string body(8u * 1024u * 1024u, ' ');
  const std::string response = PostWhole(webhook_.port(), "/mutate", body);
  EXPECT_EQ(response.rfind("HTTP/1.1 413", 0), 0u) << response;
  EXPECT_NE(response.find("exceeds the limit of 7340032"), std::string::npos) << response;
  EXPECT_NE(response.find("Connection: close"), std::string::npos) << response;
  EXPECT_EQ(Fetch(webhook_.Url("/healthz"), webhook_.ca_file(), "", {.method = "GET"}).status, 200);
}

TEST_F(WebhookServerTest, AReviewPastItsMemoryBudgetIsRefusedAloneWith413) {
  // ~7 MB of empty lists, within the body limit, ~200 MB once parsed. Was: the process grew by
  // 200 MB per such request (379 MB for two at once), past the chart's 256Mi limit.
  std::string lists = "[[]";
  lists.reserve(7'000'000);
  for (int i = 0; i < 2'300'000; ++i) lists += ",[]";
  lists += "]";
  std::string body = Review(BarePod()).dump();
  const std::string marker = R"("spec":{)";
  body.insert(body.find(marker) + marker.size(), "\"lists\":" + lists + ",");
  const HttpResult refused = Fetch(webhook_.Url("/validate"), webhook_.ca_file(), body);
  EXPECT_EQ(refused.status, 413) << refused.error << refused.body.substr(0, 300);
  EXPECT_NE(refused.body.find("more than its memory budget of 64 MiB"), std::string::npos)
      << refused.body.substr(0, 300);
  const Json answer =
      Answer(Fetch(webhook_.Url("/validate"), webhook_.ca_file(), Review(BarePod()).dump()));
  EXPECT_EQ(answer.at("uid"), "uid-1");
  EXPECT_NE(Metrics(webhook_).find(R"(endpoint="validate",result="too_large")"), std::string::npos);
}

TEST(WebhookServerMemory, ReviewsPastTheInFlightBudgetAreRefusedWith503) {
  // The bodies of all reviews in flight share the budget: one that does not fit waits for no
  // one, it is refused before its body is read, and kube-apiserver applies the failurePolicy.
  ServedWebhook webhook([](ServerConfig& config) { config.max_in_flight_bytes = 1u << 20; });
  const std::string big = Review(BarePod()).dump() + std::string(2u << 20, ' ');
  const std::string response = PostWhole(webhook.port(), "/validate", big);
  EXPECT_EQ(response.rfind("HTTP/1.1 503", 0), 0u) << response.substr(0, 300);
  EXPECT_NE(response.find("memory budget for reviews in flight (1 MiB) is spent"),
            std::string::npos)
      << response.substr(0, 300);
  const Json answer =
      Answer(Fetch(webhook.Url("/validate"), webhook.ca_file(), Review(BarePod()).dump()));
  EXPECT_EQ(answer.at("uid"), "uid-1");
}

TEST(WebhookServerMemory, AReviewThatOutgrowsTheInFlightBudgetWhileReadIsRefusedWith503) {
  // The body fits the budget; the tree read from it does not: refused as the body would have
  // been, then the next review is answered.
  ServedWebhook webhook([](ServerConfig& config) { config.max_in_flight_bytes = 1u << 20; });
  Json pod = BarePod();
  Json& finalizers = pod["metadata"]["finalizers"] = Json::array();
  for (int i = 0; i < 60000; ++i) finalizers.push_back("x");  // 4 bytes of text, 48 of tree
  const std::string body = Review(pod).dump();
  ASSERT_LT(2 * body.size(), std::size_t{1} << 20);
  const HttpResult refused = Fetch(webhook.Url("/validate"), webhook.ca_file(), body);
  EXPECT_EQ(refused.status, 503) << refused.body.substr(0, 300);
  EXPECT_NE(refused.body.find("the memory budget for reviews in flight (1 MiB) is spent; retry"),
            std::string::npos)
      << refused.body.substr(0, 300);
  const Json answer =
      Answer(Fetch(webhook.Url("/validate"), webhook.ca_file(), Review(BarePod()).dump()));
  EXPECT_EQ(answer.at("uid"), "uid-1");
}

TEST(WebhookServerMemory, NearTheContainersMemoryLimitLargeReviewsAreRefusedOrdinaryOnesServed) {
  // The rest of the process (in the chart, the controller's caches) holds more than the limit
  // leaves: the reviews in flight get the floor, 8 MiB. A review with a 5 MiB body (held twice)
  // is refused before it is read instead of taking the pod over its limit; an ordinary one is
  // answered.
  ServedWebhook webhook([](ServerConfig& config) { config.memory_limit_bytes = 1u << 20; });
  EXPECT_NE(Metrics(webhook).find("ncclguard_webhook_in_flight_memory_budget_bytes 8388608"),
            std::string::npos);
  const std::string big = Review(BarePod()).dump() + std::string(5u << 20, ' ');
  const std::string response = PostWhole(webhook.port(), "/validate", big);
  EXPECT_EQ(response.rfind("HTTP/1.1 503", 0), 0u) << response.substr(0, 300);
  EXPECT_NE(response.find("memory budget for reviews in flight (8 MiB of 128 MiB: the rest of the "
                          "process leaves no more under its 1 MiB memory limit) is spent; retry"),
            std::string::npos)
      << response.substr(0, 400);
  const Json answer =
      Answer(Fetch(webhook.Url("/validate"), webhook.ca_file(), Review(BarePod()).dump()));
  EXPECT_EQ(answer.at("uid"), "uid-1");
}

TEST(WebhookServerMemory, WithRoomUnderTheMemoryLimitReviewsGetTheWholeBudget) {
  ServedWebhook webhook(
      [](ServerConfig& config) { config.memory_limit_bytes = std::size_t{64} << 30; });
  EXPECT_NE(Metrics(webhook).find("ncclguard_webhook_in_flight_memory_budget_bytes 134217728"),
            std::string::npos);
  const std::string big = Review(BarePod()).dump() + std::string(5u << 20, ' ');
  const HttpResult result = Fetch(webhook.Url("/validate"), webhook.ca_file(), big);
  EXPECT_EQ(result.status, 200) << result.body.substr(0, 300);
}

TEST(WebhookServerMemory, ReviewsWaitingForTheirBodiesDoNotRaiseTheRoom) {
  // The rest of the process holds 40 MiB: the 92 MiB limit leaves the reviews 20 MiB (32 MiB
  // reserved). Two reviews announce 4 MiB bodies and stall: 16 MiB held, not yet resident. Those
  // are the reviews', not the rest of the process's: a third finds 4 MiB of room, not 20 MiB
  // more, and is refused before its body is read.
  static std::atomic<std::size_t> resident{std::size_t{40} << 20};
  ServedWebhook webhook([](ServerConfig& config) {
    config.memory_limit_bytes = std::size_t{92} << 20;
    config.resident_bytes = [] { return std::optional<std::size_t>(resident.load()); };
    config.reload_interval = std::chrono::milliseconds(0);
  });
  EXPECT_NE(Metrics(webhook).find("ncclguard_webhook_in_flight_memory_budget_bytes 20971520"),
            std::string::npos);
  const std::string body = Review(BarePod()).dump() + std::string(4u << 20, ' ');
  const std::string head =
      "POST /validate HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
      "Content-Length: " +
      std::to_string(body.size()) + "\r\n\r\n";
  std::vector<std::unique_ptr<RawTlsClient>> stalled;
  for (int i = 0; i < 2; ++i) {
    stalled.push_back(std::make_unique<RawTlsClient>(webhook.port()));
    stalled.back()->Send(head + body.substr(0, 100));
  }
  // Once both stalled bodies are held, the third is refused; until then it may be answered.
  HttpResult third;
  for (int attempt = 0; attempt < 100; ++attempt) {
    third = Fetch(webhook.Url("/validate"), webhook.ca_file(), body);
    if (third.status == 503) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  EXPECT_EQ(third.status, 503) << third.body.substr(0, 300);
  EXPECT_NE(third.body.find("(20 MiB of 128 MiB: the rest of the process leaves no more under its "
                            "92 MiB memory limit)"),
            std::string::npos)
      << third.body.substr(0, 400);
  stalled.clear();
  // The rest of the process shrinks: the next review finds the room the limit leaves (92 MiB
  // less 32 reserved) and is answered.
  resident = 0;
  EXPECT_EQ(Fetch(webhook.Url("/validate"), webhook.ca_file(), body).status, 200);
  EXPECT_NE(Metrics(webhook).find("ncclguard_webhook_in_flight_memory_budget_bytes 62914560"),
            std::string::npos);
}

TEST_F(WebhookServerTest, AChunkedBodyWithoutContentLengthIsRefused) {
  RawTlsClient client(webhook_.port());
  client.Send(
      "POST /mutate HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
      "Transfer-Encoding: chunked\r\n\r\n2\r\n{}\r\n0\r\n\r\n");
  const std::string response = client.ReadAll(2000);
  EXPECT_EQ(response.rfind("HTTP/1.1 411", 0), 0u) << response;
  EXPECT_NE(response.find("Content-Length header is required"), std::string::npos);
}

TEST_F(WebhookServerTest, ConcurrentClientsEachGetTheirOwnAnswer) {
  std::atomic<int> wrong{0};
  std::vector<std::thread> clients;
  for (int c = 0; c < 12; ++c) {
    clients.emplace_back([&, c] {
      for (int i = 0; i < 20; ++i) {
        const std::string uid = "uid-" + std::to_string(c) + "-" + std::to_string(i);
        const HttpResult result =
            Fetch(webhook_.Url(i % 2 == 0 ? "/mutate" : "/validate"), webhook_.ca_file(),
                  Review(BarePod("p" + std::to_string(c)), uid).dump());
        if (result.status != 200 || Json::parse(result.body)["response"]["uid"] != uid) ++wrong;
      }
    });
  }
  for (auto& client : clients) client.join();
  EXPECT_EQ(wrong.load(), 0);
}

TEST_F(WebhookServerTest, ARotatedCertificateIsServedWithoutRestart) {
  EXPECT_NE(RawTlsClient(webhook_.port()).PeerSubject().find("ncclguard-webhook-test"),
            std::string::npos);
  const testenv::TlsMaterial rotated = testenv::MakeServingCertificate("rotated-serving-cert");
  // Mid-rotation: a new certificate with the old key does not load; the old pair stays.
  WriteFile(webhook_.cert_file(), rotated.cert_pem);
  std::this_thread::sleep_for(std::chrono::milliseconds(60));
  EXPECT_NE(RawTlsClient(webhook_.port()).PeerSubject().find("ncclguard-webhook-test"),
            std::string::npos);
  WriteFile(webhook_.key_file(), rotated.key_pem);
  EXPECT_TRUE(Eventually([&] {
    return RawTlsClient(webhook_.port()).PeerSubject().find("rotated-serving-cert") !=
           std::string::npos;
  }));
  const std::string rotated_ca = webhook_.dir() + "/rotated-ca.crt";
  WriteFile(rotated_ca, rotated.ca_pem);
  const std::string metrics =
      Fetch(webhook_.Url("/metrics"), rotated_ca, "", {.method = "GET"}).body;
  EXPECT_NE(metrics.find(R"(ncclguard_webhook_certificate_reloads_total{result="success"} 1)"),
            std::string::npos);
  EXPECT_NE(metrics.find(R"(ncclguard_webhook_certificate_reloads_total{result="failure"})"),
            std::string::npos);
}

TEST_F(WebhookServerTest, Tls11AndTls12AreRefusedByDefaultAndHttp2IsNotOffered) {
  const HttpResult tls11 = Fetch(webhook_.Url("/healthz"), webhook_.ca_file(), "",
                                 {.method = "GET", .ssl_version = kTls11Only});
  EXPECT_EQ(tls11.status, 0);
  EXPECT_FALSE(tls11.error.empty());
  const HttpResult tls12 = Fetch(webhook_.Url("/healthz"), webhook_.ca_file(), "",
                                 {.method = "GET", .ssl_version = kTls12Only});
  EXPECT_EQ(tls12.status, 0);
  const HttpResult h2 =
      Fetch(webhook_.Url("/healthz"), webhook_.ca_file(), "", {.method = "GET", .ask_http2 = true});
  EXPECT_EQ(h2.status, 200);
  EXPECT_EQ(h2.http_version, CURL_HTTP_VERSION_1_1);
}

TEST(WebhookServerTls12, Tls12IsAcceptedWhenConfiguredAndTls11StillRefused) {
  ServedWebhook webhook([](ServerConfig& config) { config.tls_min_version = TlsVersion::V1_2; });
  const HttpResult tls12 = Fetch(webhook.Url("/healthz"), webhook.ca_file(), "",
                                 {.method = "GET", .ssl_version = kTls12Only});
  EXPECT_EQ(tls12.status, 200) << tls12.error;
  const HttpResult tls11 = Fetch(webhook.Url("/healthz"), webhook.ca_file(), "",
                                 {.method = "GET", .ssl_version = kTls11Only});
  EXPECT_EQ(tls11.status, 0);
}

TEST(WebhookServerStartup, RefusesAKeyThatDoesNotMatchTheCertificate) {
  const std::string dir = testenv::MakeTempDir("ncclguard-webhook-bad");
  const testenv::TlsMaterial one = testenv::MakeServingCertificate("one");
  const testenv::TlsMaterial two = testenv::MakeServingCertificate("two");
  WriteFile(dir + "/tls.crt", one.cert_pem);
  WriteFile(dir + "/tls.key", two.key_pem);
  ServerConfig config;
  config.tls_cert_file = dir + "/tls.crt";
  config.tls_key_file = dir + "/tls.key";
  try {
    WebhookServer server(config);
    FAIL() << "a mismatched key was accepted";
  } catch (const TlsError& e) {
    EXPECT_NE(std::string(e.what()).find("does not match"), std::string::npos) << e.what();
    EXPECT_EQ(std::string(e.what()).find("PRIVATE KEY"), std::string::npos);  // no key material
  }
  config.tls_key_file = dir + "/missing.key";
  EXPECT_THROW(WebhookServer{config}, TlsError);
}

TEST(WebhookServerShutdown, InFlightRequestsFinishBeforeTheListenerCloses) {
  ServedWebhook webhook;
  const std::string body = Review(BarePod()).dump();
  RawTlsClient client(webhook.port());
  client.Send(
      "POST /mutate HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
      "Content-Length: " +
      std::to_string(body.size()) + "\r\n\r\n" + body.substr(0, 200));
  // Wait (not sleep) for the server to see the request: on a loaded CI machine the headers may
  // take a while to be read.
  ASSERT_TRUE(Eventually([&] { return webhook.server().InFlightRequests() == 1; }))
      << "the server never saw the request";
  std::thread shutdown([&] { webhook.server().Shutdown(); });
  ASSERT_TRUE(Eventually([&] { return !webhook.server().Ready(); }));
  std::this_thread::sleep_for(std::chrono::milliseconds(100));  // Shutdown is now draining
  EXPECT_EQ(webhook.server().InFlightRequests(), 1);
  client.Send(body.substr(200));
  const std::string response = client.ReadAll(3000);
  shutdown.join();
  EXPECT_EQ(response.rfind("HTTP/1.1 200", 0), 0u) << response;
  EXPECT_NE(response.find("\"uid\":\"uid-1\""), std::string::npos);
  EXPECT_NE(response.find("Connection: close"), std::string::npos);
}

// In a cluster the pod leaves the Service's endpoints while it is told to stop, and the API
// server still holds keep-alive connections to it: the server must keep answering through the
// shutdown delay, closing each connection so that the client stops reusing it.
TEST(WebhookServerShutdown, KeepsAnsweringThroughTheShutdownDelayClosingEachConnection) {
  ServedWebhook webhook(
      [](ServerConfig& config) { config.shutdown_delay = std::chrono::milliseconds(5000); });
  const std::string body = Review(BarePod()).dump();
  std::thread shutdown([&] { webhook.server().Shutdown(); });
  ASSERT_TRUE(Eventually([&] { return !webhook.server().Ready(); }));
  EXPECT_EQ(Fetch(webhook.Url("/readyz"), webhook.ca_file(), "", {.method = "GET"}).status, 503);
  RawTlsClient client(webhook.port());
  client.Send(
      "POST /mutate HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
      "Content-Length: " +
      std::to_string(body.size()) + "\r\n\r\n" + body);
  const std::string response = client.ReadAll(4000);
  EXPECT_EQ(response.rfind("HTTP/1.1 200", 0), 0u) << response;
  EXPECT_NE(response.find("\"uid\":\"uid-1\""), std::string::npos);
  EXPECT_NE(response.find("Connection: close"), std::string::npos) << response;
  shutdown.join();
  EXPECT_FALSE(Fetch(webhook.Url("/mutate"), webhook.ca_file(), body).error.empty())
      << "the listener still answers after Shutdown returned";
}

}  // namespace
}  // namespace ncclguard::webhook::testing
