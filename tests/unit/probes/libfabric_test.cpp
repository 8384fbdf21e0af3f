// The real fi_getinfo path: Debian's libfabric with its tcp and sockets providers stands in for
// the EFA installer's libfabric with the efa provider.
#include <gtest/gtest.h>

#include "probes/facts.h"
#include "tests/unit/probes/probe_test_support.h"

namespace ncclguard::test {
namespace {

TEST(Libfabric, TcpProviderAnswersFiGetinfo) {
  probes::RealFactSources sources;
  const auto facts = sources.Fabric("tcp");
  ASSERT_TRUE(facts.loaded) << facts.error;
  EXPECT_FALSE(facts.version.empty());
  EXPECT_TRUE(facts.provider_found) << facts.error;
  EXPECT_FALSE(facts.domains.empty());
}

TEST(Libfabric, SocketsProviderAnswersFiGetinfo) {
  probes::RealFactSources sources;
  const auto facts = sources.Fabric("sockets");
  ASSERT_TRUE(facts.loaded) << facts.error;
  EXPECT_TRUE(facts.provider_found) << facts.error;
  EXPECT_FALSE(facts.domains.empty());
}

TEST(Libfabric, UnknownProviderIsNotFoundWithTheReason) {
  probes::RealFactSources sources;
  const auto facts = sources.Fabric("no-such-provider");
  EXPECT_TRUE(facts.loaded);
  EXPECT_FALSE(facts.provider_found);
  EXPECT_NE(facts.error.find("fi_getinfo(provider no-such-provider)"), std::string::npos)
      << facts.error;
}

TEST(Libfabric, EfaProviderCheckPassesOverTheRealTcpProvider) {
  probes::ProbeOptions options;
  options.host_root = FixturePath("does-not-exist");
  options.fabric_provider = "tcp";
  auto context =
      std::make_shared<probes::ProbeContext>(options, std::make_shared<probes::RealFactSources>());
  const auto report = probes::RunProbe(context, {"efa-provider"});
  ASSERT_EQ(report.checks.size(), 1u);
  EXPECT_EQ(report.checks[0].status, probes::CheckStatus::Pass) << report.checks[0].observed;
  EXPECT_NE(report.checks[0].observed.find(": tcp provider, "), std::string::npos)
      << report.checks[0].observed;
}

}  // namespace
}  // namespace ncclguard::test
