// The probe's rounds of checks between nodes (probes/peer_round.h) over real sockets and
// libfabric's tcp provider on 127.0.0.0/8, with the NodeValidations kept in memory in place of
// the API server (the node tests run the same rounds between two real nodes): two probes and a
// third member whose probe is gone. The round's first pass finds the gone node's ring client
// failing it, the second pass re-tests both with the node known good, and the next round's
// judgement names the gone node alone: the two live probes publish Reachable.
#include "probes/peer_round.h"

#include <gtest/gtest.h>

#include <sched.h>
#include <unistd.h>
#include <algorithm>

#include <cstdlib>
#include <future>
#include <map>
#include <mutex>
#include <thread>

#include "core/errors.h"
#include "core/peer_status.h"

namespace ncclguard::test {
namespace {

using namespace std::chrono_literals;

// The NodeValidations of the group, as the API server would keep them: status.peer merged in.
class MemoryDirectory {
 public:
  void Add(const std::string& node, core::Json status) {
    const std::lock_guard lock(mutex_);
    validations_[node] = {{"metadata", {{"name", node}}}, {"status", std::move(status)}};
  }
  std::vector<core::Json> List() {
    const std::lock_guard lock(mutex_);
    std::vector<core::Json> items;
    for (const auto& [name, validation] : validations_) items.push_back(validation);
    return items;
  }
  void Publish(const std::string& node, const core::Json& peer) {
    const std::lock_guard lock(mutex_);
    validations_.at(node)["status"]["peer"] = peer;
    ++writes_;
  }
  core::Json Peer(const std::string& node) {
    const std::lock_guard lock(mutex_);
    return validations_.at(node)["status"].value("peer", core::Json());
  }
  int writes() {
    const std::lock_guard lock(mutex_);
    return writes_;
  }

 private:
  std::mutex mutex_;
  std::map<std::string, core::Json> validations_;
  int writes_ = 0;
};

class NodeView : public probes::PeerDirectory {
 public:
  NodeView(std::shared_ptr<MemoryDirectory> all, std::string node)
      : all_(std::move(all)), node_(std::move(node)) {}
  std::vector<core::Json> List() override { return all_->List(); }
  void Publish(const core::Json& peer) override { all_->Publish(node_, peer); }

