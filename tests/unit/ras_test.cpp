// The RAS reader and verdict (core/ras.h) over reports that tests/common/ras_render.h renders as
// NCCL 2.24, 2.26 and 2.28 print them (text) and as 2.28.7+ and 2.29 print them (JSON): each
// state, the ranks named exactly, streams of several reports among other lines, and hostile
// input in bounded time and memory (resource_bound.h).
#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "core/json.h"
#include "core/ras.h"
#include "ras_render.h"
#include "tests/unit/resource_bound.h"

namespace ncclguard::test {
namespace {

using core::RasFormat;
using core::RasHealth;
using core::RasProcess;
using core::RasReport;
using ncclguard::ras_fake::RasRankSpec;
using ncclguard::ras_fake::RasScenario;
using ncclguard::ras_fake::RenderRasJson;
using ncclguard::ras_fake::RenderRasText;

constexpr std::uint64_t kHash = 0x27a079b828ff1a75;
constexpr const char* kCommunicator = "27a079b828ff1a75";  // as RasProcess::communicator
constexpr std::size_t kAllReduce = 4;
constexpr int kCpuSeconds = 20;  // each bounded run takes well under a second at linear cost
constexpr std::size_t kMiB = std::size_t{1} << 20;

// A report as one of NCCL's releases prints it.
struct Form {
  std::string version;
  bool json = false;
  std::string Name() const { return version + (json ? " json" : " text"); }
};

const std::vector<Form>& AllForms() {
  static const std::vector<Form> forms = {
      {"2.24", false}, {"2.26", false}, {"2.28", false}, {"2.28", true}, {"2.29", true}};
  return forms;
}

long PidOf(int rank) { return 483072 + (rank / 8) * 1000 + rank % 8; }
std::string NodeOf(int rank) { return "172.16.64." + std::to_string(210 + rank / 8); }

// 4 nodes of 8 processes, one GPU each, in one communicator at AllReduce 6650: the job of NCCL's
// RAS guide.
RasScenario Job(const std::string& version, int ranks = 32) {
  RasScenario scenario;
  scenario.version = version;
  scenario.comms.push_back({});
  scenario.comms[0].hash = kHash;
  for (int rank = 0; rank < ranks; ++rank) {
    RasRankSpec spec;
    spec.rank = rank;
    spec.gpu = rank % 8;
    spec.pid = PidOf(rank);
    spec.node = NodeOf(rank);
    spec.counts[kAllReduce] = 6650;
    scenario.comms[0].ranks.push_back(spec);
  }
  return scenario;
}

RasRankSpec& RankOf(RasScenario& scenario, int rank) {
  return scenario.comms[0].ranks[static_cast<std::size_t>(rank)];
}

// Ranks 0, 2, 3, 4, 5 and 7 one AllReduce behind the other 26 (the guide's straggler).
const std::vector<int> kBehind = {0, 2, 3, 4, 5, 7};
RasScenario Behind(const std::string& version, long long ahead) {
  RasScenario scenario = Job(version);
  for (RasRankSpec& rank : scenario.comms[0].ranks) rank.counts[kAllReduce] = ahead;
  for (const int rank : kBehind) RankOf(scenario, rank).counts[kAllReduce] = ahead - 1;
  return scenario;
}

std::string Render(const RasScenario& scenario, const Form& form) {
  return form.json ? RenderRasJson(scenario) : RenderRasText(scenario);
}

RasReport ReadOne(const std::string& bytes) {
  std::vector<RasReport> reports = core::ReadRasReports(bytes);
  EXPECT_EQ(reports.size(), 1u) << bytes;
  return reports.empty() ? RasReport{} : reports.front();
}

bool Names(const std::vector<RasProcess>& list, std::optional<int> rank, const std::string& gpu,
           long pid, const std::string& node) {
  return std::any_of(list.begin(), list.end(), [&](const RasProcess& p) {
    return (!rank || p.rank == rank) && p.gpu == gpu && p.pid == pid && p.node == node;
  });
}

std::string Describe(const std::vector<RasProcess>& list) {
  std::string out;
  for (const RasProcess& p : list) {
    out += "{rank " + (p.rank ? std::to_string(*p.rank) : std::string("-")) + ", gpu \"" + p.gpu +
           "\", pid " + std::to_string(p.pid) + ", node \"" + p.node + "\", communicator \"" +
           p.communicator + "\", detail \"" + p.detail + "\"} ";
  }
  return out;
}

std::set<int> RanksOf(const std::vector<RasProcess>& list) {
  std::set<int> ranks;
  for (const RasProcess& p : list) {
    if (p.rank) ranks.insert(*p.rank);
  }
  return ranks;
}

TEST(RasHealthNames, AreTheConditionReasons) {
  const std::vector<std::pair<RasHealth, std::string>> names = {
      {RasHealth::Healthy, "Healthy"},
      {RasHealth::ProcessDead, "ProcessDead"},
      {RasHealth::RankError, "RankError"},
      {RasHealth::CollectiveStuck, "CollectiveStuck"},
      {RasHealth::RankUnresponsive, "RankUnresponsive"}};
  for (const auto& [health, name] : names) {
    EXPECT_EQ(core::RasHealthName(health), name);
    EXPECT_EQ(core::RasHealthFromName(name), health);
  }
  EXPECT_EQ(core::RasHealthFromName("healthy"), std::nullopt);
  EXPECT_EQ(core::RasHealthFromName(""), std::nullopt);
}

TEST(RasReports, AHealthyJobIsHealthyInEveryForm) {
  for (const Form& form : AllForms()) {
    SCOPED_TRACE(form.Name());
    const RasReport report = ReadOne(Render(Job(form.version), form));
    EXPECT_EQ(report.format, form.json ? RasFormat::JSON : RasFormat::Text);
    EXPECT_TRUE(report.empty());
    EXPECT_FALSE(report.truncated);
    EXPECT_EQ(report.timeouts, 0);
    const std::string expected_version = form.version == "2.24"   ? "2.24.3"
                                         : form.version == "2.26" ? "2.26.5"
                                         : form.version == "2.28" ? "2.28.9"
                                                                  : "2.29.3";
    EXPECT_EQ(report.nccl_version, expected_version);
    if (!form.json) {
      EXPECT_EQ(report.nodes, 4);
      EXPECT_EQ(report.processes, 32);
      EXPECT_EQ(report.gpus, 32);
    }
    const core::RasVerdict verdict = core::JudgeRas(report, nullptr);
    EXPECT_EQ(verdict.health, RasHealth::Healthy);
    EXPECT_FALSE(verdict.straggler);
    EXPECT_TRUE(verdict.ranks.empty());
  }
}

TEST(RasReports, ADeadProcessIsProcessDeadNamingItsPidNodeAndGpu) {
  for (const Form& form : AllForms()) {
    SCOPED_TRACE(form.Name());
    RasScenario scenario = Job(form.version);
    RankOf(scenario, 21).dead = true;
    const RasReport report = ReadOne(Render(scenario, form));
    ASSERT_FALSE(report.dead.empty());
    // Text names the process (DEAD: "Process 485077 on node 172.16.64.212 managing GPU 5"),
    // JSON its rank (a missing rank "considered_dead": true).
    EXPECT_TRUE(Names(report.dead, form.json ? std::optional<int>(21) : std::nullopt, "5",
                      PidOf(21), NodeOf(21)))
        << Describe(report.dead);
    EXPECT_TRUE(report.errors.empty()) << Describe(report.errors);
    EXPECT_TRUE(report.mismatches.empty());
    const core::RasVerdict verdict = core::JudgeRas(report, nullptr);
    EXPECT_EQ(verdict.health, RasHealth::ProcessDead);
    ASSERT_FALSE(verdict.ranks.empty());
    EXPECT_EQ(verdict.ranks.front().pid, PidOf(21));
    EXPECT_EQ(verdict.ranks.front().node, NodeOf(21));
    EXPECT_NE(verdict.summary.find(NodeOf(21)), std::string::npos) << verdict.summary;
  }
}

TEST(RasReports, AMissingProcessIsRankUnresponsiveNamingItsRank) {
  for (const Form& form : AllForms()) {
    SCOPED_TRACE(form.Name());
    RasScenario scenario = Job(form.version);
    RankOf(scenario, 21).missing = true;
    scenario.timeouts = 2;
    const RasReport report = ReadOne(Render(scenario, form));
    EXPECT_TRUE(report.dead.empty()) << Describe(report.dead);
    EXPECT_TRUE(report.errors.empty()) << Describe(report.errors);
    EXPECT_EQ(report.timeouts, 2);
    ASSERT_FALSE(report.unresponsive.empty());
    // Text: the job's INCOMPLETE process line; JSON: the missing rank.
    EXPECT_TRUE(Names(report.unresponsive, form.json ? std::optional<int>(21) : std::nullopt, "5",
                      PidOf(21), NodeOf(21)))
        << Describe(report.unresponsive);
    if (form.version != "2.24" && !form.json) {
      // 2.26 and later name the communicator's missing rank: "Rank 21 -- GPU 5 managed by ...".
      EXPECT_TRUE(Names(report.unresponsive, 21, "5", PidOf(21), NodeOf(21)))
          << Describe(report.unresponsive);
    }
    // 2.24 names the rank alone ("The missing rank: 21").
    EXPECT_TRUE(RanksOf(report.unresponsive).count(21) == 1) << Describe(report.unresponsive);
    const core::RasVerdict verdict = core::JudgeRas(report, nullptr);
    EXPECT_EQ(verdict.health, RasHealth::RankUnresponsive);
    ASSERT_FALSE(verdict.ranks.empty());
    EXPECT_TRUE(Names(verdict.ranks, std::nullopt, "5", PidOf(21), NodeOf(21)))
        << Describe(verdict.ranks);
  }
}

TEST(RasReports, AnAsyncErrorIsRankErrorNamingTheRank) {
  for (const Form& form : AllForms()) {
    SCOPED_TRACE(form.Name());
    RasScenario scenario = Job(form.version);
    RankOf(scenario, 13).async_error = 2;  // ncclSystemError
    const RasReport report = ReadOne(Render(scenario, form));
    ASSERT_EQ(report.errors.size(), 1u) << Describe(report.errors);
    EXPECT_EQ(report.errors[0].rank, 13);
    EXPECT_EQ(report.errors[0].gpu, "5");
    EXPECT_EQ(report.errors[0].pid, PidOf(13));
    EXPECT_EQ(report.errors[0].node, NodeOf(13));
    EXPECT_TRUE(report.dead.empty());
    EXPECT_TRUE(report.unresponsive.empty());
    const core::RasVerdict verdict = core::JudgeRas(report, nullptr);
    EXPECT_EQ(verdict.health, RasHealth::RankError);
    ASSERT_FALSE(verdict.ranks.empty());
    EXPECT_EQ(verdict.ranks.front().rank, 13);
    EXPECT_EQ(verdict.ranks.front().pid, PidOf(13));
  }
}

TEST(RasReports, AnInitErrorIsRankError) {
  for (const Form& form : AllForms()) {
    SCOPED_TRACE(form.Name());
    RasScenario scenario = Job(form.version);
    RankOf(scenario, 9).init_state = 3;   // ncclInternalError
    RankOf(scenario, 10).init_state = 7;  // ncclInProgress: still initializing, not an error
    const RasReport report = ReadOne(Render(scenario, form));
    EXPECT_EQ(RanksOf(report.errors), std::set<int>{9}) << Describe(report.errors);
    EXPECT_TRUE(Names(report.errors, 9, "1", PidOf(9), NodeOf(9))) << Describe(report.errors);
    EXPECT_EQ(core::JudgeRas(report, nullptr).health, RasHealth::RankError);
  }
}

TEST(RasReports, AMismatchNamesTheRanksBehindAndItsGroups) {
  for (const Form& form : AllForms()) {
    SCOPED_TRACE(form.Name());
    const RasReport report = ReadOne(Render(Behind(form.version, 6650), form));
    EXPECT_TRUE(report.dead.empty());
    EXPECT_TRUE(report.errors.empty());
    EXPECT_TRUE(report.unresponsive.empty());
    ASSERT_EQ(report.mismatches.size(), 1u);
    const core::RasMismatch& mismatch = report.mismatches[0];
    EXPECT_EQ(RanksOf(mismatch.behind), std::set<int>(kBehind.begin(), kBehind.end()))
        << Describe(mismatch.behind);
    EXPECT_TRUE(Names(mismatch.behind, 5, "5", PidOf(5), NodeOf(5))) << Describe(mismatch.behind);
    EXPECT_EQ(mismatch.communicator, kCommunicator);
    for (const RasProcess& rank : mismatch.behind) EXPECT_EQ(rank.communicator, kCommunicator);
    // 2.24 counts all collectives together; 2.26 names the collective.
    EXPECT_EQ(mismatch.collective, form.version == "2.24" && !form.json ? "" : "AllReduce");
    const std::vector<std::pair<std::int64_t, std::int64_t>> groups = {{26, 6650}, {6, 6649}};
    EXPECT_EQ(mismatch.groups, groups);
  }
}

TEST(RasReports, AMismatchThatMovesIsAHealthyStraggler) {
  for (const Form& form : AllForms()) {
    SCOPED_TRACE(form.Name());
    const RasReport before = ReadOne(Render(Behind(form.version, 6650), form));
    const RasReport after = ReadOne(Render(Behind(form.version, 6720), form));
    const core::RasVerdict verdict = core::JudgeRas(after, &before);
    EXPECT_EQ(verdict.health, RasHealth::Healthy) << verdict.summary;
    EXPECT_TRUE(verdict.straggler);
    // A first report cannot tell a straggler from a stuck collective: nothing to compare with.
    EXPECT_NE(core::JudgeRas(after, nullptr).health, RasHealth::CollectiveStuck);
  }
}

TEST(RasReports, TheSameMismatchTwiceIsCollectiveStuckNamingTheRanksBehind) {
  for (const Form& form : AllForms()) {
    SCOPED_TRACE(form.Name());
    const RasReport first = ReadOne(Render(Behind(form.version, 6650), form));
    const RasReport second = ReadOne(Render(Behind(form.version, 6650), form));
    const core::RasVerdict verdict = core::JudgeRas(second, &first);
    EXPECT_EQ(verdict.health, RasHealth::CollectiveStuck);
    EXPECT_FALSE(verdict.straggler);
    ASSERT_FALSE(verdict.ranks.empty());
    EXPECT_LE(verdict.ranks.size(), core::kMaxRasVerdictRanks);
    for (const RasProcess& rank : verdict.ranks) {
      ASSERT_TRUE(rank.rank.has_value());
      EXPECT_TRUE(std::count(kBehind.begin(), kBehind.end(), *rank.rank) == 1)
          << Describe(verdict.ranks);
      EXPECT_EQ(rank.pid, PidOf(*rank.rank));
      EXPECT_EQ(rank.node, NodeOf(*rank.rank));
    }
  }
}

TEST(RasReports, ARankThatNeverLaunchedIsBehind) {
  // 2.26 and later: "Rank 3 has not launched any operations -- GPU 3 managed by ...".
  for (const Form& form : AllForms()) {
    SCOPED_TRACE(form.Name());
    RasScenario scenario = Job(form.version, 8);
    RankOf(scenario, 3).counts[kAllReduce] = 0;
    const RasReport report = ReadOne(Render(scenario, form));
    ASSERT_EQ(report.mismatches.size(), 1u);
    EXPECT_EQ(RanksOf(report.mismatches[0].behind), std::set<int>{3})
        << Describe(report.mismatches[0].behind);
  }
}

TEST(RasVerdicts, DeadComesBeforeErrorBeforeStuckBeforeUnresponsive) {
  for (const Form& form : AllForms()) {
    SCOPED_TRACE(form.Name());
    RasScenario scenario = Behind(form.version, 6650);
    RankOf(scenario, 30).dead = true;
    RankOf(scenario, 20).async_error = 6;  // ncclRemoteError
    RankOf(scenario, 12).missing = true;
    const std::vector<RasHealth> expected = {RasHealth::ProcessDead, RasHealth::RankError,
                                             RasHealth::CollectiveStuck,
                                             RasHealth::RankUnresponsive, RasHealth::Healthy};
    for (const RasHealth health : expected) {
      SCOPED_TRACE(std::string(core::RasHealthName(health)));
      const RasReport first = ReadOne(Render(scenario, form));
      const RasReport second = ReadOne(Render(scenario, form));
      EXPECT_EQ(core::JudgeRas(second, &first).health, health);
      // Take the worst away.
      if (health == RasHealth::ProcessDead) RankOf(scenario, 30).dead = false;
      if (health == RasHealth::RankError) RankOf(scenario, 20).async_error = 0;
      if (health == RasHealth::CollectiveStuck) {
        for (const int rank : kBehind) RankOf(scenario, rank).counts[kAllReduce] = 6650;
      }
      if (health == RasHealth::RankUnresponsive) RankOf(scenario, 12).missing = false;
    }
  }
}

TEST(RasReports, StatusWithoutVerboseStillCountsWhatItDoesNotName) {
  // Plain STATUS lists at most 10 processes and only groups of at most 25%: 12 missing
  // processes are counted, not named; the verdict is still RankUnresponsive.
  for (const Form& form : AllForms()) {
    if (form.json) continue;
    SCOPED_TRACE(form.Name());
    RasScenario scenario = Job(form.version);
    scenario.verbose = false;
    for (int rank = 8; rank < 20; ++rank) RankOf(scenario, rank).missing = true;
    const RasReport report = ReadOne(Render(scenario, form));
    EXPECT_EQ(core::JudgeRas(report, nullptr).health, RasHealth::RankUnresponsive);
  }
}

std::string Noise() {
  return "bash-5.1# echo verbose status | nc localhost 28028\n"
         "+ kubectl exec -it train-0 -- ncclras -v\n";
}

TEST(RasStreams, ReadsSeveralReportsAmongOtherLines) {
  const std::string stream = Noise() + RenderRasText(Job("2.26")) + Noise() + "OK\n" +
                             RenderRasJson(Behind("2.29", 10)) + "\n" + Noise() +
                             RenderRasText(Behind("2.24", 10)) + "OK\n" +
                             RenderRasJson(Job("2.28")) + Noise();
  const std::vector<RasReport> reports = core::ReadRasReports(stream);
  ASSERT_EQ(reports.size(), 4u);
  EXPECT_EQ(reports[0].format, RasFormat::Text);
  EXPECT_EQ(reports[0].nccl_version, "2.26.5");
  EXPECT_TRUE(reports[0].empty());
  EXPECT_EQ(reports[1].format, RasFormat::JSON);
  EXPECT_EQ(reports[1].mismatches.size(), 1u);
  EXPECT_EQ(reports[2].format, RasFormat::Text);
  EXPECT_EQ(reports[2].nccl_version, "2.24.3");
  EXPECT_EQ(reports[2].mismatches.size(), 1u);
  EXPECT_EQ(reports[3].format, RasFormat::JSON);
  EXPECT_TRUE(reports[3].empty());
  for (const RasReport& report : reports) EXPECT_FALSE(report.truncated);
}

TEST(RasStreams, TheReaderSaysWhereEachReportStarted) {
  const std::string first = RenderRasText(Job("2.28", 8));
  const auto first_lines = static_cast<std::uint64_t>(std::count(first.begin(), first.end(), '\n'));
  core::RasReader reader;
  reader.Feed("$ ncclras -v");
  std::string line;
  for (const char c : first + "OK\n" + RenderRasJson(Job("2.28", 8))) {
    if (c == '\n') {
      reader.Feed(line);
      line.clear();
    } else {
      line += c;
    }
  }
  const std::vector<RasReport> reports = reader.Finish();
  ASSERT_EQ(reports.size(), 2u);
  const std::vector<std::uint64_t> starts = {2, 2 + first_lines + 1};
  EXPECT_EQ(reader.StartLines(), starts);
}

TEST(RasStreams, CrLfLinesReadAsLf) {
  std::string text = RenderRasText(Behind("2.26", 100));
  std::string crlf;
  for (const char c : text) crlf += c == '\n' ? std::string("\r\n") : std::string(1, c);
  const RasReport report = ReadOne(crlf);
  ASSERT_EQ(report.mismatches.size(), 1u);
  EXPECT_TRUE(Names(report.mismatches[0].behind, 5, "5", PidOf(5), NodeOf(5)))
      << Describe(report.mismatches[0].behind);
}

TEST(RasStreams, KeepsTheNewestReports) {
  std::string stream;
  for (int i = 0; i < 100; ++i) {
    RasScenario scenario = Job("2.28", 8);
    scenario.timeouts = i;
    stream += RenderRasText(scenario);
  }
  const std::vector<RasReport> reports = core::ReadRasReports(stream);
  ASSERT_EQ(reports.size(), core::kMaxRasReports);
  EXPECT_EQ(reports.front().timeouts, 100 - static_cast<int>(core::kMaxRasReports));
  EXPECT_EQ(reports.back().timeouts, 99);
}

TEST(RasHostile, AReportCutShortIsMarkedTruncated) {
  RasScenario scenario = Behind("2.26", 100);
  RankOf(scenario, 21).dead = true;
  const std::string text = RenderRasText(scenario);
  const std::string cut = text.substr(0, text.find("Warnings"));
  const std::vector<RasReport> reports = core::ReadRasReports(cut);
  ASSERT_EQ(reports.size(), 1u);
  EXPECT_TRUE(reports[0].truncated);
  EXPECT_TRUE(Names(reports[0].dead, std::nullopt, "5", PidOf(21), NodeOf(21)))
      << Describe(reports[0].dead);

  const std::string json = RenderRasJson(Behind("2.29", 100));
  const std::vector<RasReport> json_reports = core::ReadRasReports(json.substr(0, json.size() / 2));
  ASSERT_LE(json_reports.size(), 1u);
  if (!json_reports.empty()) {
    EXPECT_TRUE(json_reports[0].truncated);
  }
}

TEST(RasHostile, ThousandsOfRanksKeepTheListsBounded) {
  for (const Form& form : AllForms()) {
    SCOPED_TRACE(form.Name());
    RasScenario scenario = Job(form.version, 4096);
    for (int rank = 0; rank < 4096; rank += 4) RankOf(scenario, rank).missing = true;
    for (int rank = 1; rank < 4096; rank += 4) RankOf(scenario, rank).async_error = 2;
    for (int rank = 2; rank < 4096; rank += 4) RankOf(scenario, rank).counts[kAllReduce] = 6649;
    const std::string bytes = Render(scenario, form);
    const BoundedRun run = RunBounded(kCpuSeconds, 512 * kMiB, [&] {
      const RasReport report = ReadOne(bytes);
      std::size_t behind = 0;
      for (const core::RasMismatch& m : report.mismatches) behind += m.behind.size();
      const core::RasVerdict verdict = core::JudgeRas(report, &report);
      return std::string(report.unresponsive.size() <= core::kMaxRasEntries ? ""
                                                                            : "unresponsive ") +
             (report.errors.size() <= core::kMaxRasEntries ? "" : "errors ") +
             (behind <= core::kMaxRasEntries * std::max<std::size_t>(1, report.mismatches.size())
                  ? ""
                  : "behind ") +
             (verdict.ranks.size() <= core::kMaxRasVerdictRanks ? "" : "verdict ") +
             std::string(core::RasHealthName(verdict.health)) +
             (report.unresponsive.empty() ? " none-unresponsive" : "");
    });
    EXPECT_TRUE(run.finished) << "signal " << run.signal << " after " << run.cpu_seconds
                              << " s of CPU";
    EXPECT_EQ(run.result, "RankError");
  }
}

// A text report whose MISMATCH section goes on for `bytes`, fed a line at a time.
std::string FeedHugeReport(std::size_t bytes) {
  core::RasReader reader;
  const std::string head = RenderRasText(Behind("2.26", 100));
  std::string line;
  for (const char c : head) {
    if (c == '\n') {
      reader.Feed(line);
      line.clear();
    } else {
      line += c;
    }
  }
  const std::string rank = "  Rank 1 -- GPU 1 managed by process 483073 on node 172.16.64.210";
  for (std::size_t fed = head.size(); fed < bytes; fed += rank.size() + 1) reader.Feed(rank);
  const std::vector<RasReport> reports = reader.Finish();
  if (reports.size() != 1) return "reports: " + std::to_string(reports.size());
  return std::string(reports[0].truncated ? "truncated" : "whole") + " " +
         std::to_string(reports[0].mismatches.size() <= 1 ? 1 : 0);
}

TEST(RasHostile, AFiftyMegabyteReportIsCutInBoundedMemory) {
  // Fed a line at a time: the reader may keep kMaxRasReportBytes (4 MiB), not 50 MB.
  const BoundedRun run =
      RunBounded(kCpuSeconds, 64 * kMiB, [] { return FeedHugeReport(50'000'000); });
  EXPECT_TRUE(run.finished) << "signal " << run.signal << " after " << run.cpu_seconds
                            << " s of CPU";
  EXPECT_EQ(run.result, "truncated 1");
}

TEST(RasHostile, AFiftyMegabyteAnswerIsReadInBoundedTimeAndMemory) {
  std::string bytes = RenderRasText(Behind("2.28", 100));
  const std::string rank = "  Rank 1 -- GPU 1 managed by process 483073 on node 172.16.64.210\n";
  while (bytes.size() < 50'000'000) bytes += rank;
  const BoundedRun run = RunBounded(kCpuSeconds, 128 * kMiB, [&] {
    const std::vector<RasReport> reports = core::ReadRasReports(bytes);
    return std::to_string(reports.size()) + (reports.empty() || reports[0].truncated ? " cut" : "");
  });
  EXPECT_TRUE(run.finished) << "signal " << run.signal << " after " << run.cpu_seconds
                            << " s of CPU";
  EXPECT_EQ(run.result, "1 cut");
}

TEST(RasHostile, AnEndlessLineIsBounded) {
  std::string bytes = "NCCL version 2.26.5 compiled with CUDA 12.8\n";
  bytes.append(50'000'000, 'x');
  const BoundedRun run = RunBounded(kCpuSeconds, 128 * kMiB, [&] {
    const std::vector<RasReport> reports = core::ReadRasReports(bytes);
    return std::to_string(reports.size()) + (reports.empty() || reports[0].truncated ? " cut" : "");
  });
  EXPECT_TRUE(run.finished) << "signal " << run.signal << " after " << run.cpu_seconds
                            << " s of CPU";
  EXPECT_EQ(run.result, "1 cut");
}

// Every rank at its own count, twice (a stuck collective as JSON can say it of 20,000 ranks):
// the groups kept and the verdict's summary stay short enough for status.ras and a condition.
TEST(RasHostile, ThousandsOfDistinctCountsKeepTheSummaryShort) {
  core::Json ranks = core::Json::array();
  for (int i = 0; i < 20000; ++i) {
    ranks.push_back({{"rank", i},
                     {"host", "10.0." + std::to_string(i / 250) + "." + std::to_string(i % 250)},
                     {"pid", i},
                     {"cuda_dev", 0},
                     {"status", {{"init_state", 0}, {"async_error", 0}}},
                     {"collective_counts", {{"AllReduce", i}}}});
  }
  const std::string report =
      core::Json{{"nccl_version", "2.29.1"},
                 {"communicators", {{{"hash", "0x1"}, {"ranks", ranks}, {"missing_ranks", {}}}}}}
          .dump();
  const auto reports = core::ReadRasReports(report + "\n" + report + "\n");
  ASSERT_EQ(reports.size(), 2u);
  ASSERT_EQ(reports[1].mismatches.size(), 1u);
  EXPECT_EQ(reports[1].mismatches[0].groups.size(), core::kMaxRasEntries);
  const core::RasVerdict verdict = core::JudgeRas(reports[1], &reports[0]);
  EXPECT_EQ(verdict.health, core::RasHealth::CollectiveStuck);
  EXPECT_LT(verdict.summary.size(), 1024u) << verdict.summary.substr(0, 200);
  EXPECT_NE(verdict.summary.find("and 252 other counts"), std::string::npos) << verdict.summary;
}

TEST(RasHostile, BinaryGarbageIsNoReport) {
  std::mt19937 random(49);
  std::string bytes(4'000'000, '\0');
  for (char& c : bytes) c = static_cast<char>(random() & 0xff);
  const BoundedRun run = RunBounded(
      kCpuSeconds, 256 * kMiB, [&] { return std::to_string(core::ReadRasReports(bytes).size()); });
  EXPECT_TRUE(run.finished) << "signal " << run.signal << " after " << run.cpu_seconds
                            << " s of CPU";
  EXPECT_EQ(run.result, "0");
  // Garbage around a report leaves the report.
  std::string around =
      bytes.substr(0, 5000) + "\n" + RenderRasText(Job("2.26")) + bytes.substr(5000, 5000) + "\n";
  for (char& c : around) {
    if (c == '{' || c == '}') c = ' ';  // no accidental JSON object in the garbage
  }
  const std::vector<RasReport> reports = core::ReadRasReports(around);
  ASSERT_GE(reports.size(), 1u);
  EXPECT_TRUE(std::any_of(reports.begin(), reports.end(),
                          [](const RasReport& r) { return r.nccl_version == "2.26.5"; }));
}

TEST(RasHostile, DeeplyNestedJsonIsBounded) {
  std::string bytes = "{\"nccl_version\": \"2.28.9\", \"communicators\": ";
  for (int i = 0; i < 1'000'000; ++i) bytes += '[';
  for (int i = 0; i < 1'000'000; ++i) bytes += ']';
  bytes += "}\n";
  const BoundedRun run = RunBounded(kCpuSeconds, 256 * kMiB, [&] {
    const std::vector<RasReport> reports = core::ReadRasReports(bytes);
    return std::to_string(reports.size() <= 1);
  });
  EXPECT_TRUE(run.finished) << "signal " << run.signal << " after " << run.cpu_seconds
                            << " s of CPU";
  EXPECT_EQ(run.result, "1");
}

TEST(RasHostile, HugeJsonKeepsItsListsBounded) {
  RasScenario scenario = Job("2.29", 8);
  RankOf(scenario, 0).dead = true;
  const std::string one = RenderRasJson(scenario);
  // The same communicator over and over, to just under kMaxRasReportBytes: some 6,000 ranks
  // and 800 dead ones.
  const std::size_t open = one.find("    {\n");
  const std::size_t close = one.rfind("\n  ],");
  const std::string comm = one.substr(open, close - open);
  std::string bytes = one.substr(0, open);
  for (int i = 0; bytes.size() + comm.size() + 4096 < core::kMaxRasReportBytes; ++i) {
    bytes += (i ? ",\n" : "") + comm;
  }
  bytes += one.substr(close);
  const BoundedRun run = RunBounded(kCpuSeconds, 512 * kMiB, [&] {
    const std::vector<RasReport> reports = core::ReadRasReports(bytes);
    if (reports.size() != 1) return "reports " + std::to_string(reports.size());
    return std::string(reports[0].dead.size() <= core::kMaxRasEntries ? "bounded" : "unbounded") +
           (reports[0].truncated ? " truncated" : "") +
           (reports[0].dead.empty() ? " none-dead" : "");
  });
  EXPECT_TRUE(run.finished) << "signal " << run.signal << " after " << run.cpu_seconds
                            << " s of CPU";
  EXPECT_EQ(run.result, "bounded");
}

}  // namespace
}  // namespace ncclguard::test
