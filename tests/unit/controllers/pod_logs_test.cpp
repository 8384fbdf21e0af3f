// The controller's side of the log diagnoses: digests of a pod's log tail, when logs are read
// (LogReadPlanner), the NcclTransport condition and the efa-tcp-fallback Event on the job.
#include <gtest/gtest.h>

#include <map>
#include <variant>

#include "controllers/pod_logs.h"
#include "controllers/training_job_reconciler.h"
#include "core/contract.h"
#include "core/reason.h"
#include "tests/unit/controllers/fake_cluster.h"
#include "tests/unit/test_support.h"

namespace ncclguard::test {
namespace {

using controllers::DigestPodLog;
using controllers::LogReadLimits;
using controllers::LogReadPlanner;
using controllers::NcclTransportKind;
using controllers::PodLogDigest;
using controllers::Timestamp;

const Timestamp kLogsNow =
    std::chrono::sys_days(std::chrono::year(2026) / 12 / 3) + std::chrono::hours(13);

TEST(PodLogDigests, SocketsInAPodThatRequestedEfaAreAFinding) {
  const PodLogDigest d = DigestPodLog("w-0 container pytorch", "pytorch", "Running", true,
                                      LogFixture("socket-nccl2.23.log"));
  EXPECT_EQ(d.transport.kind, NcclTransportKind::Socket);
  ASSERT_EQ(d.findings.size(), 1u);
  EXPECT_EQ(d.findings[0].id, "efa-tcp-fallback");
  EXPECT_EQ(d.findings[0].message.rfind("pod w-0 container pytorch: ", 0), 0u)
      << d.findings[0].message;
  EXPECT_EQ(DigestPodLog("w-0 container pytorch", "pytorch", "Running", false,
                         LogFixture("socket-nccl2.23.log"))
                .findings.size(),
            0u);
}

TEST(PodLogDigests, ALaterTailKeepsWhatTheEarlierOneShowed) {
  const PodLogDigest first =
      DigestPodLog("w-0 container c", "c", "Running", true, LogFixture("socket-nccl2.18.log"));
  // Later the init lines have scrolled out of the tail.
  const PodLogDigest later =
      DigestPodLog("w-0 container c", "c", "Running", true, "step 9000 loss 1.1\n");
  const PodLogDigest merged = controllers::MergeDigests(first, later);
  EXPECT_EQ(merged.transport.kind, NcclTransportKind::Socket);
  ASSERT_EQ(merged.findings.size(), 1u);
  EXPECT_EQ(merged.findings[0].evidence[0].text, first.findings[0].evidence[0].text);
}

TEST(PodLogDigests, ContainersAndTheirEfaRequests) {
  const Json pod = Yaml(R"(
metadata: {name: w-0, namespace: n}
spec:
  containers:
    - {name: pytorch, resources: {limits: {vpc.amazonaws.com/efa: "32"}}}
    - {name: sidecar}
status: {phase: Running}
)");
  const auto containers = controllers::LogContainers(pod);
  ASSERT_EQ(containers.size(), 2u);
  EXPECT_TRUE(containers[0].efa_requested);
  EXPECT_FALSE(containers[1].efa_requested);
  EXPECT_EQ(controllers::PodPhase(pod), "Running");
}

TEST(LogReadPlannerTest, OncePerPhaseAndSlowlyWhileRunning) {
  LogReadPlanner planner(LogReadLimits{std::chrono::seconds(300), 2, 10});
  EXPECT_FALSE(planner.Due("n/p", "Pending", kLogsNow));
  EXPECT_FALSE(planner.Due("n/p", "", kLogsNow));
  EXPECT_TRUE(planner.Due("n/p", "Running", kLogsNow));
  planner.Read("n/p", "Running", kLogsNow);
  EXPECT_FALSE(planner.Due("n/p", "Running", kLogsNow + std::chrono::seconds(299)));
  EXPECT_TRUE(planner.Due("n/p", "Running", kLogsNow + std::chrono::seconds(300)));
  EXPECT_TRUE(planner.Due("n/p", "Failed", kLogsNow + std::chrono::seconds(1)));
  planner.Read("n/p", "Failed", kLogsNow + std::chrono::seconds(1));
  EXPECT_FALSE(planner.Due("n/p", "Failed", kLogsNow + std::chrono::hours(5)));
  planner.Retain([](const std::string&) { return false; });
  EXPECT_EQ(planner.Tracked(), 0u);
}

TEST(LogReadPlannerTest, TheGlobalRateIsATokenBucket) {
  LogReadPlanner planner(LogReadLimits{std::chrono::seconds(300), 2, 10});
  int taken = 0;
  for (int i = 0; i < 50; ++i) taken += planner.TakeToken(kLogsNow) ? 1 : 0;
  EXPECT_EQ(taken, 10);
  for (int i = 0; i < 50; ++i)
    taken += planner.TakeToken(kLogsNow + std::chrono::seconds(3)) ? 1 : 0;
  EXPECT_EQ(taken, 16);
}

// A reconciler test cluster whose pods' logs were read.
class LogCluster : public FakeCluster {
 public:
  std::map<std::string, std::vector<PodLogDigest>> logs;
  std::vector<PodLogDigest> PodLogs(std::string_view, std::string_view pod) const override {
    const auto it = logs.find(std::string(pod));
    return it == logs.end() ? std::vector<PodLogDigest>{} : it->second;
  }
};

class TransportCondition : public ::testing::Test {
 protected:
  void SetUp() override {
    cluster_.AddNamespace("team-a", true);
    cluster_.AddJob(P5PyTorchJob("team-a", "llm", 1, false));
    for (const char* pod : {"llm-master-0", "llm-worker-0"}) {
      cluster_.AddPod(KubeflowPod("team-a", "llm", pod, {{"phase", "Running"}}));
    }
  }
  Json Condition(const std::string& type) {
    const Json& job = cluster_.JobObject(key_);
    if (!job.contains("status")) return nullptr;
    for (const Json& c : job["status"]["conditions"])
      if (c["type"] == type) return c;
    return nullptr;
  }
  std::vector<controllers::RecordEvent> ReconcileAndApply() {
    const auto result = controllers::ReconcileTrainingJob(key_, cluster_, kLogsNow);
    std::vector<controllers::RecordEvent> events;
    for (const auto& a : result.actions)
      if (const auto* e = std::get_if<controllers::RecordEvent>(&a)) events.push_back(*e);
    cluster_.Apply(result.actions);
    return events;
  }
  LogCluster cluster_;
  JobKey key_{core::WorkloadKind::PyTorchJob, "team-a", "llm"};
};

TEST_F(TransportCondition, SocketInAPodThatRequestedEfaIsAConditionAndAWarning) {
  cluster_.logs["llm-master-0"] = {DigestPodLog("llm-master-0 container pytorch", "pytorch",
                                                "Running", true,
                                                LogFixture("efa-nccl2.23-ofi1.13.log"))};
  cluster_.logs["llm-worker-0"] = {DigestPodLog("llm-worker-0 container pytorch", "pytorch",
                                                "Running", true,
                                                LogFixture("socket-nccl2.18.log"))};
  const auto events = ReconcileAndApply();
  const Json condition = Condition(std::string(core::kTransportCondition));
  ASSERT_TRUE(condition.is_object()) << cluster_.JobObject(key_).dump();
  EXPECT_EQ(condition["status"], "False");
  EXPECT_EQ(condition["reason"], "Socket");
  const std::string message = condition["message"];
  EXPECT_NE(message.find("llm-worker-0"), std::string::npos) << message;
  EXPECT_NE(message.find("Using network Socket"), std::string::npos) << message;
  EXPECT_NE(message.find("#efa-tcp-fallback"), std::string::npos) << message;

  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].type, "Warning");
  EXPECT_EQ(events[0].reason, core::ReasonFromId("efa-tcp-fallback"));
  EXPECT_EQ(events[0].annotations.at(std::string(core::kDiagnosisAnnotation)), "efa-tcp-fallback");
  EXPECT_NE(events[0].note.find("Using network Socket"), std::string::npos) << events[0].note;
  EXPECT_NE(events[0].note.find("#efa-tcp-fallback"), std::string::npos) << events[0].note;
  // Level-triggered: the same logs say nothing new.
  EXPECT_TRUE(controllers::ReconcileTrainingJob(key_, cluster_, kLogsNow).actions.empty());
}