 private:
  std::shared_ptr<MemoryDirectory> all_;
  std::string node_;
};

std::string Now() {
  const std::time_t now = std::time(nullptr);
  char text[32];
  std::strftime(text, sizeof text, "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&now));
  return text;
}

probes::PeerRoundOptions Options(const std::string& node, const std::string& address) {
  probes::PeerRoundOptions options;
  options.node_name = node;
  options.instance_type = "p5.48xlarge";
  options.address = address;
  options.serve_address = address;
  options.timeout = 400ms;
  options.skew = 150ms;
  options.period = 10s;
  options.fixed_ports = {29531};
  options.ephemeral = 2;
  options.port_first = 47000;
  options.port_last = 47999;
  return options;
}

std::unique_ptr<probes::FabricEndpoint> Fabric(const std::string& address) {
  probes::FabricOptions options;
  options.provider = "tcp";
  options.source = address;
  try {
    return probes::FabricEndpoint::Open(options);
  } catch (const std::exception&) {
    return nullptr;  // no libfabric tcp provider here: the TCP tier alone
  }
}

TEST(PeerRound, TwoProbesAndAGoneMemberNameTheGoneOneAndPublishThemselvesReachable) {
  auto directory = std::make_shared<MemoryDirectory>();
  const core::Json fresh{{"instanceType", "p5.48xlarge"}, {"lastProbeTime", Now()}};
  for (const char* node : {"node-a", "node-b", "node-c"}) directory->Add(node, fresh);
  // node-c's probe published its block, then went away: nothing serves 127.0.0.93.
  core::PeerBlock gone;
  gone.address = "127.0.0.93";
  gone.port_first = 47000;
  gone.port_last = 47999;
  gone.standing = "Reachable";
  directory->Publish("node-c", core::PeerBlockJson(gone));
  // An unrelated type and a stale member are not in the group.
  directory->Add("other-type", {{"instanceType", "p4d.24xlarge"}, {"lastProbeTime", Now()}});
  directory->Publish("other-type", core::PeerBlockJson(gone));
  directory->Add("stale",
                 {{"instanceType", "p5.48xlarge"}, {"lastProbeTime", "2020-01-01T00:00:00Z"}});
  directory->Publish("stale", core::PeerBlockJson(gone));

  probes::PeerRunner a(Options("node-a", "127.0.0.91"),
                       std::make_shared<NodeView>(directory, "node-a"), Fabric("127.0.0.91"),
                       [] { return Fabric("127.0.0.91"); });
  probes::PeerRunner b(Options("node-b", "127.0.0.92"),
                       std::make_shared<NodeView>(directory, "node-b"), Fabric("127.0.0.92"),
                       [] { return Fabric("127.0.0.92"); });
  // Both probes started and published their blocks before the round.
  a.Announce();
  b.Announce();
  // Round 1000 over [node-a, node-b, node-c] is the ring a->b, b->c, c->a (stride 1).
  const std::uint64_t round = 1000;
  kube::StopToken stop;
  std::thread second([&] { b.RunRound(round, stop, 2s); });
  a.RunRound(round, stop, 2s);
  second.join();

  // node-b's ring test of node-c failed, on the first port it tried.
  const auto published_b = core::PeerBlockOf({{"status", {{"peer", directory->Peer("node-b")}}}});
  ASSERT_TRUE(published_b);
  EXPECT_EQ(published_b->round, round);
  bool b_failed_c = false;
  for (const core::PeerTestResult& t : published_b->tests) {
    if (t.peer == "node-c" && t.pass == core::kPeerPassRing && t.tier == core::kPeerTierTcp) {
      b_failed_c = !t.passed && t.result == "refused" && t.failed_port != 0;
    }
  }
  EXPECT_TRUE(b_failed_c) << directory->Peer("node-b").dump() << "\n"
                          << directory->Peer("node-a").dump();
  // node-a, the only good node, re-tested node-c in the second pass and failed it too.
  const auto published_a = core::PeerBlockOf({{"status", {{"peer", directory->Peer("node-a")}}}});
  ASSERT_TRUE(published_a);
  EXPECT_EQ(published_a->round, round) << directory->Peer("node-a").dump();

  // The next round's start judges this one: both live probes are Reachable.
  kube::StopToken stopped;
  stopped.Stop();
  a.RunRound(round + 1, stopped, 0ms);
  b.RunRound(round + 1, stopped, 0ms);
  EXPECT_EQ(a.block().standing, core::kPeerReachable) << a.block().message;
  EXPECT_EQ(b.block().standing, core::kPeerReachable) << b.block().message;
  EXPECT_EQ(directory->Peer("node-a").value("standing", ""), "Reachable");
  // The verdict carries the round it judged: what node-a tested, with whom, on which ports.
  const core::PeerBlock judged = a.block();
  EXPECT_EQ(judged.judged_round, round);
  const auto ring = std::find_if(judged.tests.begin(), judged.tests.end(), [](const auto& t) {
    return t.pass == core::kPeerPassRing && t.tier == core::kPeerTierTcp;
  });
  ASSERT_NE(ring, judged.tests.end());
  EXPECT_EQ(ring->peer, "node-b");
  EXPECT_TRUE(ring->passed);
  EXPECT_EQ(ring->ports.substr(0, 6), "29531,") << ring->ports;
  EXPECT_EQ(directory->Peer("node-b").value("standing", ""), "Reachable");
  // What judged node-c, read the same way: unreachable.
  std::vector<core::PeerMember> members;
  for (const char* node : {"node-a", "node-b", "node-c"}) {
    members.push_back({node, *core::PeerBlockOf({{"status", {{"peer", directory->Peer(node)}}}})});
  }
  // The blocks now hold the verdicts; the round's tests are still those of `round` where one
  // failed.
  const std::vector<std::string> nodes{"node-a", "node-b", "node-c"};
  EXPECT_EQ(core::JudgeSelf("node-c", nodes, members, round, true).standing,
            core::kPeerUnreachable);
}

// A network namespace of the test's own, standing in for the hosts' (nodes share it here): a
// thread that entered it holds it until the end; its loopback is up.
class HostNamespace {
 public:
  HostNamespace() {
    thread_ = std::thread([this] {
      std::string path;
      if (unshare(CLONE_NEWNET) == 0)
        path = "/proc/self/task/" + std::to_string(gettid()) + "/ns/net";
      ready_.set_value(path);
      done_.get_future().wait();
    });
    path_ = ready_.get_future().get();
    if (!path_.empty()) {
      // /proc/self of this process: the task is one of its threads.
      path_ = "/proc/" + std::to_string(getpid()) + path_.substr(std::string("/proc/self").size());
    }
  }
  ~HostNamespace() {
    done_.set_value();
    thread_.join();
  }
  const std::string& path() const { return path_; }
  bool Run(const std::string& command) const {
    return std::system(("nsenter --net=" + path_ + " " + command + " >/dev/null 2>&1").c_str()) ==
           0;
  }

 private:
  std::promise<std::string> ready_;
  std::promise<void> done_;
  std::thread thread_;
  std::string path_;
};

// The host path (host-network pods, the node's INPUT rules): each probe serves and tests from
// the hosts' namespace. A DROP of new connections to the host's ephemeral range there fails the
// host path while the pod path passes, and the verdict names it.
TEST(PeerRound, AHostFirewallDropFailsTheHostPathWhileThePodPathPasses) {
  if (geteuid() != 0) GTEST_SKIP() << "entering a network namespace needs root";
  HostNamespace hosts;
  if (hosts.path().empty() || !hosts.Run("ip link set lo up")) {
    GTEST_SKIP() << "no network namespace of our own here (unshare, ip)";
  }
  if (!hosts.Run("iptables -A INPUT -p tcp --syn --dport 32768:60999 -j DROP")) {
    GTEST_SKIP() << "no iptables in the test's namespace";
  }
  auto directory = std::make_shared<MemoryDirectory>();
  const core::Json fresh{{"instanceType", "p5.48xlarge"}, {"lastProbeTime", Now()}};
  std::vector<std::unique_ptr<probes::PeerRunner>> runners;
  for (const auto& [node, address] :
       {std::pair{"node-a", "127.0.0.95"}, std::pair{"node-b", "127.0.0.96"}}) {
    directory->Add(node, fresh);
    probes::PeerRoundOptions options = Options(node, address);
    options.host_netns = hosts.path();
    options.host_address = address;
    options.host_serve_address = address;
    options.fixed_ports = {29533};
    runners.push_back(std::make_unique<probes::PeerRunner>(
        options, std::make_shared<NodeView>(directory, node), nullptr, nullptr));
    runners.back()->Announce();
    EXPECT_EQ(runners.back()->block().path, "pod-network,host-network");
    EXPECT_EQ(runners.back()->block().host_port_first, 32768);
  }
  kube::StopToken stop;
  std::thread b([&] { runners[1]->RunRound(2000, stop, 2s); });
  runners[0]->RunRound(2000, stop, 2s);
  b.join();
  kube::StopToken stopped;
  stopped.Stop();
  for (auto& runner : runners) runner->RunRound(2001, stopped, 0ms);
  const core::PeerBlock a = runners[0]->block();
  EXPECT_EQ(a.standing, core::kPeerUndecided) << a.message;
  EXPECT_EQ(a.failed_tier, core::kPeerTierTcp);
  EXPECT_NE(a.failed_detail.find("TCP host to host from node-"), std::string::npos)
      << a.failed_detail;
  EXPECT_NE(a.failed_detail.find("timed-out"), std::string::npos) << a.failed_detail;
  bool pod_passed = false;
  for (const core::PeerTestResult& t : a.tests) {
    if (t.path == core::kPeerPathPod) pod_passed = t.passed;
  }
  EXPECT_TRUE(pod_passed) << directory->Peer("node-a").dump();
}

TEST(PeerRound, APeriodTooShortForTheWindowsIsRefused) {
  probes::PeerRoundOptions options = Options("node-a", "127.0.0.91");
  options.period = 2s;
  options.timeout = 2s;
  EXPECT_THROW(probes::CheckPeerRoundOptions(options), core::InputError);
  options.period = 2min;
  EXPECT_NO_THROW(probes::CheckPeerRoundOptions(options));
  options.address.clear();
  EXPECT_THROW(probes::CheckPeerRoundOptions(options), core::InputError);
}

TEST(PeerRound, TheRoundsPortsAreTheFixedOnesAndASampleThatChangesWithTheRound) {
  const auto first = probes::RoundPorts({29500}, 32768, 60999, 4, 1);
  const auto second = probes::RoundPorts({29500}, 32768, 60999, 4, 2);
  EXPECT_EQ(first.size(), 5u);
  EXPECT_NE(first, second);
  EXPECT_EQ(first, probes::RoundPorts({29500}, 32768, 60999, 4, 1));  // the same on every node
  for (const std::uint16_t port : first) {
    EXPECT_TRUE(port == 29500 || (port >= 32768 && port <= 60999)) << port;
  }
  EXPECT_EQ(probes::RoundPorts({29500}, 0, 0, 4, 1), std::vector<std::uint16_t>{29500});
}

}  // namespace
}  // namespace ncclguard::test
