// `ncclguard diagnose`: exit codes, JSON, stdin, several files, input errors.
#include <gtest/gtest.h>

#include "core/json.h"
#include "tests/unit/test_support.h"

namespace ncclguard::test {
namespace {

TEST(DiagnoseCli, CleanEfaLogExitsZero) {
  const auto r = RunCli({"diagnose", LogFixturePath("efa-nccl2.23-ofi1.13.log")});
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("NCCL transport EFA"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("0 findings in 1 log"), std::string::npos) << r.out;
}

TEST(DiagnoseCli, SocketFallbackExitsOneWithTheGuideLink) {
  const auto r = RunCli({"diagnose", LogFixturePath("socket-nccl2.18.log"), "--guide-base-url",
                         "https://wiki.example/g"});
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_NE(r.out.find("efa-tcp-fallback"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("https://wiki.example/g#efa-tcp-fallback"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("0123456789abcdef0123456789abcdef01234567"), std::string::npos);
}

// A hang at the first collective whose log names its cause: the security group (section 2) comes
// before the watchdog's timeout it led to.
TEST(DiagnoseCli, AnUnansweredEfaHandshakeLinksTheSecurityGroupSection) {
  const auto r = RunCli({"diagnose", "-o", "json", LogFixturePath("security-group.log")});
  EXPECT_EQ(r.exit_code, 1) << r.err;
  const core::Json findings = core::Json::parse(r.out);
  ASSERT_EQ(findings.size(), 2u) << r.out;
  EXPECT_EQ(findings[0]["id"], "efa-peer-unreachable");
  EXPECT_EQ(findings[0]["lines"], core::Json::array({9}));
  EXPECT_NE(findings[0]["guide"].get<std::string>().find("#security-group"), std::string::npos);
  EXPECT_EQ(findings[1]["id"], "nccl-watchdog-timeout");
}

// The same hang without an error line: the channel setup over EFA, then the watchdog.
TEST(DiagnoseCli, AHangRightAfterConnectingOverEfaLinksTheSecurityGroupSection) {
  const auto r = RunCli({"diagnose", "-o", "json", LogFixturePath("efa-hang-after-connect.log")});
  EXPECT_EQ(r.exit_code, 1) << r.err;
  const core::Json findings = core::Json::parse(r.out);
  ASSERT_EQ(findings.size(), 2u) << r.out;
  EXPECT_EQ(findings[0]["id"], "efa-peer-unreachable");
  EXPECT_EQ(findings[0]["lines"], core::Json::array({20, 21}));
  EXPECT_NE(findings[0]["message"].get<std::string>().find("hung right after connecting over EFA"),
            std::string::npos)
      << r.out;
  EXPECT_NE(findings[0]["guide"].get<std::string>().find("#security-group"), std::string::npos);
  EXPECT_EQ(findings[1]["id"], "nccl-watchdog-timeout");
}

// Saved NCCL RAS reports (guide section 9, rendered by tests/ras_standin from NCCL's format
// strings): two `verbose status` answers of 2.26 a loop apart with the same counts, and the JSON
// of `ncclras -f json` of 2.28 (its "OK" first, a missing rank's comma missing as 2.28.9 prints
// it).
TEST(DiagnoseCli, SavedRasReportsNameTheStuckAndTheDeadRank) {
  const auto r = RunCli({"diagnose", "-o", "json", LogFixturePath("ras-stuck-nccl2.26.log"),
                         LogFixturePath("ras-dead-nccl2.28.log")});
  EXPECT_EQ(r.exit_code, 1) << r.err;
  const core::Json findings = core::Json::parse(r.out);
  ASSERT_EQ(findings.size(), 2u) << r.out;
  EXPECT_EQ(findings[0]["id"], "ras-process-dead");
  EXPECT_NE(findings[0]["message"].get<std::string>().find("rank 6 (GPU 2, PID 4006, 10.1.0.7)"),
            std::string::npos)
      << r.out;
  EXPECT_EQ(findings[1]["id"], "ras-collective-stuck");
  EXPECT_NE(findings[1]["message"].get<std::string>().find("RAS reports at lines 2 and 31"),
            std::string::npos)
      << r.out;
  EXPECT_NE(findings[1]["message"].get<std::string>().find("behind: rank 5 (GPU 1, PID 4005"),
            std::string::npos)
      << r.out;
  for (const core::Json& f : findings) {
    EXPECT_NE(f["guide"].get<std::string>().find("#nccl-ras"), std::string::npos);
  }
  // One of the two answers alone: nothing stuck yet.
  const std::string both = ReadFile(LogFixturePath("ras-stuck-nccl2.26.log"));
  const auto once = RunCli({"diagnose", "-"}, both.substr(0, both.find("$ sleep 30")));
  EXPECT_EQ(once.exit_code, 0) << once.out << once.err;
  EXPECT_NE(once.out.find("0 findings in 1 log"), std::string::npos) << once.out;
}

TEST(DiagnoseCli, JsonIsAnArrayOfFindingsWithTheirFields) {
  const auto r = RunCli({"diagnose", "-o", "json", LogFixturePath("rank0-peer-closed.log"),
                         LogFixturePath("rank1-oom.log")});
  EXPECT_EQ(r.exit_code, 1) << r.err;
  const core::Json findings = core::Json::parse(r.out);
  ASSERT_TRUE(findings.is_array());
  ASSERT_EQ(findings.size(), 2u) << r.out;
  for (const core::Json& f : findings) {
    for (const char* key :
         {"id", "level", "file", "lines", "message", "evidence", "remedy", "guide"})
      EXPECT_TRUE(f.contains(key)) << key << " in " << f.dump();
    EXPECT_EQ(f["level"], "warn");
    EXPECT_TRUE(f["lines"].is_array() && !f["lines"].empty());
    for (const core::Json& e : f["evidence"]) {
      EXPECT_TRUE(e["file"].is_string() && e["line"].is_number_unsigned() && e["text"].is_string());
    }
  }
  EXPECT_EQ(findings[0]["id"], "gpu-oom");
  EXPECT_EQ(findings[0]["file"], LogFixturePath("rank1-oom.log"));
  EXPECT_EQ(findings[0]["lines"], core::Json::array({5}));
  EXPECT_EQ(findings[1]["id"], "first-failed-rank");
  EXPECT_NE(findings[1]["guide"].get<std::string>().find("#nccl-timeout"), std::string::npos);
}

TEST(DiagnoseCli, ReadsStandardInputBesideFiles) {
  const auto r = RunCli({"diagnose", "-o", "json", LogFixturePath("efa-nccl2.18-ofi1.7.log"), "-"},
                        ReadFile(LogFixturePath("memlock.log")));
  EXPECT_EQ(r.exit_code, 1) << r.err;
  const core::Json findings = core::Json::parse(r.out);
  ASSERT_EQ(findings.size(), 1u) << r.out;
  EXPECT_EQ(findings[0]["id"], "memory-registration-failed");
  EXPECT_EQ(findings[0]["file"], "<stdin>");
  EXPECT_EQ(r.out.find("wJalrXUtnFEMI"), std::string::npos);
}

TEST(DiagnoseCli, EmptyJsonArrayWhenClean) {
  const auto r = RunCli({"diagnose", "-o", "json", "-"}, "just training\n");
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_EQ(core::Json::parse(r.out), core::Json::array());
}

TEST(DiagnoseCli, AMissingFileIsOneLineOnStderrAndNothingOnStdout) {
  const auto r =
      RunCli({"diagnose", LogFixturePath("socket-nccl2.18.log"), "/nonexistent/rank9.log"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(r.out, "");
  EXPECT_NE(r.err.find("/nonexistent/rank9.log"), std::string::npos) << r.err;
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
}

TEST(DiagnoseCli, UsageErrorsExitTwo) {
  EXPECT_EQ(RunCli({"diagnose"}).exit_code, 2);
  EXPECT_EQ(RunCli({"diagnose", "-o", "yaml", LogFixturePath("memlock.log")}).exit_code, 2);
  EXPECT_EQ(RunCli({"diagnose", "-", "-"}, "x\n").exit_code, 2);
  EXPECT_EQ(RunCli({"diagnose", SourcePath("tests/fixtures/logs")}).exit_code, 2);
}

}  // namespace
}  // namespace ncclguard::test
