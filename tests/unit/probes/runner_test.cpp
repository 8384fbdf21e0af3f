// The runner: every catalog check registered once, results in contract order with guide links,
// and a check that hangs or throws becomes a Fail instead of hanging or crashing the probe.
#include <gtest/gtest.h>

#include <condition_variable>
#include <mutex>
#include <thread>

#include "core/catalog.h"
#include "probes/runner.h"
#include "tests/unit/probes/probe_test_support.h"

namespace ncclguard::test {
namespace {

using probes::CheckStatus;

TEST(CheckRegistry, HasEveryNodeCheckOfTheContractInOrder) {
  const auto checks = probes::CheckRegistry::All();
  const auto catalog = core::Catalog::Of(core::FindingKind::Check);
  ASSERT_EQ(checks.size(), catalog.size());
  for (std::size_t i = 0; i < checks.size(); ++i) EXPECT_EQ(checks[i]->Id(), catalog[i].id);
}

// Never answers: stands for a driver call that hangs.
class HangingCheck : public probes::Check {
 public:
  HangingCheck() : Check({"gpu-p2p", "gpu-p2p", core::FindingLevel::Fail, 0, "hangs", "none"}) {}
  probes::CheckResult Run(probes::ProbeContext&) const override {
    std::mutex mutex;
    std::condition_variable never;
    std::unique_lock lock(mutex);
    never.wait(lock, [] { return false; });
    return {};
  }
};

class ThrowingCheck : public probes::Check {
 public:
  ThrowingCheck()
      : Check({"gpu-ecc", "node-hardware", core::FindingLevel::Fail, 0, "throws", "none"}) {}
  probes::CheckResult Run(probes::ProbeContext&) const override {
    throw std::runtime_error("NVML returned garbage");
  }
};

// Answers Pass after `kSleep`: a check whose duration the runner must measure.
class SlowCheck : public probes::Check {
 public:
  static constexpr std::chrono::milliseconds kSleep{60};
  SlowCheck()
      : Check({"memlock-limit", "memlock", core::FindingLevel::Fail, 0, "sleeps", "none"}) {}
  probes::CheckResult Run(probes::ProbeContext&) const override {
    std::this_thread::sleep_for(kSleep);
    return probes::Result(CheckStatus::Pass, "", "", "");
  }
};

std::shared_ptr<probes::ProbeContext> ShortTimeoutContext() {
  probes::ProbeOptions options;
  options.host_root = "/nonexistent";
  options.check_timeout = std::chrono::milliseconds(200);
  options.policy.guide_base_url = "https://example.test/guide";
  return std::make_shared<probes::ProbeContext>(options, std::make_shared<FakeFactSources>());
}

TEST(Runner, HangingCheckIsReportedAsFailWhileTheOthersAnswer) {
  static const HangingCheck hanging;  // the abandoned thread keeps using it
  const auto run = probes::RunChecks({&hanging, probes::CheckRegistry::Find("removeipc")},
                                     ShortTimeoutContext());
  ASSERT_EQ(run.results.size(), 2u);
  EXPECT_TRUE(run.timed_out);
  EXPECT_EQ(run.results[0].id, "gpu-p2p");
  EXPECT_EQ(run.results[0].status, CheckStatus::Fail);
  EXPECT_EQ(run.results[0].message,
            "check did not finish within 200 ms (a hung driver call or file read)");
  EXPECT_EQ(run.results[0].guide, "https://example.test/guide#gpu-p2p");
  EXPECT_EQ(run.results[1].id, "removeipc");
  EXPECT_EQ(run.results[1].status, CheckStatus::Skip);
}

TEST(Runner, ThrowingCheckIsReportedAsFail) {
  static const ThrowingCheck throwing;
  const auto run = probes::RunChecks({&throwing}, ShortTimeoutContext());
  ASSERT_EQ(run.results.size(), 1u);
  EXPECT_FALSE(run.timed_out);
  EXPECT_EQ(run.results[0].status, CheckStatus::Fail);
  EXPECT_EQ(run.results[0].message, "check failed: NVML returned garbage");
  EXPECT_EQ(run.results[0].guide, "https://example.test/guide#node-hardware");
}

TEST(Runner, MeasuresHowLongEachCheckTook) {
  static const SlowCheck slow;
  static const HangingCheck hanging;
  const auto run = probes::RunChecks({&slow, &hanging}, ShortTimeoutContext());
  ASSERT_EQ(run.results.size(), 2u);
  EXPECT_GE(run.results[0].duration, SlowCheck::kSleep);
  EXPECT_LT(run.results[0].duration, std::chrono::milliseconds(200)) << "the timeout is 200 ms";
  // Past its timeout: the time it was given.
  EXPECT_GE(run.results[1].duration, std::chrono::milliseconds(200));
  EXPECT_LT(run.results[1].duration, std::chrono::seconds(5));
}

TEST(Summary, FailBeatsWarnBeatsPassAndSkipsDoNotCount) {
  auto with = [](std::initializer_list<CheckStatus> statuses) {
    std::vector<probes::CheckResult> results;
    for (CheckStatus status : statuses) results.push_back(probes::Result(status, "", "", ""));
    return probes::Summarize(results);
  };
  EXPECT_EQ(with({CheckStatus::Pass, CheckStatus::Skip}), CheckStatus::Pass);
  EXPECT_EQ(with({CheckStatus::Skip}), CheckStatus::Pass);
  EXPECT_EQ(with({CheckStatus::Warn, CheckStatus::Pass}), CheckStatus::Warn);
  EXPECT_EQ(with({CheckStatus::Warn, CheckStatus::Fail, CheckStatus::Pass}), CheckStatus::Fail);
}

}  // namespace
}  // namespace ncclguard::test
