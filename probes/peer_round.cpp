#include "probes/peer_round.h"

#include <algorithm>
#include <ctime>
#include <exception>
#include <thread>

#include "core/errors.h"
#include "log/log.h"
#include "probes/netns.h"
#include "probes/peer_tcp.h"
#include "probes/report.h"

namespace ncclguard::probes {
namespace {

using Clock = std::chrono::system_clock;

std::string Field(const core::Json& object, const char* outer, const char* key) {
  const auto parent = object.find(outer);
  if (parent == object.end() || !parent->is_object()) return "";
  const auto value = parent->find(key);
  return value != parent->end() && value->is_string() ? value->get<std::string>() : "";
}

std::string PortList(const std::vector<std::uint16_t>& ports) {
  std::string list;
  for (const std::uint16_t port : ports) list += (list.empty() ? "" : ",") + std::to_string(port);
  return list;
}

double Milliseconds(std::chrono::microseconds took) {
  return static_cast<double>(took.count()) / 1000.0;
}

bool SameVerdict(const core::PeerBlock& block, const core::PeerJudgement& judgement) {
  return block.standing == judgement.standing && block.failed_with == judgement.failed_with &&
         block.failed_tier == judgement.failed_tier &&
         block.failed_detail == judgement.failed_detail;
}

}  // namespace

std::vector<std::uint16_t> RoundPorts(const std::vector<std::uint16_t>& fixed, std::uint16_t first,
                                      std::uint16_t last, std::size_t count, std::uint64_t round) {
  std::vector<std::uint16_t> ports = fixed;
  if (count > 0 && first != 0 && first <= last) {
    for (const std::uint16_t port : SamplePorts(first, last, count, round)) ports.push_back(port);
  }
  std::sort(ports.begin(), ports.end());
  ports.erase(std::unique(ports.begin(), ports.end()), ports.end());
  if (ports.size() > kMaxPeerPorts) ports.resize(kMaxPeerPorts);
  return ports;
}

void CheckPeerRoundOptions(const PeerRoundOptions& options) {
  if (options.node_name.empty()) throw core::InputError("the peer checks need the node's name");
  if (options.address.empty()) {
    throw core::InputError("the peer checks need the address peers reach this probe at");
  }
  if (options.timeout.count() <= 0) throw core::InputError("the peer test timeout must be > 0");
  const auto window = 2 * options.timeout + 2 * options.skew;
  if (options.period < 2 * (window + std::chrono::seconds(2))) {
    throw core::InputError("the peer round period must be at least " +
                           std::to_string((2 * (window + std::chrono::seconds(2))).count()) +
                           " ms for a test timeout of " + std::to_string(options.timeout.count()) +
                           " ms");
  }
  if (options.fixed_ports.size() + options.ephemeral > kMaxPeerPorts) {
    throw core::InputError("at most " + std::to_string(kMaxPeerPorts) + " peer ports a round");
  }
}

PeerRunner::PeerRunner(PeerRoundOptions options, std::shared_ptr<PeerDirectory> directory,
                       std::unique_ptr<FabricEndpoint> fabric, OpenPinger open_pinger)
    : options_(std::move(options)),
      directory_(std::move(directory)),
      fabric_(std::move(fabric)),
      open_pinger_(std::move(open_pinger)) {
  if (!open_pinger_) fabric_.reset();
  if (!options_.clock) options_.clock = [] { return Clock::now(); };
  block_.address = options_.address;
  block_.port_first = options_.port_first;
  block_.port_last = options_.port_last;
  block_.period_seconds = static_cast<std::uint64_t>(
      std::chrono::duration_cast<std::chrono::seconds>(options_.period).count());
  if (fabric_) {
    block_.fabric_provider = fabric_->Provider();
    block_.fabric_address = fabric_->Address();
  }
  block_.path = std::string(core::kPeerPathPod);
  if (!options_.host_netns.empty() && !options_.host_address.empty()) {
    // The host's own ip_local_port_range: net sysctls answer for the reader's namespace.
    try {
      RunInNetworkNamespace(options_.host_netns, [&] {
        std::tie(block_.host_port_first, block_.host_port_last) = ReadLocalPortRange();
      });
      block_.host_address = options_.host_address;
      block_.path += "," + std::string(core::kPeerPathHost);
    } catch (const std::exception& e) {
      log::Warn("peer checks: no host path (the pod path alone)", {{"error", e.what()}});
      options_.host_netns.clear();
    }
  } else {
    options_.host_netns.clear();
  }
  block_.standing = std::string(core::kPeerUntested);
  block_.message = "no test between this node and a peer has run yet";
}

core::PeerBlock PeerRunner::block() const {
  const std::lock_guard lock(mutex_);
  return block_;
}

std::chrono::milliseconds PeerRunner::Window() const {
  return 2 * options_.timeout + 2 * options_.skew;
}

void PeerRunner::Announce() { PublishIfDirty(); }

void PeerRunner::PublishIfDirty() {
  core::Json json;
  {
    const std::lock_guard lock(mutex_);
    if (!dirty_) return;
    json = core::PeerBlockJson(block_);
  }
  try {
    directory_->Publish(json);
    const std::lock_guard lock(mutex_);
    dirty_ = false;
  } catch (const std::exception& e) {
    log::Warn("peer checks: publishing status.peer failed (retried next phase)",
              {{"error", e.what()}});
  }
}

PeerRunner::Group PeerRunner::ReadGroup() {
  Group group;
  const Clock::time_point now = options_.clock();
  const std::vector<core::Json> validations = directory_->List();
  // The group is the instance type this node's own report names, as its peers read it.
  std::string type = options_.instance_type;
  for (const core::Json& validation : validations) {
    if (Field(validation, "metadata", "name") == options_.node_name) {
      type = Field(validation, "status", "instanceType");
    }
  }
  for (const core::Json& validation : validations) {
    const std::string name = Field(validation, "metadata", "name");
    if (name.empty() || name == options_.node_name) continue;
    if (Field(validation, "status", "instanceType") != type) continue;
    const auto seen = ParseRfc3339(Field(validation, "status", "lastProbeTime"));
    if (!seen || now - *seen > options_.member_ttl) continue;
    auto block = core::PeerBlockOf(validation);
    if (!block || block->address.empty()) continue;
    group.members.push_back({name, std::move(*block)});
  }
  {
    const std::lock_guard lock(mutex_);
    group.members.push_back({options_.node_name, block_});
  }
  for (const core::PeerMember& member : group.members) group.nodes.push_back(member.node);
  std::sort(group.nodes.begin(), group.nodes.end());
  if (group.nodes.size() < 2) {
    // Nothing to test and nobody to wait for: the only node of its type counts at once.
    const core::PeerJudgement alone =
        core::JudgeSelf(options_.node_name, group.nodes, group.members, 0, false);
    const std::lock_guard lock(mutex_);
    if (block_.standing != alone.standing) {
      block_.standing = alone.standing;
      block_.failed_with.clear();
      block_.failed_tier.clear();
      block_.failed_detail.clear();
      block_.message = alone.message;
      dirty_ = true;
      if (options_.on_standing) options_.on_standing(block_.standing);
    }
  }
  return group;
}

std::uint64_t PeerRunner::ServeWhile(std::uint64_t round, const kube::StopToken& stop,
                                     const std::function<void()>& work) {
  std::atomic<bool> stopping{false};
  const int wake = stop.OnStop([&stopping] { stopping = true; });
  const auto until = std::chrono::steady_clock::now() + Window();
  std::uint64_t fabric_answered = 0;
  std::thread fabric;
  if (fabric_) {
    fabric = std::thread([&] { fabric_answered = fabric_->Answer(until, &stopping); });
  }
  PeerServeSummary served;
  std::thread tcp([&] {
    PeerServeOptions serve;
    serve.address = options_.serve_address;
    serve.ports = RoundPorts(options_.fixed_ports, options_.port_first, options_.port_last,
                             options_.ephemeral, round);
    serve.duration = Window();
    serve.hello_timeout = options_.timeout;
    try {
      served = ServePeerPorts(serve, &stopping);
    } catch (const std::exception& e) {
      log::Warn("peer checks: serving failed", {{"round", round}, {"error", e.what()}});
    }
  });
  PeerServeSummary served_host;
  std::thread host;
  if (!options_.host_netns.empty()) {
    host = std::thread([&] {
      PeerServeOptions serve;
      serve.address = options_.host_serve_address;
      serve.ports =
          RoundPorts({}, block_.host_port_first, block_.host_port_last, options_.ephemeral, round);
      serve.duration = Window();
      serve.hello_timeout = options_.timeout;
      try {
        RunInNetworkNamespace(options_.host_netns,
                              [&] { served_host = ServePeerPorts(serve, &stopping); });
      } catch (const std::exception& e) {
        log::Warn("peer checks: serving the host path failed",
                  {{"round", round}, {"error", e.what()}});
      }
    });
  }
  const auto join = [&] {
    tcp.join();
    if (host.joinable()) host.join();
    if (fabric.joinable()) fabric.join();
  };
  try {
    work();
  } catch (...) {
    stopping = true;
    join();
    stop.RemoveOnStop(wake);
    throw;
  }
  join();
  stop.RemoveOnStop(wake);
  for (const std::string& port : served.unserved) {
    log::Warn("peer checks: a port was not served", {{"round", round}, {"port", port}});
  }
  return served.answered + served_host.answered + fabric_answered;
}

core::PeerTestResult PeerRunner::TestTcp(const core::PeerMember& peer, std::string_view pass,
                                         std::uint64_t round, std::string_view path) {
  const bool host = path == core::kPeerPathHost;
  // The host path tests the host's ephemeral range only: the master port is often a host-network
  // training pod's there.
  const std::vector<std::uint16_t> ports =
      host ? RoundPorts({}, peer.block.host_port_first, peer.block.host_port_last,
                        options_.ephemeral, round)
           : RoundPorts(options_.fixed_ports, peer.block.port_first, peer.block.port_last,
                        options_.ephemeral, round);
  core::PeerTestResult tcp;
  tcp.peer = peer.node;
  tcp.pass = pass;
  tcp.tier = core::kPeerTierTcp;
  tcp.path = path;
  tcp.ports = PortList(ports);
  const auto started = std::chrono::steady_clock::now();
  try {
    std::vector<PortTest> tested;
    if (host) {
      RunInNetworkNamespace(options_.host_netns, [&] {
        tested = TestPeerPorts(peer.block.host_address, ports, options_.timeout);
      });
    } else {
      tested = TestPeerPorts(peer.block.address, ports, options_.timeout);
    }
    std::size_t failed = 0;
    for (const PortTest& port : tested) {
      // On the host path a port refused or answered by another program is the host's own
      // business (a process holds it, or the peer could not serve it): only silence or an ICMP
      // error says a firewall.
      const bool counts =
          host ? port.outcome == PortOutcome::kTimedOut || port.outcome == PortOutcome::kUnreachable
               : port.outcome != PortOutcome::kPassed;
      if (!counts) continue;
      if (failed++ == 0) {
        tcp.result = PortOutcomeName(port.outcome);
        tcp.failed_port = port.port;
        tcp.detail = port.detail;
      }
    }
    tcp.passed = failed == 0;
    if (tcp.passed) {
      tcp.result = "passed";
    } else if (failed > 1) {
      tcp.detail = std::to_string(failed) + " of " + std::to_string(ports.size()) +
                   " ports failed" + (tcp.detail.empty() ? "" : "; " + tcp.detail);
    }
  } catch (const std::exception& e) {
    tcp.result = "failed";
    tcp.detail = e.what();
  }
  tcp.milliseconds = Milliseconds(std::chrono::duration_cast<std::chrono::microseconds>(
      std::chrono::steady_clock::now() - started));
  return tcp;
}

std::vector<core::PeerTestResult> PeerRunner::Test(const core::PeerMember& peer,
                                                   std::string_view pass, std::uint64_t round) {
  std::vector<core::PeerTestResult> results;
  results.push_back(TestTcp(peer, pass, round, core::kPeerPathPod));
  if (!options_.host_netns.empty() && !peer.block.host_address.empty()) {
    results.push_back(TestTcp(peer, pass, round, core::kPeerPathHost));
  }

  if (fabric_ && !peer.block.fabric_address.empty()) {
    core::PeerTestResult fabric;
    fabric.peer = peer.node;
    fabric.pass = pass;
    fabric.tier = core::kPeerTierFabric;
    fabric.provider = fabric_->Provider();
    try {
      const auto pinger = open_pinger_();
      if (!pinger) throw core::InputError("no fabric endpoint to ping from");
      const FabricTest ping = pinger->Ping(peer.block.fabric_address, options_.timeout);
      fabric.passed = ping.outcome == FabricOutcome::kPassed;
      fabric.result = FabricOutcomeName(ping.outcome);
      fabric.milliseconds = Milliseconds(ping.took);
      fabric.detail = ping.detail;
    } catch (const std::exception& e) {
      fabric.result = "failed";
      fabric.detail = e.what();
    }
    results.push_back(fabric);
  }
  for (const core::PeerTestResult& r : results) {
    if (options_.on_test) options_.on_test(r.tier, r.pass, r.passed, r.milliseconds / 1000.0);
  }
  return results;
}

void PeerRunner::Judge(std::uint64_t round, const Group& now) {
  // The round's own tests as this node ran them, whatever it managed to publish.
  std::vector<core::PeerMember> members = now.members;
  for (core::PeerMember& member : members) {
    if (member.node != options_.node_name) continue;
    member.block.round = round;
    member.block.tests = last_tests_;
  }
  const core::PeerJudgement judgement =
      core::JudgeSelf(options_.node_name, last_nodes_, members, round, last_tested_);
  const std::lock_guard lock(mutex_);
  // A node nobody tested keeps the verdict of the last round that did.
  if (judgement.standing == core::kPeerUntested && block_.standing != core::kPeerUntested) return;
  if (SameVerdict(block_, judgement)) return;
  block_.standing = judgement.standing;
  block_.judged_round = round;
  // The verdict's own round's tests go with it: what was tested, with whom, on which ports and
  // tiers, and how long it took, passed or not.
  block_.round = round;
  block_.tests = last_tests_;
  block_.failed_with = judgement.failed_with;
  block_.failed_tier = judgement.failed_tier;
  block_.failed_detail = judgement.failed_detail;
  block_.message = judgement.message;
  dirty_ = true;
  if (options_.on_standing) options_.on_standing(block_.standing);
  log::Info("peer checks: standing changed",
            {{"round", round}, {"standing", judgement.standing}, {"message", judgement.message}});
}

void PeerRunner::RunRound(std::uint64_t round, const kube::StopToken& stop,
                          std::chrono::milliseconds second_phase_after) {
  const auto started = std::chrono::steady_clock::now();
  Group group;
  try {
    group = ReadGroup();
  } catch (const std::exception& e) {
    log::Warn("peer checks: reading the group failed (round skipped)",
              {{"round", round}, {"error", e.what()}});
    return;
  }
  if (last_round_ && *last_round_ + 1 == round) Judge(*last_round_, group);
  PublishIfDirty();

  // First pass: the ring.
  std::vector<core::PeerTestResult> tests;
  bool ran = false;
  std::uint64_t reached = ServeWhile(round, stop, [&] {
    if (stop.WaitFor(options_.skew)) return;
    for (const core::PeerPair& pair : core::RingPass(group.nodes, round)) {
      if (pair.client != options_.node_name) continue;
      for (const core::PeerMember& member : group.members) {
        if (member.node != pair.server) continue;
        for (core::PeerTestResult& r : Test(member, core::kPeerPassRing, round)) {
          tests.push_back(std::move(r));
        }
        ran = true;
      }
    }
  });
  const auto any_failed = [&] {
    return std::any_of(tests.begin(), tests.end(),
                       [](const core::PeerTestResult& t) { return !t.passed; });
  };
  const auto publish_tests = [&] {
    {
      const std::lock_guard lock(mutex_);
      block_.round = round;
      block_.tests = tests;
      dirty_ = true;
    }
    PublishIfDirty();
  };
  if (any_failed()) publish_tests();

  // Second pass, where the first found a failure: read what the others published.
  const auto elapsed = std::chrono::steady_clock::now() - started;
  if (elapsed < second_phase_after && stop.WaitFor(second_phase_after - elapsed)) return;
  Group second;
  try {
    second = ReadGroup();
  } catch (const std::exception& e) {
    log::Warn("peer checks: reading the group failed (second pass skipped)",
              {{"round", round}, {"error", e.what()}});
  }
  // The plan is the first read's group; the blocks are the second read's.
  std::vector<core::PeerMember> members = second.members;
  for (core::PeerMember& member : members) {
    if (member.node == options_.node_name) {
      member.block.round = round;
      member.block.tests = tests;
    }
  }
  const auto first = core::FirstPassOf(group.nodes, members, round);
  const auto pairs = core::CulpritPass(group.nodes, first, round);
  if (!pairs.empty()) {
    reached += ServeWhile(round, stop, [&] {
      if (stop.WaitFor(options_.skew)) return;
      for (const core::PeerPair& pair : pairs) {
        if (pair.client != options_.node_name) continue;
        for (const core::PeerMember& member : group.members) {
          if (member.node != pair.server) continue;
          for (core::PeerTestResult& r : Test(member, core::kPeerPassCulprit, round)) {
            tests.push_back(std::move(r));
          }
          ran = true;
        }
      }
    });
    if (any_failed()) publish_tests();
  }
  last_round_ = round;
  last_nodes_ = group.nodes;
  last_tested_ = ran || reached > 0;
  last_tests_ = tests;
  if (options_.on_round) {
    const std::lock_guard lock(mutex_);
    options_.on_round(
        std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count(),
        options_.clock(), block_.standing);
  }
}

void PeerRunner::Run(const kube::StopToken& stop) {
  const auto period = options_.period;
  if (options_.on_standing) options_.on_standing(block().standing);
  try {
    ReadGroup();  // the only node of its type is Alone before its first round
  } catch (const std::exception& e) {
    log::Warn("peer checks: reading the group failed", {{"error", e.what()}});
  }
  while (!stop.stopped()) {
    PublishIfDirty();
    const auto since_epoch =
        std::chrono::duration_cast<std::chrono::milliseconds>(options_.clock().time_since_epoch());
    const std::uint64_t next = static_cast<std::uint64_t>(since_epoch / period) + 1;
    const auto wait = std::chrono::milliseconds(next * period.count()) - since_epoch;
    if (stop.WaitFor(wait)) return;
    RunRound(next, stop, period / 2);
  }
}

}  // namespace ncclguard::probes
