// `ncclguard controller --resolve-digests`'s wiring (cli/tag_resolution.h): a pod's pull secrets
// and the resolver behind AdmitOptions::resolve_digest. What the resolver does against a real
// registry is ctest digest_resolver; here, what the webhook is told when nothing answers.
#include <gtest/gtest.h>

#include <string>

#include "cli/tag_resolution.h"
#include "core/image_ref.h"
#include "core/json.h"

namespace ncclguard::test {
namespace {

// A loopback port nothing listens on.
int ClosedPort() { return 9; }

kube::ClientConfig UnreachableApiServer() {
  kube::ClientConfig config;
  config.server = "http://127.0.0.1:" + std::to_string(ClosedPort());
  config.source = "test";
  return config;
}

TEST(TagResolution, AClosedRegistryAndAnUnreadablePullSecretAreSaidNotThrown) {
  webhook::DigestResolverOptions options;
  options.budget = std::chrono::milliseconds(500);
  options.plain_http_registries = {"127.0.0.1:" + std::to_string(ClosedPort())};
  const cli::TagResolution resolve{std::make_shared<webhook::DigestResolver>(options),
                                   std::make_shared<cli::PullSecrets>(UnreachableApiServer())};
  const core::Json pod{{"spec", {{"imagePullSecrets", core::Json::array({{{"name", "ecr"}}})}}}};
  std::string why;
  const auto digest =
      resolve(core::ParseImageReference("127.0.0.1:9/ml/train:2.4"), pod, "ml", why);
  EXPECT_FALSE(digest);
  EXPECT_NE(why.find("Unreachable"), std::string::npos) << why;
  EXPECT_NE(why.find("Secret ecr not read"), std::string::npos) << why;
}

TEST(TagResolution, APodWithoutPullSecretsAsksTheRegistryAnonymously) {
  cli::PullSecrets secrets(UnreachableApiServer());
  std::string why;
  EXPECT_TRUE(secrets.For(core::Json{{"spec", core::Json::object()}}, "ml", why).empty());
  EXPECT_TRUE(why.empty());
  // Entries without a name, or past the bound, are not read.
  core::Json many = core::Json::array();
  many.push_back(core::Json{{"name", ""}});
  many.push_back(core::Json(42));
  EXPECT_TRUE(secrets.For(core::Json{{"spec", {{"imagePullSecrets", many}}}}, "ml", why).empty());
  EXPECT_TRUE(why.empty());
}

}  // namespace
}  // namespace ncclguard::test