TEST_F(TransportCondition, EfaEverywhereIsTrueAndQuiet) {
  for (const char* pod : {"llm-master-0", "llm-worker-0"}) {
    cluster_.logs[pod] = {DigestPodLog(std::string(pod) + " container pytorch", "pytorch",
                                       "Running", true, LogFixture("efa-nccl2.18-ofi1.7.log"))};
  }
  const auto events = ReconcileAndApply();
  const Json condition = Condition(std::string(core::kTransportCondition));
  ASSERT_TRUE(condition.is_object());
  EXPECT_EQ(condition["status"], "True");
  EXPECT_EQ(condition["reason"], "EFA");
  EXPECT_NE(condition["message"].get<std::string>().find("aws-ofi-nccl 1.7.4-aws"),
            std::string::npos);
  EXPECT_TRUE(events.empty());
  EXPECT_TRUE(Condition(std::string(core::kDiagnosisCondition)).is_null());
}

TEST_F(TransportCondition, LogsWithoutNcclLinesAreUnknownAndUnreadLogsSetNothing) {
  ReconcileAndApply();
  EXPECT_TRUE(Condition(std::string(core::kTransportCondition)).is_null());
  cluster_.logs["llm-master-0"] = {
      DigestPodLog("llm-master-0 container pytorch", "pytorch", "Running", true, "step 1\n")};
  ReconcileAndApply();
  const Json condition = Condition(std::string(core::kTransportCondition));
  ASSERT_TRUE(condition.is_object());
  EXPECT_EQ(condition["status"], "Unknown");
  EXPECT_NE(condition["message"].get<std::string>().find("NCCL_DEBUG=INFO"), std::string::npos);
}

TEST_F(TransportCondition, OtherLogDiagnosesBecomeEventsAndTheDiagnosisCondition) {
  cluster_.logs["llm-worker-0"] = {DigestPodLog("llm-worker-0 container pytorch", "pytorch",
                                                "Running", true, LogFixture("memlock.log"))};
  const auto events = ReconcileAndApply();
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].reason, core::ReasonFromId("memory-registration-failed"));
  const Json diagnosis = Condition(std::string(core::kDiagnosisCondition));
  ASSERT_TRUE(diagnosis.is_object());
  EXPECT_EQ(diagnosis["reason"], core::ReasonFromId("memory-registration-failed"));
  EXPECT_EQ(diagnosis["message"].get<std::string>().find("wJalrXUtnFEMI"), std::string::npos);
}

}  // namespace
}  // namespace ncclguard::test
