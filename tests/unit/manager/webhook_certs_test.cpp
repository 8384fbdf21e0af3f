// The self-managed webhook certificates without an API server: what is generated, when it is
// renewed or rolled over (a pure function of the time and the Secret), and what a broken Secret
// leads to.
#include "manager/webhook_certs.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <string>

#include "kube/config.h"
#include "manager/webhook_cert_manager.h"

namespace ncclguard::manager {
namespace {

using Data = std::map<std::string, std::string>;

constexpr std::int64_t kStart = 1'800'000'000;  // 2027-01-15

CertLifetimes ShortLifetimes() {
  CertLifetimes lifetimes;
  lifetimes.ca_validity = std::chrono::seconds(1000);
  lifetimes.ca_rollover_before = std::chrono::seconds(300);
  lifetimes.serving_validity = std::chrono::seconds(90);
  lifetimes.backdate = std::chrono::seconds(0);
  return lifetimes;
}

const std::vector<std::string>& Hosts() {
  static const std::vector<std::string> hosts =
      ServiceHosts("ncclguard-webhook", "ncclguard-system", {"127.0.0.1"});
  return hosts;
}

Data Created(std::int64_t now, const CertLifetimes& lifetimes = ShortLifetimes()) {
  return ApplyCertAction({CertAction::kCreate, "test"}, {}, now, Hosts(), lifetimes);
}

CertDecision Decide(const Data& data, std::int64_t now, bool published = true) {
  return DecideCertAction(ParseCertSecret(data), now, published, Hosts(), ShortLifetimes());
}

std::string ParseError(const Data& data) {
  try {
    ParseCertSecret(data);
  } catch (const CertError& e) {
    return e.what();
  }
  return "no error";
}

TEST(WebhookCerts, ServingCertificateHasTheServiceNamesAndChainsToTheCa) {
  CertLifetimes lifetimes;  // the defaults: CA 5 years, serving 90 days
  const Data data = Created(kStart, lifetimes);
  const CertFacts ca = InspectCertificates(data.at(kCaCertKey), "ca").at(0);
  const CertFacts serving = InspectCertificates(data.at(kTlsCertKey), "tls").at(0);

  EXPECT_TRUE(ca.is_ca);
  EXPECT_FALSE(serving.is_ca);
  EXPECT_EQ(ca.not_after - kStart, 5LL * 365 * 24 * 3600);
  EXPECT_EQ(serving.not_after - kStart, 90LL * 24 * 3600);
  EXPECT_EQ(kStart - serving.not_before, 300);  // backdated for lagging clocks
  EXPECT_EQ(serving.dns_names,
            (std::vector<std::string>{"ncclguard-webhook.ncclguard-system.svc", "ncclguard-webhook",
                                      "ncclguard-webhook.ncclguard-system",
                                      "ncclguard-webhook.ncclguard-system.svc.cluster.local"}));
  EXPECT_EQ(serving.ip_addresses, std::vector<std::string>{"127.0.0.1"});

  EXPECT_TRUE(KeyMatchesCertificate(data.at(kTlsCertKey), data.at(kTlsKeyKey)));
  EXPECT_TRUE(KeyMatchesCertificate(data.at(kCaCertKey), data.at(kCaKeyKey)));
  EXPECT_FALSE(KeyMatchesCertificate(data.at(kTlsCertKey), data.at(kCaKeyKey)));
  EXPECT_NE(data.at(kTlsKeyKey).find("BEGIN PRIVATE KEY"), std::string::npos);

  std::string error;
  EXPECT_TRUE(VerifyAgainstBundle(data.at(kTlsCertKey), data.at(kCaCertKey), kStart + 60, &error))
      << error;
  // Expired, or checked against a CA that did not sign it: X509_verify_cert refuses.
  EXPECT_FALSE(VerifyAgainstBundle(data.at(kTlsCertKey), data.at(kCaCertKey), serving.not_after + 1,
                                   &error));
  EXPECT_NE(error.find("expired"), std::string::npos) << error;
  const Data other = Created(kStart, lifetimes);
  EXPECT_FALSE(VerifyAgainstBundle(data.at(kTlsCertKey), other.at(kCaCertKey), kStart, &error));
  // The CA is not a serving certificate.
  EXPECT_FALSE(VerifyAgainstBundle(data.at(kCaCertKey), data.at(kCaCertKey), kStart, &error));
}

TEST(WebhookCerts, ServingCertificateIsRenewedWhenAThirdOfItsLifetimeIsLeft) {
  const Data data = Created(kStart);
  EXPECT_EQ(Decide(data, kStart).action, CertAction::kNone);
  EXPECT_EQ(Decide(data, kStart + 59).action, CertAction::kNone);
  const CertDecision due = Decide(data, kStart + 60);
  EXPECT_EQ(due.action, CertAction::kRenewServing);
  EXPECT_NE(due.reason.find("less than a third"), std::string::npos) << due.reason;
  EXPECT_EQ(Decide(data, kStart + 91).action, CertAction::kRenewServing);

  const Data renewed = ApplyCertAction(due, data, kStart + 60, Hosts(), ShortLifetimes());
  // Same CA, so the bundle the API server holds stays valid.
  EXPECT_EQ(renewed.at(kCaCertKey), data.at(kCaCertKey));
  EXPECT_EQ(renewed.at(kCaKeyKey), data.at(kCaKeyKey));
  EXPECT_NE(renewed.at(kTlsKeyKey), data.at(kTlsKeyKey));
  EXPECT_TRUE(VerifyAgainstBundle(renewed.at(kTlsCertKey), data.at(kCaCertKey), kStart + 61));
  EXPECT_EQ(Decide(renewed, kStart + 61).action, CertAction::kNone);
}

TEST(WebhookCerts, ServingCertificateNeverOutlivesItsCa) {
  Data data = Created(kStart);
  const CertDecision renew{CertAction::kRenewServing, "test"};
  data = ApplyCertAction(renew, data, kStart + 950, Hosts(), ShortLifetimes());
  EXPECT_EQ(InspectCertificates(data.at(kTlsCertKey), "tls").at(0).not_after, kStart + 1000);
}

TEST(WebhookCerts, CaRollsOverWithAnOverlapInTheBundle) {
  Data data = Created(kStart);
  // Keep the serving certificate fresh up to the rollover.
  data = ApplyCertAction({CertAction::kRenewServing, ""}, data, kStart + 650, Hosts(),
                         ShortLifetimes());
  const std::string old_ca = data.at(kCaCertKey);
  const std::string old_serving = data.at(kTlsCertKey);

  EXPECT_EQ(Decide(data, kStart + 700).action, CertAction::kNone);  // exactly 300 s left
  const CertDecision roll = Decide(data, kStart + 701);
  ASSERT_EQ(roll.action, CertAction::kAddCa) << roll.reason;

  // 1. The new CA joins the bundle; the serving certificate stays.
  data = ApplyCertAction(roll, data, kStart + 701, Hosts(), ShortLifetimes());
  ASSERT_EQ(InspectCertificates(data.at(kCaCertKey), "ca").size(), 2u);
  EXPECT_TRUE(data.at(kCaCertKey).starts_with(old_ca));
  EXPECT_EQ(data.at(kTlsCertKey), old_serving);
  EXPECT_TRUE(VerifyAgainstBundle(old_serving, data.at(kCaCertKey), kStart + 702));
  EXPECT_FALSE(ParseCertSecret(data).serving_under_newest_ca);

  // 2. Until both configurations carry that bundle, nothing is signed by the new CA.
  const CertDecision waiting = Decide(data, kStart + 702, /*published=*/false);
  EXPECT_EQ(waiting.action, CertAction::kNone);
  EXPECT_NE(waiting.reason.find("waiting until every webhook configuration"), std::string::npos)
      << waiting.reason;

  // 3. Then the serving certificate is re-issued by the new CA; the bundle keeps both.
  const CertDecision reissue = Decide(data, kStart + 703, /*published=*/true);
  ASSERT_EQ(reissue.action, CertAction::kRenewServing) << reissue.reason;
  data = ApplyCertAction(reissue, data, kStart + 703, Hosts(), ShortLifetimes());
  EXPECT_TRUE(ParseCertSecret(data).serving_under_newest_ca);
  EXPECT_EQ(InspectCertificates(data.at(kCaCertKey), "ca").size(), 2u);
  EXPECT_TRUE(VerifyAgainstBundle(data.at(kTlsCertKey), data.at(kCaCertKey), kStart + 704));
  EXPECT_FALSE(VerifyAgainstBundle(data.at(kTlsCertKey), old_ca, kStart + 704));
  EXPECT_EQ(Decide(data, kStart + 704).action, CertAction::kNone);

  // 4. The old CA leaves the bundle once it has expired, not before.
  data = ApplyCertAction({CertAction::kRenewServing, ""}, data, kStart + 990, Hosts(),
                         ShortLifetimes());
  EXPECT_EQ(Decide(data, kStart + 999).action, CertAction::kNone);
  const CertDecision drop = Decide(data, kStart + 1000);
  ASSERT_EQ(drop.action, CertAction::kDropExpiredCas) << drop.reason;
  data = ApplyCertAction(drop, data, kStart + 1000, Hosts(), ShortLifetimes());
  ASSERT_EQ(InspectCertificates(data.at(kCaCertKey), "ca").size(), 1u);
  EXPECT_TRUE(VerifyAgainstBundle(data.at(kTlsCertKey), data.at(kCaCertKey), kStart + 1001));
}

TEST(WebhookCerts, AnExpiredServingCertificateIsRenewedEvenBeforeTheBundleIsPublished) {
  Data data = Created(kStart);
  data = ApplyCertAction({CertAction::kAddCa, ""}, data, kStart + 10, Hosts(), ShortLifetimes());
  EXPECT_EQ(Decide(data, kStart + 91, /*published=*/false).action, CertAction::kRenewServing);
}

TEST(WebhookCerts, AnExpiredCaStartsOver) {
  const Data data = Created(kStart);
  EXPECT_EQ(Decide(data, kStart + 1000).action, CertAction::kCreate);
}

TEST(WebhookCerts, AMissingHostLeadsToANewServingCertificate) {
  const Data data = Created(kStart);
  std::vector<std::string> more = Hosts();
  more.push_back("10.0.0.7");
  const CertDecision decision =
      DecideCertAction(ParseCertSecret(data), kStart + 1, true, more, ShortLifetimes());
  EXPECT_EQ(decision.action, CertAction::kRenewServing);
  EXPECT_NE(decision.reason.find("10.0.0.7"), std::string::npos) << decision.reason;
}

TEST(WebhookCerts, MalformedSecretsAreRefusedWithAReasonAndNoKeyMaterial) {
  const Data good = Created(kStart);
  const Data other = Created(kStart);
  ASSERT_EQ(ParseError(good), "no error");

  std::map<std::string, Data> broken;
  for (const char* key : {kTlsCertKey, kTlsKeyKey, kCaCertKey, kCaKeyKey}) {
    Data missing = good;
    missing.erase(key);
    broken[std::string("missing ") + key] = missing;
    Data empty = good;
    empty[key] = "";
    broken[std::string("empty ") + key] = empty;
    Data garbage = good;
    garbage[key] = "-----BEGIN CERTIFICATE-----\nnot base64 at all\n-----END CERTIFICATE-----\n";
    broken[std::string("bad PEM in ") + key] = garbage;
  }
  Data swapped = good;
  swapped[kTlsKeyKey] = other.at(kTlsKeyKey);
  broken["tls.key of another certificate"] = swapped;
  Data ca_key = good;
  ca_key[kCaKeyKey] = other.at(kCaKeyKey);
  broken["ca.key of another CA"] = ca_key;
  Data foreign = good;
  foreign[kTlsCertKey] = other.at(kTlsCertKey);
  foreign[kTlsKeyKey] = other.at(kTlsKeyKey);
  broken["tls.crt from another CA"] = foreign;
  Data not_ca = good;
  not_ca[kCaCertKey] = good.at(kTlsCertKey);
  broken["ca.crt that is no CA"] = not_ca;
  Data torn = good;
  torn[kCaCertKey] = good.at(kCaCertKey) + "-----BEGIN CERTIFICATE-----\nMIIB\n";
  broken["ca.crt with a torn second certificate"] = torn;

  for (const auto& [what, data] : broken) {
    const std::string error = ParseError(data);
    EXPECT_NE(error, "no error") << what;
    EXPECT_EQ(error.find("PRIVATE KEY"), std::string::npos) << what << ": " << error;
    EXPECT_EQ(error.find(good.at(kTlsKeyKey).substr(30, 20)), std::string::npos) << what;
  }
  EXPECT_EQ(ParseError(swapped), "tls.key does not match tls.crt");
  EXPECT_EQ(ParseError(ca_key), "ca.key does not match the newest CA in ca.crt");
  EXPECT_EQ(ParseError(foreign), "tls.crt was not signed by a CA in ca.crt");
  EXPECT_EQ(ParseError(broken["missing ca.key"]), "the Secret has no ca.key");
}

TEST(WebhookCerts, HostsThatAreNeitherNamesNorAddressesAreRefused) {
  EXPECT_NO_THROW(CheckHosts({"127.0.0.1", "::1", "webhook.example.com", "localhost"}));
  EXPECT_THROW(CheckHosts({"a,DNS:evil"}), CertError);
  EXPECT_THROW(CheckHosts({"two words"}), CertError);
  EXPECT_THROW(CheckHosts({""}), CertError);
}

// The Secret holds the CA key: with an owner configured it carries the owner reference the
// garbage collector deletes it by on uninstall; without one (tests, a CLI outside a cluster),
// none.
TEST(WebhookCerts, TheCreatedSecretIsOwnedByTheConfiguredOwnerOnly) {
  WebhookCertOptions options;
  options.namespace_ = "ncclguard-system";
  options.secret_name = "ncclguard-webhook-tls";
  const Data data = Created(kStart);

  const core::Json unowned = NewCertSecret(options, data);
  EXPECT_EQ(unowned["type"], "kubernetes.io/tls");
  EXPECT_EQ(unowned["metadata"]["name"], "ncclguard-webhook-tls");
  EXPECT_EQ(unowned["metadata"]["namespace"], "ncclguard-system");
  EXPECT_FALSE(unowned["metadata"].contains("ownerReferences"));
  EXPECT_EQ(kube::DecodeBase64(unowned["data"][kCaKeyKey].get<std::string>(), "ca.key"),
            data.at(kCaKeyKey));

  options.owner = kube::OwnerReference{"v1", "ServiceAccount", "ncclguard-controller", "uid-1"};
  const core::Json owned = NewCertSecret(options, data);
  ASSERT_EQ(owned["metadata"]["ownerReferences"].size(), 1u);
  EXPECT_EQ(owned["metadata"]["ownerReferences"][0], core::Json({{"apiVersion", "v1"},
                                                                 {"kind", "ServiceAccount"},
                                                                 {"name", "ncclguard-controller"},
                                                                 {"uid", "uid-1"}}));
  EXPECT_EQ(owned["data"], unowned["data"]);
}

}  // namespace
}  // namespace ncclguard::manager
