// The probe's RAS rounds (probes/ras_watch.h) with the cluster and the RAS servers faked: which
// pods are queried and where, what status.ras says, that a stuck collective needs two reports,
// and that a steady state writes nothing. The RAS protocol itself: ras_client_test.cpp.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "probes/ras_watch.h"
#include "tests/common/ras_render.h"

namespace ncclguard::test {
namespace {

namespace fs = std::filesystem;
using core::Json;
using probes::RasAnswer;
using probes::RasAnswerStatus;
using probes::RasQuery;

const auto kRasNow = std::chrono::system_clock::from_time_t(1'796'644'800);  // 2026-12-07T12:00:00Z

class FakeDirectory : public probes::RasDirectory {
 public:
  std::vector<Json> pods;
  std::vector<Json> published;
  std::vector<Json> ReaderPods() override { return pods; }
  void Publish(const Json& ras) override { published.push_back(ras); }
};

Json Pod(const std::string& name, const std::string& started = "2026-12-07T11:00:00Z",
         Json env = Json::array()) {
  return Json{{"metadata", {{"namespace", "team-a"}, {"name", name}, {"uid", "uid-" + name}}},
              {"spec", {{"containers", {{{"name", "c"}, {"env", std::move(env)}}}}}},
              {"status",
               {{"phase", "Running"},
                {"containerStatuses", {{{"state", {{"running", {{"startedAt", started}}}}}}}}}}};
}

ras_fake::RasScenario Job(long long behind_count, bool dead = false) {
  ras_fake::RasScenario s;
  s.version = "2.26";
  ras_fake::RasCommSpec comm;
  comm.hash = 0x27a079b828ff1a75ULL;
  for (int r = 0; r < 4; ++r) {
    ras_fake::RasRankSpec rank;
    rank.rank = r;
    rank.gpu = r;
    rank.pid = 100 + r;
    rank.node = "10.1.0." + std::to_string(r < 2 ? 6 : 7);
    rank.counts[4] = r == 3 ? behind_count : 500;
    rank.dead = dead && r == 3;
    comm.ranks.push_back(rank);
  }
  s.comms.push_back(comm);
  return s;
}

class RasWatch : public ::testing::Test {
 protected:
  void SetUp() override {
    proc_ = fs::temp_directory_path() /
            ("ncclguard-ras-watch-" + std::to_string(::getpid()) + "-" +
             ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(proc_);
    directory_ = std::make_shared<FakeDirectory>();
  }
  void TearDown() override { fs::remove_all(proc_); }
  // A process of the pod under the fake /proc: its cgroup names the pod's UID.
  void AddProcess(int pid, const std::string& pod, bool systemd = false) {
    fs::create_directories(proc_ / std::to_string(pid) / "ns");
    std::string uid = "uid-" + pod;
    if (systemd) std::replace(uid.begin(), uid.end(), '-', '_');
    std::ofstream(proc_ / std::to_string(pid) / "cgroup")
        << "12:memory:/kubepods/besteffort/pod" << uid << "/0123abcd\n";
  }
  probes::RasWatcher Watcher(std::size_t round_bytes = 64 << 20) {
    probes::RasWatchOptions options;
    options.round_bytes = round_bytes;
    options.proc_root = proc_.string();
    options.clock = [this] { return now_; };
    return probes::RasWatcher(
        options, directory_,
        [this](const std::vector<RasQuery>& queries, std::chrono::milliseconds deadline,
               std::size_t max_report_bytes) {
          max_report_bytes_.push_back(max_report_bytes);
          asked_.push_back(queries);
          EXPECT_EQ(deadline, std::chrono::milliseconds(10'000));
          std::vector<RasAnswer> answers;
          for (std::size_t i = 0; i < queries.size(); ++i) {
            answers.push_back(next_.size() > i ? next_[i] : RasAnswer{});
          }
          return answers;
        });
  }
  static RasAnswer Answer(const std::string& report) {
    RasAnswer a;
    a.status = RasAnswerStatus::Answered;
    a.report = report;
    return a;
  }

  fs::path proc_;
  std::shared_ptr<FakeDirectory> directory_;
  std::vector<std::vector<RasQuery>> asked_;
  std::vector<std::size_t> max_report_bytes_;
  std::vector<RasAnswer> next_;
  std::chrono::system_clock::time_point now_ = kRasNow;
};

TEST_F(RasWatch, QueriesEachReaderPodInItsOwnNetworkNamespaceAndPublishesOnChange) {
  directory_->pods = {Pod("a-0"), Pod("b-0", "2026-12-07T11:00:00Z",
                                      {{{"name", "NCCL_RAS_ADDR"}, {"value", "localhost:29028"}}})};
  AddProcess(4242, "a-0");
  AddProcess(4343, "b-0", true);  // systemd's cgroup driver spells the UID with underscores
  next_ = {Answer(ras_fake::RenderRasText(Job(500))), Answer(ras_fake::RenderRasText(Job(500)))};
  auto watcher = Watcher();
  const auto standings = watcher.Round();
  ASSERT_EQ(asked_.size(), 1u);
  ASSERT_EQ(asked_[0].size(), 2u);
  EXPECT_EQ(asked_[0][0].netns, (proc_ / "4242" / "ns" / "net").string());
  EXPECT_EQ(asked_[0][0].port, 28028);
  EXPECT_EQ(asked_[0][1].netns, (proc_ / "4343" / "ns" / "net").string());
  EXPECT_EQ(asked_[0][1].port, 29028);
  EXPECT_EQ(asked_[0][0].server_timeout_s, 9);                // RAS's own wait ends before ours
  EXPECT_EQ(max_report_bytes_[0], core::kMaxRasReportBytes);  // 2 answers: each its full 4 MiB
  ASSERT_EQ(directory_->published.size(), 1u);
  const Json& first = directory_->published[0]["pods"][0];
  EXPECT_EQ(first["pod"], "a-0");
  EXPECT_EQ(first["answer"], "Answered");
  EXPECT_EQ(first["health"], "Healthy");
  EXPECT_EQ(first["ncclVersion"], "2.26.5");
  EXPECT_EQ(first["since"], "2026-12-07T12:00:00Z");
  // The same answers a minute later: nothing is written.
  now_ += std::chrono::minutes(1);
  watcher.Round();
  EXPECT_EQ(directory_->published.size(), 1u);
}

TEST_F(RasWatch, APodsProcessIsKeptAcrossRoundsAndLookedForAgainWhenItGoes) {
  directory_->pods = {Pod("a-0")};
  AddProcess(4242, "a-0");
  next_ = {Answer(ras_fake::RenderRasText(Job(500)))};
  auto watcher = Watcher();
  watcher.Round();
  ASSERT_EQ(asked_.back().size(), 1u);
  EXPECT_EQ(asked_.back()[0].netns, (proc_ / "4242" / "ns" / "net").string());
  EXPECT_FALSE(asked_.back()[0].json);  // text unless --ras-format json
  // Another process of the pod listed first now: the known one is still the pod's, kept.
  AddProcess(1000, "a-0");
  watcher.Round();
  EXPECT_EQ(asked_.back()[0].netns, (proc_ / "4242" / "ns" / "net").string());
  // It went (the container restarted): found again.
  fs::remove_all(proc_ / "4242");
  watcher.Round();
  EXPECT_EQ(asked_.back()[0].netns, (proc_ / "1000" / "ns" / "net").string());
}

TEST_F(RasWatch, ARoundsAnswersShareItsBudget) {
  directory_->pods = {Pod("a-0"), Pod("b-0"), Pod("c-0")};
  AddProcess(1, "a-0");
  AddProcess(2, "b-0");
  AddProcess(3, "c-0");
  auto watcher = Watcher(3 << 20);
  watcher.Round();
  EXPECT_EQ(max_report_bytes_.back(), std::size_t{1} << 20);  // 3 MiB over 3 answers
  auto small = Watcher(100 << 10);
  small.Round();
  EXPECT_EQ(max_report_bytes_.back(), std::size_t{64} << 10);  // never under 64 KiB
}

TEST_F(RasWatch, AStuckCollectiveTakesTwoReportsAndAMovingOneIsAStraggler) {
  directory_->pods = {Pod("a-0")};
  AddProcess(10, "a-0");
  auto watcher = Watcher();
  next_ = {Answer(ras_fake::RenderRasText(Job(480)))};
  watcher.Round();
  EXPECT_EQ(directory_->published.back()["pods"][0]["health"], "Healthy");
  next_ = {Answer(ras_fake::RenderRasText(Job(490)))};  // rank 3 moved: a straggler
  watcher.Round();
  EXPECT_EQ(directory_->published.back()["pods"][0]["health"], "Healthy");
  EXPECT_EQ(directory_->published.back()["pods"][0]["straggler"], true);
  next_ = {Answer(ras_fake::RenderRasText(Job(490)))};  // it did not: stuck
  now_ += std::chrono::minutes(2);
  watcher.Round();
  const Json& stuck = directory_->published.back()["pods"][0];
  EXPECT_EQ(stuck["health"], "CollectiveStuck");
  ASSERT_TRUE(stuck.contains("ranks"));
  EXPECT_EQ(stuck["ranks"][0]["rank"], 3);
  EXPECT_EQ(stuck["ranks"][0]["address"], "10.1.0.7");
  EXPECT_EQ(stuck["since"], "2026-12-07T12:02:00Z");
  next_ = {Answer(ras_fake::RenderRasText(Job(490, true)))};
  watcher.Round();
  EXPECT_EQ(directory_->published.back()["pods"][0]["health"], "ProcessDead");
}

TEST_F(RasWatch, YoungDisabledProcesslessAndSilentPodsSayWhy) {
  directory_->pods = {
      Pod("young", "2026-12-07T11:59:30Z"),
      Pod("off", "2026-12-07T11:00:00Z", {{{"name", "NCCL_RAS_ENABLE"}, {"value", "0"}}}),
      Pod("gone"), Pod("silent")};
  AddProcess(1, "young");
  AddProcess(2, "off");
  AddProcess(3, "silent");
  RasAnswer timeout;
  timeout.status = RasAnswerStatus::TimedOut;
  timeout.error = "no answer to CLIENT PROTOCOL 2 from 127.0.0.1:28028 within 10000 ms";
  next_ = {timeout};
  auto watcher = Watcher();
  watcher.Round();
  ASSERT_EQ(asked_.size(), 1u);
  ASSERT_EQ(asked_[0].size(), 1u);  // only "silent" is queried
  std::map<std::string, std::string> answers;
  for (const Json& entry : directory_->published.back()["pods"]) {
    answers[entry["pod"]] = entry["answer"];
  }
  EXPECT_EQ(answers["young"], "Waiting");
  EXPECT_EQ(answers["off"], "Disabled");
  EXPECT_EQ(answers["gone"], "NoProcess");
  EXPECT_EQ(answers["silent"], "TimedOut");
}

TEST_F(RasWatch, ANewEnoughNcclIsReadBeforeTheGraceIsOver) {
  EXPECT_TRUE(probes::RasQuerySafeDuringInit("2.27.3"));
  EXPECT_TRUE(probes::RasQuerySafeDuringInit("2.30.4"));
  EXPECT_FALSE(probes::RasQuerySafeDuringInit("2.27.2"));
  EXPECT_FALSE(probes::RasQuerySafeDuringInit("2.26.5"));
  EXPECT_FALSE(probes::RasQuerySafeDuringInit(""));
  EXPECT_FALSE(probes::RasQuerySafeDuringInit("garbage"));
}

TEST(RasEndpoint, ReadsNcclRasAddrAndEnable) {
  const auto of = [](Json env) {
    return probes::RasEndpointOf(Json{{"spec", {{"containers", {{{"env", std::move(env)}}}}}}});
  };
  EXPECT_EQ(of(Json::array()).port, 28028);
  EXPECT_EQ(of({{{"name", "NCCL_RAS_ADDR"}, {"value", "127.0.0.2:30000"}}}).host, "127.0.0.2");
  EXPECT_EQ(of({{{"name", "NCCL_RAS_ADDR"}, {"value", "[::1]:30001"}}}).host, "::1");
  EXPECT_EQ(of({{{"name", "NCCL_RAS_ADDR"}, {"value", "localhost:99999"}}}).port, 28028);
  EXPECT_TRUE(of({{{"name", "NCCL_RAS_ENABLE"}, {"value", "0"}}}).disabled);
}

}  // namespace
}  // namespace ncclguard::test
