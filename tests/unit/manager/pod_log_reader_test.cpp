// PodLogReader with a counting log source: which pods are read, how often, within the global rate.
#include <gtest/gtest.h>

#include <map>
#include <memory>
#include <set>

#include "manager/pod_log_reader.h"
#include "metrics/registry.h"
#include "tests/unit/controllers/fake_cluster.h"

namespace ncclguard::test {
namespace {

using controllers::Timestamp;

const Timestamp kStart =
    std::chrono::sys_days(std::chrono::year(2026) / 12 / 3) + std::chrono::hours(13);

struct CountingSource {
  std::map<std::string, int> reads;  // by pod
  int total = 0;
  manager::PodLogSource Source() {
    return [this](const std::string& ns, const std::string& pod,
                  const std::string&) -> std::optional<std::string> {
      ++reads[ns + "/" + pod];
      ++total;
      return std::string("h:1:1 [0] NCCL INFO Using network Socket\n");
    };
  }
};

// The pods a pass visits; `visited` counts those it reached.
manager::PodLogReader::Pods Visit(const std::vector<Json>& pods, int* visited = nullptr) {
  return [&pods, visited](const auto& visit) {
    for (const Json& pod : pods) {
      if (visited != nullptr) ++*visited;
      if (!visit(pod)) return;
    }
  };
}

// The pod cache holds `pods`, no other.
manager::PodLogReader::Live LiveIn(const std::vector<Json>& pods) {
  auto keys = std::make_shared<std::set<std::string>>();
  for (const Json& pod : pods) {
    keys->insert(pod["metadata"]["namespace"].get<std::string>() + "/" +
                 pod["metadata"]["name"].get<std::string>());
  }
  return [keys](const std::string& key) { return keys->contains(key); };
}

std::vector<Json> Pods(int count, const std::string& phase) {
  std::vector<Json> pods;
  for (int i = 0; i < count; ++i) {
    Json pod = KubeflowPod("team-a", "job-" + std::to_string(i / 8), "p-" + std::to_string(i),
                           {{"phase", phase}});
    pod["spec"]["containers"] = Json::array({{{"name", "pytorch"}}});
    pods.push_back(std::move(pod));
  }
  return pods;
}

const auto kAllManaged = [](const controllers::JobKey&) { return true; };

// A reader at the default limits (2 reads a second, burst 10, Running pods again every 5 min)
// over a counting source.
struct CountedReader {
  CountingSource counting;
  manager::PodLogStore store;
  manager::PodLogReader reader{controllers::LogReadLimits{std::chrono::seconds(300), 2.0, 10.0},
                               counting.Source(), store};
};

TEST(PodLogReaderTest, FiveHundredPodsAreReadWithinTheRateOncePerPhase) {
  CountedReader counted;
  auto& [counting, store, reader] = counted;
  const std::vector<Json> running = Pods(500, "Running");
  for (int second = 0; second <= 300; ++second) {
    reader.Tick(Visit(running), LiveIn(running), kAllManaged,
                kStart + std::chrono::seconds(second));
    // Never more than the burst plus the rate since the start.
    ASSERT_LE(counting.total, 10 + 2 * second) << "at second " << second;
  }
  // 10 + 2 x 245 s covers all 500 before the periodic re-reads start at 300 s.
  EXPECT_EQ(counting.reads.size(), 500u);
  for (const auto& [pod, n] : counting.reads) EXPECT_LE(n, 2) << pod;
  EXPECT_EQ(store.Size(), 500u);

  // A phase change is read again, once.
  std::vector<Json> failed = Pods(1, "Failed");
  const int before = counting.reads["team-a/p-0"];
  for (int second = 301; second < 320; ++second) {
    reader.Tick(Visit(failed), LiveIn(failed), kAllManaged, kStart + std::chrono::seconds(second));
  }
  EXPECT_EQ(counting.reads["team-a/p-0"], before + 1);
  // The other pods are gone from the cache: forgotten.
  EXPECT_EQ(store.Size(), 1u);
}

TEST(PodLogReaderTest, PendingAndUnmanagedPodsAreNeverRead) {
  CountingSource counting;
  manager::PodLogStore store;
  manager::PodLogReader reader({}, counting.Source(), store);
  reader.Tick(Visit(Pods(20, "Pending")), LiveIn(Pods(20, "Pending")), kAllManaged, kStart);
  int asked = 0;
  reader.Tick(
      Visit(Pods(20, "Running")), LiveIn(Pods(20, "Running")),
      [&asked](const controllers::JobKey&) {
        ++asked;
        return false;
      },
      kStart + std::chrono::seconds(10));
  EXPECT_EQ(counting.total, 0);
  EXPECT_EQ(asked, 3) << "whether a job is managed is asked once a pass (3 jobs), not once a pod";
}

TEST(PodLogReaderTest, TheReadJobsAreReturnedAndTheDigestStored) {
  CountingSource counting;
  manager::PodLogStore store;
  manager::PodLogReader reader({}, counting.Source(), store);
  const auto jobs =
      reader.Tick(Visit(Pods(2, "Running")), LiveIn(Pods(2, "Running")), kAllManaged, kStart);
  ASSERT_EQ(jobs.size(), 2u);
  EXPECT_EQ(jobs[0].name, "job-0");
  const auto digests = store.Get("team-a", "p-1");
  ASSERT_EQ(digests.size(), 1u);
  EXPECT_EQ(digests[0].transport.kind, controllers::NcclTransportKind::Socket);
  EXPECT_LE(controllers::kPodLogLimitBytes, 64 * 1024);
}

// Each container's read is counted read or error; a pass the rate ends before its due pods are
// read, rate_limited.
TEST(PodLogReaderTest, ReadsAreCountedByResult) {
  prometheus::Registry registry;
  manager::Metrics metrics(registry);
  manager::PodLogStore store;
  int calls = 0;
  const manager::PodLogSource every_third_fails =
      [&calls](const std::string&, const std::string&,
               const std::string&) -> std::optional<std::string> {
    if (++calls % 3 == 0) return std::nullopt;
    return std::string("h:1:1 [0] NCCL INFO Using network Socket\n");
  };
  const controllers::LogReadLimits limits{std::chrono::seconds(300), 1.0, 4.0};
  manager::PodLogReader reader(limits, every_third_fails, store, &metrics);
  const std::vector<Json> pods = Pods(10, "Running");
  reader.Tick(Visit(pods), LiveIn(pods), kAllManaged, kStart);  // 4 read (burst), 6 put off
  reader.Tick(Visit(pods), LiveIn(pods), kAllManaged, kStart);  // no token left: put off again
  const std::string text = metrics::Render(registry);
  EXPECT_NE(text.find("ncclguard_pod_log_reads_total{result=\"read\"} 3\n"), std::string::npos)
      << text;
  EXPECT_NE(text.find("ncclguard_pod_log_reads_total{result=\"error\"} 1\n"), std::string::npos);
  EXPECT_NE(text.find("ncclguard_pod_log_reads_total{result=\"rate_limited\"} 2\n"),
            std::string::npos)
      << text;
}

// At the size of a real cluster every pod is due (2 reads a second do not go round 100,000 pods
// in a day): a pass ends where the rate does, so it decodes the pods it reads and one more, not
// every pod every 2 s (2.0 s of MessagePack decoding a pass at 100,000 pods, bench/cache_codec.sh).
// The pods it did not reach are not forgotten; those gone from the cache are.
TEST(PodLogReaderTest, APassEndsWhereTheRateDoesAndForgetsOnlyDeletedPods) {
  CountedReader counted;
  auto& [counting, store, reader] = counted;
  const std::vector<Json> pods = Pods(10000, "Running");
  int visited = 0;
  reader.Tick(Visit(pods, &visited), LiveIn(pods), kAllManaged, kStart);
  EXPECT_EQ(counting.total, 10);
  EXPECT_EQ(visited, 11) << "the burst's 10 and the one the rate put off";
  visited = 0;
  reader.Tick(Visit(pods, &visited), LiveIn(pods), kAllManaged, kStart + std::chrono::seconds(2));
  EXPECT_EQ(counting.total, 14);
  EXPECT_EQ(visited, 15) << "the 10 read before are passed over, 4 more read";
  EXPECT_EQ(store.Size(), 14u);

  // The pods read first are deleted: their digests go, the others stay.
  const std::vector<Json> rest(pods.begin() + 5, pods.end());
  reader.Tick(Visit(rest, &visited), LiveIn(rest), kAllManaged, kStart + std::chrono::seconds(2));
  EXPECT_EQ(store.Size(), 9u);
  EXPECT_TRUE(store.Get("team-a", "p-0").empty());
  EXPECT_FALSE(store.Get("team-a", "p-5").empty());
}

// An API server that does not answer (away, or slower than the read's timeout): the read says
// "not read" and the reader goes on. The error used to be thrown out of the reader's thread and
// end the controller process (std::terminate); a 30-s API server fault test found it.
TEST(PodLogReaderTest, AnApiServerThatDoesNotAnswerIsANotReadNotACrash) {
  kube::ClientConfig config;
  config.server = "http://127.0.0.1:1";  // nothing listens there: connection refused
  const manager::PodLogSource source =
      manager::KubePodLogSource(std::make_shared<kube::Client>(config));
  std::optional<std::string> tail = std::string("unset");
  EXPECT_NO_THROW(tail = source("team-a", "p-0", "pytorch"));
  EXPECT_EQ(tail, std::nullopt);
}

}  // namespace
}  // namespace ncclguard::test
