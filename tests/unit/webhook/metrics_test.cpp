#include "webhook/metrics.h"

#include <gtest/gtest.h>
#include <prometheus/text_serializer.h>

#include <string>
#include <vector>

#include "metrics/registry.h"

namespace ncclguard::webhook {
namespace {

bool Has(const std::string& text, const std::string& line) {
  return text.find(line + "\n") != std::string::npos;
}

TEST(Metrics, CountsRequestsByEndpointAndResult) {
  prometheus::Registry registry;
  Metrics metrics(registry);
  metrics.CountRequest("mutate", "patched", 0.0002);
  metrics.CountRequest("mutate", "patched", 0.003);
  metrics.CountRequest("validate", "denied", 0.0004);
  const std::string text = metrics.Render();
  EXPECT_TRUE(
      Has(text, R"(ncclguard_webhook_requests_total{endpoint="mutate",result="patched"} 2)"));
  EXPECT_TRUE(
      Has(text, R"(ncclguard_webhook_requests_total{endpoint="validate",result="denied"} 1)"));
  EXPECT_TRUE(Has(text, "# TYPE ncclguard_webhook_requests_total counter"));
}

TEST(Metrics, LatencyHistogramIsCumulative) {
  prometheus::Registry registry;
  Metrics metrics(registry);
  metrics.CountRequest("mutate", "patched", 0.0002);  // <= 0.00025
  metrics.CountRequest("mutate", "patched", 0.003);   // <= 0.005
  const std::string text = metrics.Render();
  const std::string name = "ncclguard_webhook_request_duration_seconds";
  EXPECT_TRUE(Has(text, name + R"(_bucket{endpoint="mutate",le="0.0001"} 0)"));
  EXPECT_TRUE(Has(text, name + R"(_bucket{endpoint="mutate",le="0.00025"} 1)"));
  EXPECT_TRUE(Has(text, name + R"(_bucket{endpoint="mutate",le="0.0025"} 1)"));
  EXPECT_TRUE(Has(text, name + R"(_bucket{endpoint="mutate",le="0.005"} 2)"));
  EXPECT_TRUE(Has(text, name + R"(_bucket{endpoint="mutate",le="+Inf"} 2)"));
  EXPECT_TRUE(Has(text, name + R"(_count{endpoint="mutate"} 2)"));
  EXPECT_TRUE(Has(text, name + R"(_sum{endpoint="mutate"} 0.0032)"));
  EXPECT_TRUE(Has(text, "# TYPE " + name + " histogram"));
}

TEST(Metrics, FindingsErrorsAndReloads) {
  prometheus::Registry registry;
  Metrics metrics(registry);
  metrics.CountFinding("nccl-proto-invalid", "deny");
  metrics.CountInternalError("validate");
  metrics.CountCertificateReload(true);
  metrics.CountCertificateReload(false);
  metrics.SetCertificateExpiry(1800000000);
  metrics.CountPolicyReload(false);
  const std::string text = metrics.Render();
  EXPECT_TRUE(
      Has(text, R"(ncclguard_webhook_findings_total{level="deny",rule="nccl-proto-invalid"} 1)"));
  EXPECT_TRUE(Has(text, R"(ncclguard_webhook_internal_errors_total{endpoint="validate"} 1)"));
  EXPECT_TRUE(Has(text, R"(ncclguard_webhook_certificate_reloads_total{result="success"} 1)"));
  EXPECT_TRUE(Has(text, R"(ncclguard_webhook_certificate_reloads_total{result="failure"} 1)"));
  EXPECT_TRUE(Has(text, "ncclguard_webhook_certificate_expiry_timestamp_seconds 1800000000"));
  EXPECT_TRUE(Has(text, R"(ncclguard_webhook_policy_reloads_total{result="failure"} 1)"));
}

TEST(Metrics, TheSeriesAlertsReadStartAtZero) {
  prometheus::Registry registry;
  const Metrics metrics(registry);
  const std::string text = metrics.Render();
  EXPECT_TRUE(Has(text, R"(ncclguard_webhook_internal_errors_total{endpoint="mutate"} 0)"));
  EXPECT_TRUE(Has(text, R"(ncclguard_webhook_internal_errors_total{endpoint="validate"} 0)"));
  EXPECT_TRUE(Has(text, R"(ncclguard_webhook_certificate_reloads_total{result="failure"} 0)"));
  EXPECT_TRUE(Has(text, R"(ncclguard_webhook_policy_reloads_total{result="success"} 0)"));
  // Every rule's denials, and only denials: fixes and warnings appear when made.
  EXPECT_TRUE(
      Has(text, R"(ncclguard_webhook_findings_total{level="deny",rule="nccl-proto-invalid"} 0)"));
  EXPECT_TRUE(Has(
      text, R"(ncclguard_webhook_findings_total{level="deny",rule="efa-resources-missing"} 0)"));
  EXPECT_EQ(text.find(R"(level="fix")"), std::string::npos);
}

TEST(Metrics, AuditFindingsAreCountedByRuleAndActionNotAsFindings) {
  prometheus::Registry registry;
  Metrics metrics(registry);
  core::Finding deny;
  deny.rule = "nccl-proto-invalid";
  deny.level = core::Level::Deny;
  core::Finding fix;
  fix.rule = "efa-resources-missing";
  fix.level = core::Level::Fix;
  const std::vector<core::Finding> findings{deny, fix, fix};
  metrics.CountAdmission("validate", "audited", 0.001, findings, /*audit=*/true);
  const std::string text = metrics.Render();
  EXPECT_TRUE(
      Has(text, R"(ncclguard_webhook_requests_total{endpoint="validate",result="audited"} 1)"));
  EXPECT_TRUE(
      Has(text,
          R"(ncclguard_webhook_audit_findings_total{action="deny",rule="nccl-proto-invalid"} 1)"));
  EXPECT_TRUE(Has(
      text,
      R"(ncclguard_webhook_audit_findings_total{action="fix",rule="efa-resources-missing"} 2)"));
  // Enforce's counts are untouched: nothing was denied or fixed.
  EXPECT_TRUE(
      Has(text, R"(ncclguard_webhook_findings_total{level="deny",rule="nccl-proto-invalid"} 0)"));
  EXPECT_EQ(text.find(R"(level="fix")"), std::string::npos);
  // Every rule's would-be denials start at 0, as its denials do.
  EXPECT_TRUE(Has(
      text, R"(ncclguard_webhook_audit_findings_total{action="deny",rule="ipc-lock-missing"} 0)"));
  EXPECT_EQ(text.find(R"(action="warn")"), std::string::npos);
}

TEST(Metrics, LabelValuesAreEscaped) {
  prometheus::Registry registry;
  Metrics metrics(registry);
  metrics.CountRequest("a\"b\\c\nd", "ok", 0.001);
  EXPECT_NE(metrics.Render().find(R"(endpoint="a\"b\\c\nd")"), std::string::npos);
}

// metrics::TextFamily writes what prometheus-cpp's serializer writes for the same gauges, byte
// for byte: escapes in the label values, integral and fractional values.
TEST(Metrics, ATextFamilyReadsAsTheSerializersFamily) {
  const std::string name = "ncclguard_test_gauge";
  const std::string help = "What the gauge says.";
  const std::vector<std::pair<std::string, double>> samples = {
      {"plain", 1}, {"a\"b\\c\nd", 0}, {"", 0.25}, {"node-0001", 123456789}};
  prometheus::MetricFamily family{name, help, prometheus::MetricType::Gauge, {}};
  std::string text;
  metrics::TextFamily written(name, help, text);
  for (const auto& [value, number] : samples) {
    prometheus::ClientMetric metric;
    metric.label = {{"check", "c"}, {"node", value}};
    metric.gauge.value = number;
    family.metric.push_back(std::move(metric));
    written.Add({{"check", "c"}, {"node", value}}, number);
  }
  EXPECT_EQ(text, prometheus::TextSerializer().Serialize({family}));
  // Its help escaped as the exposition format says (prometheus-cpp's serializer does not).
  text.clear();
  metrics::TextFamily(name, "a \\ and a\nnewline", text);
  EXPECT_EQ(text.substr(0, text.find('\n')), "# HELP ncclguard_test_gauge a \\\\ and a\\nnewline");
}

// A text collector's families come after the others', only while it is registered.
TEST(Metrics, TextCollectorsAreRenderedAfterTheFamilies) {
  class Collector final : public metrics::TextCollectable {
   public:
    std::vector<prometheus::MetricFamily> Collect() const override { return {}; }
    void CollectText(std::string& out) const override {
      metrics::TextFamily("ncclguard_test_text", "A test family.", out).Add({{"a", "b"}}, 2);
    }
  };
  prometheus::Registry registry;
  Metrics metrics(registry);
  metrics.CountRequest("mutate", "ok", 0.001);
  const Collector collector;
  {
    const metrics::CollectorRegistration registration(registry, collector);
    const std::string text = metrics::Render(registry);
    const auto at = text.find("ncclguard_test_text{a=\"b\"} 2\n");
    ASSERT_NE(at, std::string::npos) << text;
    EXPECT_LT(text.find("ncclguard_webhook_requests_total{"), at);
  }
  EXPECT_EQ(metrics::Render(registry).find("ncclguard_test_text"), std::string::npos);
}

TEST(Metrics, TheProcessRegistryNamesTheBuild) {
  EXPECT_NE(metrics::Render().find("ncclguard_build_info{version=\""), std::string::npos);
}

TEST(Metrics, ExponentialBucketsMultiply) {
  const auto bounds = metrics::ExponentialBuckets(0.5, 4, 3);
  ASSERT_EQ(bounds.size(), 3u);
  EXPECT_DOUBLE_EQ(bounds[0], 0.5);
  EXPECT_DOUBLE_EQ(bounds[2], 8);
}

}  // namespace
}  // namespace ncclguard::webhook
