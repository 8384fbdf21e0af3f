// The `ncclguard probe --publish` process as the DaemonSet runs it: --once against the real API
// server, SIGTERM while waiting and while retrying, JSON logs, its /metrics; and the publisher
// against a server that answers 403 and 409 (the real one cannot be made to on demand).
#include <arpa/inet.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cctype>
#include <chrono>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "controlplane_env.h"
#include "core/json.h"
#include "kube/client.h"
#include "manifests.h"
#include "metrics/registry.h"
#include "probes/publisher.h"
#include "test_https_server.h"
#include "test_kube_client.h"
#include "tests/common/loopback_port.h"
#include "tests/metrics_sample.h"
#include "tests/unit/probes/probe_test_support.h"
#include "tests/unit/test_support.h"

namespace ncclguard::testenv {
namespace {

using namespace std::chrono_literals;
using core::Json;

std::string ReadAll(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// `ncclguard` started in the background, stderr captured to a file.
class Background {
 public:
  explicit Background(const std::vector<std::string>& args) {
    stderr_path_ = MakeTempDir("ncclguard-probe-publish") + "/stderr";
    pid_ = fork();
    if (pid_ == 0) {
      const int err = open(stderr_path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
      dup2(err, 2);
      const int null = open("/dev/null", O_RDWR);
      dup2(null, 0);
      dup2(null, 1);
      std::vector<char*> argv;
      std::string binary = NCCLGUARD_BINARY;
      argv.push_back(binary.data());
      std::vector<std::string> copy = args;
      for (std::string& arg : copy) argv.push_back(arg.data());
      argv.push_back(nullptr);
      execv(binary.c_str(), argv.data());
      _exit(127);
    }
  }
  ~Background() {
    if (pid_ > 0 && !exited_) {
      kill(pid_, SIGKILL);
      waitpid(pid_, nullptr, 0);
    }
  }
  std::string Stderr() const { return ReadAll(stderr_path_); }
  // The exit status after SIGTERM, or -1 if it did not exit within `limit`.
  int TerminateWithin(std::chrono::milliseconds limit) {
    kill(pid_, SIGTERM);
    const auto deadline = std::chrono::steady_clock::now() + limit;
    while (std::chrono::steady_clock::now() < deadline) {
      int status = 0;
      if (waitpid(pid_, &status, WNOHANG) == pid_) {
        exited_ = true;
        return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
      }
      std::this_thread::sleep_for(20ms);
    }
    return -1;
  }

 private:
  pid_t pid_ = -1;
  bool exited_ = false;
  std::string stderr_path_;
};

bool Contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

class ProbePublishCommandTest : public ::testing::Test {
 protected:
  void SetUp() override {
    info_ = ControlPlaneEnvironment::Info();
    admin_ = std::make_unique<TestKubeClient>(info_);
    ApplyCrds(*admin_, SourceDir() + "/crds/nodevalidation.yaml");
    node_ = "cli-node-" + std::to_string(getpid()) + "-" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name();
    for (char& c : node_) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    const KubeResponse created =
        admin_->Post("/api/v1/nodes",
                     Json{{"apiVersion", "v1"}, {"kind", "Node"}, {"metadata", {{"name", node_}}}});
    ASSERT_EQ(created.status, 201) << created.body;
  }
  void TearDown() override {
    admin_->Delete("/api/v1/nodes/" + node_);
    admin_->Delete("/apis/ncclguard.io/v1alpha1/nodevalidations/" + node_);
  }

  std::vector<std::string> Args(const std::string& tree, const std::string& check) const {
    return {"probe",           "--publish",   "--kubeconfig", info_.kubeconfig,
            "--node-name",     node_,         "--host-root",  test::FixturePath(tree),
            "--instance-type", "p5.48xlarge", "--check",      check};
  }
  Json Node() { return admin_->Get("/api/v1/nodes/" + node_).Json(); }
  KubeResponse Validation() {
    return admin_->Get("/apis/ncclguard.io/v1alpha1/nodevalidations/" + node_);
  }

  ControlPlaneInfo info_;
  std::unique_ptr<TestKubeClient> admin_;
  std::string node_;
};

Json ReadyCondition(const Json& node) {
  const Json conditions = node.value("status", Json::object()).value("conditions", Json::array());
  for (const Json& condition : conditions)
    if (condition.value("type", "") == "NcclReady") return condition;
  return nullptr;
}

TEST_F(ProbePublishCommandTest, OncePublishesAndExitsWithTheVerdict) {
  // memlock-limit reads only host files: unlimited in p5-32efa.
  std::vector<std::string> pass = Args("p5-32efa", "memlock-limit");
  pass.push_back("--once");
  const test::CommandResult passed = test::RunCli(pass);
  EXPECT_EQ(passed.exit_code, 0) << passed.err;
  EXPECT_TRUE(Contains(passed.err, R"("level":"info","msg":"published node validation")"))
      << passed.err;
  const Json validation = Validation().Json();
  EXPECT_EQ(validation["status"]["summary"], "Pass");
  ASSERT_EQ(validation["status"]["checks"].size(), 1u);
  EXPECT_EQ(validation["status"]["checks"][0]["id"], "memlock-limit");
  EXPECT_EQ(Node()["metadata"]["labels"]["ncclguard.io/validated"], "true");
  EXPECT_EQ(ReadyCondition(Node())["status"], "True");

  // p5-30efa has 30 EFA devices in sysfs: efa-device-count fails whatever libfabric says.
  std::vector<std::string> fail = Args("p5-30efa", "efa-device-count");
  fail.push_back("--once");
  const test::CommandResult failed = test::RunCli(fail);
  EXPECT_EQ(failed.exit_code, 1) << failed.err;
  EXPECT_EQ(Validation().Json()["status"]["summary"], "Fail");
  EXPECT_EQ(Node()["metadata"]["labels"]["ncclguard.io/validated"], "false");
  EXPECT_EQ(ReadyCondition(Node())["status"], "False");
}

// The body of GET `path` on 127.0.0.1:`port` over plain HTTP ("" when nothing answered 200).
std::string PlainHttpGet(int port, const std::string& path) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(static_cast<std::uint16_t>(port));
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  std::string response;
  if (::connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof address) == 0) {
    const std::string request =
        "GET " + path + " HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n";
    if (::send(fd, request.data(), request.size(), 0) == static_cast<ssize_t>(request.size())) {
      char buffer[4096];
      for (ssize_t n; (n = ::recv(fd, buffer, sizeof buffer, 0)) > 0;)
        response.append(buffer, static_cast<std::size_t>(n));
    }
  }
  ::close(fd);
  const std::size_t body = response.find("\r\n\r\n");
  if (!response.starts_with("HTTP/1.1 200") || body == std::string::npos) return "";
  return response.substr(body + 4);
}

TEST_F(ProbePublishCommandTest, SigtermWhileWaitingForTheNextRunExitsZeroPromptly) {
  std::vector<std::string> args = Args("p5-32efa", "memlock-limit");
  for (const char* extra : {"--interval", "1h", "--request-poll", "200ms"}) args.push_back(extra);
  // Its metrics, scraped once the run is published (the port may be taken meanwhile: rare, and
  // then the probe exits 2 saying so).
  const int metrics_port = test::FreeLoopbackPort();
  args.push_back("--metrics-listen=127.0.0.1:" + std::to_string(metrics_port));
  Background probe(args);
  ASSERT_TRUE(Eventually(
      [&] {
        const KubeResponse validation = Validation();
        return validation.status == 200 && validation.Json().contains("status");
      },
      30s))
      << probe.Stderr();
  // The counter goes up just after the last write the condition above sees.
  std::string scraped;
  EXPECT_TRUE(Eventually(
      [&] {
        scraped = PlainHttpGet(metrics_port, "/metrics");
        return Contains(scraped, "ncclguard_probe_runs_total{result=\"published\"} 1\n");
      },
      10s))
      << scraped << probe.Stderr();
  EXPECT_TRUE(Contains(scraped,
                       "ncclguard_probe_check_status{check=\"memlock-limit\",status=\"Pass\"} 1\n"))
      << scraped;
  EXPECT_TRUE(Contains(scraped, R"(ncclguard_probe_node_info{instance_type="p5.48xlarge",node=")" +
                                    node_ + "\"} 1\n"))
      << scraped;
  EXPECT_TRUE(Contains(scraped, R"(ncclguard_probe_check_duration_seconds{check="memlock-limit"})"))
      << scraped;
  EXPECT_TRUE(Contains(scraped, "ncclguard_probe_runs_total{result=\"failed\"} 0\n")) << scraped;
  EXPECT_TRUE(Contains(scraped, "ncclguard_build_info{version=")) << scraped;
  // What jemalloc holds, beside the RSS: the program's objects fit in the pages resident.
  const double allocated =
      testing::MetricSample(scraped, R"(ncclguard_allocator_bytes{state="allocated"})")
          .value_or(-1);
  const double resident =
      testing::MetricSample(scraped, R"(ncclguard_allocator_bytes{state="resident"})").value_or(-1);
  EXPECT_GT(allocated, 0) << scraped;
  EXPECT_LE(allocated, resident) << scraped;
  EXPECT_EQ(PlainHttpGet(metrics_port, "/healthz"), "ok\n");
  EXPECT_EQ(probe.TerminateWithin(5s), 0) << probe.Stderr();
  EXPECT_TRUE(Contains(probe.Stderr(), "received SIGTERM")) << probe.Stderr();
}

TEST_F(ProbePublishCommandTest, AnUnreachableApiServerIsRetriedAndSigtermStillExitsZero) {
  // The same credentials pointed at a port nobody listens on.
  std::string kubeconfig = ReadAll(info_.kubeconfig);
  const std::string url = info_.apiserver_url;
  kubeconfig.replace(kubeconfig.find(url), url.size(), "https://127.0.0.1:1");
  const std::string path = MakeTempDir("ncclguard-probe-publish") + "/kubeconfig";
  std::ofstream(path) << kubeconfig;
  std::vector<std::string> args = Args("p5-32efa", "memlock-limit");
  args[3] = path;
  Background probe(args);
  ASSERT_TRUE(Eventually(
      [&] {
        const std::string err = probe.Stderr();
        return err.find("publishing failed; retrying") != err.rfind("publishing failed; retrying");
      },
      30s))
      << probe.Stderr();
  EXPECT_TRUE(Contains(probe.Stderr(), R"("code":"Transport")")) << probe.Stderr();
  EXPECT_EQ(probe.TerminateWithin(5s), 0) << probe.Stderr();
}

// A server that refuses (403), reports a conflict (409), answers garbage, then accepts everything.
TEST(ProbePublishFaults, ForbiddenConflictAndGarbageAreRetriedUntilTheyPass) {
  std::atomic<int> requests{0};
  TestHttpsServer server([&](const HttpRequest&) {
    HttpResponse response;
    const int n = ++requests;
    if (n <= 3) {  // the first is the best-effort read of the request annotation
      response.status = 403;
      response.body =
          R"({"kind":"Status","apiVersion":"v1","status":"Failure","reason":"Forbidden","code":403,)"
          R"("message":"nodevalidations.ncclguard.io \"n1\" is forbidden: no RBAC"})";
    } else if (n == 4) {
      response.status = 409;
      response.body =
          R"({"kind":"Status","apiVersion":"v1","status":"Failure","reason":"Conflict","code":409,)"
          R"("message":"the object has been modified"})";
    } else if (n == 5) {
      response.body = R"({"apiVersion":"v1","kind":"Node","metadata":{"name":)";  // cut short
    } else {
      response.body = R"({"apiVersion":"v1","kind":"Node","metadata":{"name":"n1"}})";
    }
    return response;
  });
  kube::ClientConfig config;
  config.server = server.Url("");
  while (config.server.ends_with('/')) config.server.pop_back();
  config.ca_data = server.ca_pem();
  probes::PublisherOptions options;
  options.node_name = "n1";
  options.retry = {20ms, 100ms, 2.0, 0.5};
  prometheus::Registry registry;
  options.metrics = std::make_shared<probes::ProbeMetrics>(registry);
  probes::NodePublisher publisher(
      std::make_shared<kube::Client>(config),
      [] {
        auto sources = std::make_shared<test::FakeFactSources>();
        sources->fabric = test::EfaFabric(32);
        sources->gpu = test::HealthyGpus();
        return test::RunFixture({"p5-32efa", "p5.48xlarge", "n1"}, sources);
      },
      options);
  kube::StopToken stop;
  const auto report = publisher.RunOnce(stop);
  ASSERT_TRUE(report.has_value());
  const probes::PublisherStats stats = publisher.stats();
  EXPECT_EQ(stats.publish_failures, 4);
  EXPECT_EQ(stats.publishes, 1);
  // One run, its report written at the fifth attempt: each attempt counted by result.
  const std::string scraped = metrics::Render(registry);
  EXPECT_TRUE(Contains(scraped, "ncclguard_probe_runs_total{result=\"failed\"} 4\n")) << scraped;
  EXPECT_TRUE(Contains(scraped, "ncclguard_probe_runs_total{result=\"published\"} 1\n")) << scraped;
  EXPECT_TRUE(
      Contains(scraped, R"(ncclguard_probe_node_info{instance_type="p5.48xlarge",node="n1"} 1)"))
      << scraped;
}

}  // namespace
}  // namespace ncclguard::testenv
