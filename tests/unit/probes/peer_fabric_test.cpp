// The fabric tier of the peer checks (probes/peer_fabric.h) with Debian's libfabric and its tcp
// provider on 127.0.0.1 (the efa provider needs an EFA device; the GPU machine's check script
// runs it there): a ping-pong between two endpoints, a peer that is gone, bad addresses.
#include "probes/peer_fabric.h"

#include <gtest/gtest.h>

#include <thread>

#include "core/errors.h"

namespace ncclguard::test {
namespace {

using namespace std::chrono_literals;
using probes::FabricOutcome;

probes::FabricOptions Loopback() {
  probes::FabricOptions options;
  options.provider = "tcp";
  options.source = "127.0.0.1";
  return options;
}

TEST(PeerFabric, APingAcrossTheProviderComesBack) {
  const auto server = probes::FabricEndpoint::Open(Loopback());
  EXPECT_NE(server->Provider().find("tcp"), std::string::npos) << server->Provider();
  std::atomic<bool> stop{false};
  std::uint64_t answered = 0;
  std::thread answering(
      [&] { answered = server->Answer(std::chrono::steady_clock::now() + 10s, &stop); });
  const auto client = probes::FabricEndpoint::Open(Loopback());
  const probes::FabricTest first = client->Ping(server->Address(), 5s);
  EXPECT_EQ(first.outcome, FabricOutcome::kPassed) << first.detail;
  const probes::FabricTest again = client->Ping(server->Address(), 5s);
  EXPECT_EQ(again.outcome, FabricOutcome::kPassed) << again.detail;
  // A second client, as the next node of a round would be.
  const auto other = probes::FabricEndpoint::Open(Loopback());
  EXPECT_EQ(other->Ping(server->Address(), 5s).outcome, FabricOutcome::kPassed);
  stop = true;
  answering.join();
  EXPECT_EQ(answered, 3u);
}

TEST(PeerFabric, APeerThatIsGoneIsNotPassed) {
  std::string gone;
  {
    const auto endpoint = probes::FabricEndpoint::Open(Loopback());
    gone = endpoint->Address();
  }
  const auto client = probes::FabricEndpoint::Open(Loopback());
  const probes::FabricTest test = client->Ping(gone, 1s);
  EXPECT_NE(test.outcome, FabricOutcome::kPassed);
}

TEST(PeerFabric, BadAddressesAndProvidersAreInputErrors) {
  const auto client = probes::FabricEndpoint::Open(Loopback());
  for (const std::string& bad :
       {std::string(), std::string("abc"), std::string("zz"), std::string(1000, 'a')}) {
    EXPECT_THROW(client->Ping(bad, 10ms), core::InputError) << bad;
  }
  probes::FabricOptions none = Loopback();
  none.provider = "no-such-provider";
  EXPECT_THROW(probes::FabricEndpoint::Open(none), core::InputError);
}

}  // namespace
}  // namespace ncclguard::test
