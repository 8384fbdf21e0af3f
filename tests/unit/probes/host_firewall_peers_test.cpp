// host-firewall with the checks between nodes (probes/checks/host_firewall.cpp): a rule that
// drops NCCL's ports is a warning while the node's peers reach it, and a failure while they do
// not (status.peer's standing, which the probe gives the check). Real rules, in a network
// namespace of the test's own (root only; skipped elsewhere).
#include <gtest/gtest.h>
#include <sched.h>
#include <unistd.h>

#include <cstdlib>
#include <future>
#include <thread>

#include "core/peer_status.h"
#include "probes/check.h"
#include "probes/context.h"
#include "probes/facts.h"

namespace ncclguard::test {
namespace {

TEST(HostFirewallWithPeers, ARuleIsAWarningWhilePeersReachTheNodeAndAFailureWhileTheyDoNot) {
  if (geteuid() != 0) GTEST_SKIP() << "a network namespace of our own needs root";
  std::promise<std::string> ready;
  std::promise<void> done;
  std::thread holder([&] {
    std::string path;
    if (unshare(CLONE_NEWNET) == 0) {
      path = "/proc/" + std::to_string(getpid()) + "/task/" + std::to_string(gettid()) + "/ns/net";
    }
    ready.set_value(path);
    done.get_future().wait();
  });
  const std::string netns = ready.get_future().get();
  const auto run = [&](const std::string& command) {
    return std::system(("nsenter --net=" + netns + " " + command + " >/dev/null 2>&1").c_str()) ==
           0;
  };
  const bool ready_to_test =
      !netns.empty() && run("iptables -A INPUT -p tcp --syn --dport 32768:60999 -j DROP");
  if (ready_to_test) {
    const probes::Check* check = probes::CheckRegistry::Find("host-firewall");
    ASSERT_NE(check, nullptr);
    const auto status_with = [&](std::string standing) {
      probes::ProbeOptions options;
      options.firewall_netns = netns;
      options.peer_standing = std::move(standing);
      probes::ProbeContext context(options, std::make_shared<probes::RealFactSources>());
      return check->Run(context);
    };
    const probes::CheckResult warned = status_with(std::string(core::kPeerReachable));
    EXPECT_EQ(warned.status, probes::CheckStatus::Warn) << warned.message;
    EXPECT_NE(warned.message.find("32768-60999"), std::string::npos) << warned.message;
    const probes::CheckResult failed = status_with(std::string(core::kPeerUndecided));
    EXPECT_EQ(failed.status, probes::CheckStatus::Fail) << failed.message;
    EXPECT_NE(failed.message.find("its peers cannot reach it either"), std::string::npos)
        << failed.message;
    EXPECT_EQ(status_with("").status, probes::CheckStatus::Warn);  // no peer checks
  }
  done.set_value();
  holder.join();
  if (!ready_to_test) GTEST_SKIP() << "no network namespace or iptables here";
}

}  // namespace
}  // namespace ncclguard::test
