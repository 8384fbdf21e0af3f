// The job's NcclHealth condition from what the probe read of NCCL's RAS (status.ras of the
// reader pod's node), and the reader label the controller keeps on one running pod of the job.
#include <gtest/gtest.h>

#include "controllers/nccl_health.h"
#include "controllers/training_job_reconciler.h"
#include "core/contract.h"
#include "tests/unit/controllers/fake_cluster.h"

namespace ncclguard::test {
namespace {

using controllers::NcclHealthCondition;
using controllers::PickRasReader;

const controllers::Timestamp kRasNow =
    std::chrono::sys_days(std::chrono::year(2026) / 12 / 7) + std::chrono::hours(14);

Json RunningPod(const std::string& name, const std::string& node, const std::string& ip,
                const std::string& role = "worker") {
  Json pod = KubeflowPod("team-a", "llama", name,
                         {{"phase", "Running"}, {"podIP", ip}, {"podIPs", {{{"ip", ip}}}}}, node);
  pod["metadata"]["uid"] = "uid-" + name;
  pod["metadata"]["labels"]["training.kubeflow.org/replica-type"] = role;
  return pod;
}

Json Reader(Json pod) {
  pod["metadata"]["labels"][std::string(core::kRasReaderLabel)] = "true";
  return pod;
}

Json Validation(const Json& entry) {
  return Json{{"metadata", {{"name", "node-0"}}}, {"status", {{"ras", {{"pods", {entry}}}}}}};
}

Json Entry(const std::string& health, Json ranks = Json::array()) {
  Json entry{{"namespace", "team-a"},           {"pod", "llama-master-0"},
             {"uid", "uid-llama-master-0"},     {"answer", "Answered"},
             {"since", "2026-12-07T14:00:00Z"}, {"ncclVersion", "2.26.5"}};
  if (!health.empty()) {
    entry["health"] = health;
    entry["summary"] =
        health == "Healthy"
            ? "NCCL's RAS reports 2 processes answering in 1 communicator, no error"
            : "NCCL's RAS considers 1 process dead (unreachable over the RAS network): rank 1 "
              "(GPU 0, PID 77, 10.1.0.7)";
  }
  if (!ranks.empty()) entry["ranks"] = std::move(ranks);
  return entry;
}

TEST(RasReader, IsTheLabelledRunningPodElseTheFirstRunningRankPodByName) {
  const auto all = [](const Json&) { return true; };
  std::vector<Json> pods{RunningPod("llama-worker-1", "node-1", "10.1.0.8"),
                         RunningPod("llama-worker-0", "node-0", "10.1.0.7")};
  EXPECT_EQ(PickRasReader(pods, all), "llama-worker-0");
  pods[0] = Reader(pods[0]);
  EXPECT_EQ(PickRasReader(pods, all), "llama-worker-1");  // kept while it runs: no churn
  pods[0]["status"]["phase"] = "Failed";
  EXPECT_EQ(PickRasReader(pods, all), "llama-worker-0");
  // An MPIJob's launcher runs no NCCL.
  const auto ranked = [](const Json& pod) {
    return pod["metadata"]["labels"]["training.kubeflow.org/replica-type"] != "launcher";
  };
  EXPECT_EQ(PickRasReader({RunningPod("a-launcher", "node-0", "10.1.0.2", "launcher"),
                           RunningPod("b-worker-0", "node-1", "10.1.0.3")},
                          ranked),
            "b-worker-0");
  pods[1]["status"]["phase"] = "Pending";
  EXPECT_EQ(PickRasReader(pods, all), std::nullopt);
}

TEST(NcclHealth, NothingReadYetSetsNothing) {
  const Json reader = Reader(RunningPod("llama-master-0", "node-0", "10.1.0.6", "master"));
  std::map<std::string, Json, std::less<>> validations{{"node-0", Json::object()}};
  EXPECT_FALSE(NcclHealthCondition({reader}, reader, validations, "L"));
  validations["node-0"] = Validation(Entry("Healthy"));
  validations["node-0"]["status"]["ras"]["pods"][0]["uid"] = "another-pod";
  EXPECT_FALSE(NcclHealthCondition({reader}, reader, validations, "L"));
}

TEST(NcclHealth, ADeadRankIsNamedByItsPodAndNode) {
  const Json reader = Reader(RunningPod("llama-master-0", "node-0", "10.1.0.6", "master"));
  const Json worker = RunningPod("llama-worker-0", "node-1", "10.1.0.7");
  const Json ranks = Json::array(
      {{{"rank", 1}, {"gpu", "0"}, {"pid", 77}, {"address", "10.1.0.7"}, {"detail", "dead"}}});
  const std::map<std::string, Json, std::less<>> validations{
      {"node-0", Validation(Entry("ProcessDead", ranks))}};
  const auto c = NcclHealthCondition({reader, worker}, reader, validations, "https://g#nccl-ras");
  ASSERT_TRUE(c);
  EXPECT_EQ(c->type, "NcclHealth");
  EXPECT_EQ(c->status, "False");
  EXPECT_EQ(c->reason, "ProcessDead");
  EXPECT_NE(c->message.find("rank 1 (GPU 0, PID 77) in pod llama-worker-0 on node node-1"),
            std::string::npos)
      << c->message;
  EXPECT_NE(c->message.find("Read in pod llama-master-0 (NCCL 2.26.5)"), std::string::npos);
  EXPECT_NE(c->message.find("see https://g#nccl-ras"), std::string::npos);
  // What the pods' statuses and logs say of the same pod is quoted as agreeing.
  const auto agreed = NcclHealthCondition({reader, worker}, reader, validations, "L",
                                          {"gpu-oom: pod llama-master-0 ran out",
                                           "first-failed-rank: pod llama-worker-0 failed first"});
  ASSERT_TRUE(agreed);
  EXPECT_NE(agreed->message.find("agree: first-failed-rank: pod llama-worker-0"), std::string::npos)
      << agreed->message;
  // An address no pod of the job has is said as such.
  Json stray = ranks;
  stray[0]["address"] = "10.9.9.9";
  const auto unknown = NcclHealthCondition(
      {reader, worker}, reader, {{"node-0", Validation(Entry("ProcessDead", stray))}}, "L");
  EXPECT_NE(unknown->message.find("at 10.9.9.9 (no pod of the job has that address)"),
            std::string::npos);
}

TEST(NcclHealth, HealthyIsTrueAndNotReadIsUnknownWithWhy) {
  const Json reader = Reader(RunningPod("llama-master-0", "node-0", "10.1.0.6", "master"));
  auto c = NcclHealthCondition({reader}, reader, {{"node-0", Validation(Entry("Healthy"))}}, "L");
  ASSERT_TRUE(c);
  EXPECT_EQ(c->status, "True");
  EXPECT_EQ(c->reason, "Healthy");
  Json waiting = Entry("");
  waiting["answer"] = "Waiting";
  waiting["message"] = "read once its containers have run 120s";
  c = NcclHealthCondition({reader}, reader, {{"node-0", Validation(waiting)}}, "L");
  EXPECT_EQ(c->status, "Unknown");
  EXPECT_EQ(c->reason, "RasWaiting");
  Json refused = Entry("");
  refused["answer"] = "Refused";
  c = NcclHealthCondition({reader}, reader, {{"node-0", Validation(refused)}}, "L");
  EXPECT_EQ(c->reason, "RasUnanswered");
  EXPECT_NE(c->message.find("not read: Refused"), std::string::npos);
}

// The reconciler: labels one running pod, then says what the probe read there, with an Event on
// each change; spec.rasReads false takes the label away.
TEST(NcclHealthReconcile, LabelsAReaderThenTellsWhatRasSaid) {
  FakeCluster cluster;
  cluster.AddNamespace("team-a", true);
  cluster.AddNode("node-0", "p5.48xlarge", "Pass");
  cluster.AddNode("node-1", "p5.48xlarge", "Pass");
  cluster.AddJob(P5PyTorchJob("team-a", "llama", 1, false));
  cluster.AddPod(RunningPod("llama-master-0", "node-0", "10.1.0.6", "master"));
  cluster.AddPod(RunningPod("llama-worker-0", "node-1", "10.1.0.7"));
  const JobKey key{WorkloadKind::PyTorchJob, "team-a", "llama"};
  for (int round = 0; round < 4; ++round) {
    ASSERT_EQ(cluster.Apply(controllers::ReconcileTrainingJob(key, cluster, kRasNow).actions), 0);
  }
  EXPECT_EQ(cluster.PodObject("team-a", "llama-master-0")["metadata"]["labels"].value(
                std::string(core::kRasReaderLabel), ""),
            "true");
  EXPECT_FALSE(cluster.PodObject("team-a", "llama-worker-0")["metadata"]["labels"].contains(
      std::string(core::kRasReaderLabel)));

  cluster.ValidationObject("node-0")["status"]["ras"] = {
      {"pods",
       {Entry("ProcessDead",
              Json::array({{{"rank", 1}, {"gpu", "0"}, {"pid", 77}, {"address", "10.1.0.7"}}}))}}};
  ASSERT_EQ(cluster.Apply(controllers::ReconcileTrainingJob(key, cluster, kRasNow).actions), 0);
  const Json& job = cluster.JobObject(key);
  Json health;
  for (const Json& c : job["status"]["conditions"]) {
    if (c["type"] == "NcclHealth") health = c;
  }
  ASSERT_TRUE(health.is_object()) << job.dump();
  EXPECT_EQ(health["reason"], "ProcessDead");
  EXPECT_NE(health["message"].get<std::string>().find("pod llama-worker-0 on node node-1"),
            std::string::npos);
  const auto said = [&cluster](const std::string& reason) {
    return std::count_if(cluster.events().begin(), cluster.events().end(),
                         [&](const Json& e) { return e.value("reason", "") == reason; });
  };
  EXPECT_EQ(said("ProcessDead"), 1);

  cluster.ValidationObject("node-0")["status"]["ras"] = {{"pods", {Entry("Healthy")}}};
  ASSERT_EQ(cluster.Apply(controllers::ReconcileTrainingJob(key, cluster, kRasNow).actions), 0);
  for (const Json& c : cluster.JobObject(key)["status"]["conditions"]) {
    if (c["type"] == "NcclHealth") {
      EXPECT_EQ(c["reason"], "Healthy");
    }
  }
  EXPECT_EQ(said("Healthy"), 1);

  cluster.policy().ras_reads = false;
  ASSERT_EQ(cluster.Apply(controllers::ReconcileTrainingJob(key, cluster, kRasNow).actions), 0);
  EXPECT_FALSE(cluster.PodObject("team-a", "llama-master-0")["metadata"]["labels"].contains(
      std::string(core::kRasReaderLabel)));
}

}  // namespace
}  // namespace ncclguard::test
