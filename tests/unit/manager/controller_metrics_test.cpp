// What the controller process counts as it works, in a registry of the test's own: a controller's
// reconciles by result (a local HTTP answerer plays the API server: 409 for one key, 404 for
// another), its work queue, the requests its client sent, an informer's watch restarts, and the
// manager's own families before anything happened.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <functional>
#include <map>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>

#include "kube/informer.h"
#include "manager/controller.h"
#include "manager/metrics.h"
#include "metrics/registry.h"
#include "tests/metrics_sample.h"

namespace ncclguard::test {
namespace {

using namespace std::chrono_literals;

struct CannedAnswer {
  int status = 200;
  std::string body = "{}";
};

// An HTTP/1.1 server on 127.0.0.1 answering each request (one per connection) with what
// `answer(method, target)` says.
class CannedHttpServer {
 public:
  using Answer = std::function<CannedAnswer(const std::string& method, const std::string& target)>;

  explicit CannedHttpServer(Answer answer) : answer_(std::move(answer)) {
    listener_ = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (::bind(listener_, reinterpret_cast<sockaddr*>(&address), sizeof address) != 0 ||
        ::listen(listener_, 16) != 0) {
      ::close(listener_);
      throw std::runtime_error("cannot listen on 127.0.0.1");
    }
    socklen_t length = sizeof address;
    ::getsockname(listener_, reinterpret_cast<sockaddr*>(&address), &length);
    port_ = ntohs(address.sin_port);
    thread_ = std::thread([this] { Serve(); });
  }
  ~CannedHttpServer() {
    stopping_ = true;
    ::shutdown(listener_, SHUT_RDWR);
    thread_.join();
    ::close(listener_);
  }
  std::string url() const { return "http://127.0.0.1:" + std::to_string(port_); }

 private:
  void Serve() {
    while (!stopping_) {
      const int fd = ::accept(listener_, nullptr, nullptr);
      if (fd < 0) continue;
      std::string request;
      char buffer[4096];
      std::size_t body_at = std::string::npos;
      std::size_t length = 0;
      for (ssize_t n; (n = ::recv(fd, buffer, sizeof buffer, 0)) > 0;) {
        request.append(buffer, static_cast<std::size_t>(n));
        if (body_at == std::string::npos && (body_at = request.find("\r\n\r\n")) != request.npos) {
          body_at += 4;
          const auto header = request.find("Content-Length: ");
          if (header != std::string::npos && header < body_at) {
            length = std::stoul(request.substr(header + 16));
          }
        }
        if (body_at != std::string::npos && request.size() >= body_at + length) break;
      }
      const auto space = request.find(' ');
      const auto target_end = request.find(' ', space + 1);
      const CannedAnswer answer = space == std::string::npos || target_end == std::string::npos
                                      ? CannedAnswer{400, "{}"}
                                      : answer_(request.substr(0, space),
                                                request.substr(space + 1, target_end - space - 1));
      const std::string response = "HTTP/1.1 " + std::to_string(answer.status) +
                                   " Canned\r\nContent-Type: application/json\r\nContent-Length: " +
                                   std::to_string(answer.body.size()) +
                                   "\r\nConnection: close\r\n\r\n" + answer.body;
      ::send(fd, response.data(), response.size(), MSG_NOSIGNAL);
      ::close(fd);
    }
  }

  Answer answer_;
  int listener_ = -1;
  int port_ = 0;
  std::atomic<bool> stopping_{false};
  std::thread thread_;
};

CannedAnswer StatusAnswer(int code, const std::string& reason) {
  return {code, R"({"kind":"Status","apiVersion":"v1","status":"Failure","reason":")" + reason +
                    R"(","code":)" + std::to_string(code) + "}"};
}

// The value of the sample line `series` in the exposition (-1 when absent).
double Sample(const std::string& text, const std::string& series) {
  return ncclguard::testing::MetricSample(text, series).value_or(-1);
}

bool Within(std::chrono::milliseconds limit, const std::function<bool()>& done) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  while (!done()) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(10ms);
  }
  return true;
}

controllers::MergePatch PatchOf(const std::string& name) {
  return {core::ObjectRef{.api_version = "v1",
                          .kind = "ConfigMap",
                          .namespace_ = "ns",
                          .name = name,
                          .uid = "",
                          .resource = "configmaps"},
          false,
          {{"data", {{"a", "b"}}}}};
}

TEST(ControllerMetrics, ReconcilesAreCountedByResultAndTheQueueAndRequestsBeside) {
  CannedHttpServer server([](const std::string& method, const std::string& target) {
    if (method == "PATCH" && target.find("/conflict") != std::string::npos) {
      return StatusAnswer(409, "Conflict");
    }
    if (method == "PATCH" && target.find("/gone") != std::string::npos) {
      return StatusAnswer(404, "NotFound");
    }
    return CannedAnswer{};
  });
  prometheus::Registry registry;
  manager::Metrics metrics(registry);
  kube::ClientConfig config;
  config.server = server.url();
  kube::ClientOptions client_options;
  client_options.metrics = &metrics.kube();
  auto client = std::make_shared<kube::Client>(config, client_options);
  manager::Executor executor(client, std::make_shared<kube::EventRecorder>(client, "c", "i"));

  std::mutex mutex;
  std::map<std::string, int> applied;  // by key: the observer's function ran
  manager::Controller::Spec spec;
  spec.name = "metrics-test";
  spec.workers = 2;
  spec.all_keys = [] {
    return std::vector<std::string>{"ok", "later", "conflict", "gone", "boom", "patched"};
  };
  spec.reconcile = [](const std::string& key) -> std::optional<controllers::ReconcileResult> {
    controllers::ReconcileResult result;
    if (key == "later") result.requeue_after = std::chrono::hours(1);
    if (key == "conflict" || key == "gone" || key == "patched") {
      result.actions.push_back(PatchOf(key));
    }
    if (key == "boom") throw std::runtime_error("a reply the client could not read");
    return result;
  };
  std::map<std::string, int> partly;  // told of fewer actions applied than the reconcile had
  spec.observe = [&](const std::string& key, const controllers::ReconcileResult& result) {
    return manager::Applied([&, key, size = result.actions.size()](std::size_t count) {
      std::lock_guard lock(mutex);
      ++(count == size ? applied : partly)[key];
    });
  };
  manager::Controller controller(std::move(spec), executor, 1s, metrics);
  const std::string result = R"(ncclguard_controller_reconcile_total{controller="metrics-test",)";
  const auto count = [&](const std::string& which) {
    return Sample(metrics::Render(registry), result + "result=\"" + which + "\"}");
  };
  kube::StopToken leading;
  std::thread running([&] { controller.Run(leading); });
  // The conflict and the failure are retried with backoff (5 ms doubling): a second try each.
  const bool counted = Within(10s, [&] {
    return count("success") == 3 && count("requeue_after") == 1 && count("requeue") >= 2 &&
           count("error") >= 2;
  });
  leading.Stop();
  running.join();
  ASSERT_TRUE(counted) << metrics::Render(registry);

  const std::string text = metrics::Render(registry);
  const double errors =
      Sample(text, R"(ncclguard_controller_reconcile_errors_total{controller="metrics-test"})");
  EXPECT_EQ(errors, Sample(text, result + R"(result="error"})"));
  EXPECT_EQ(
      Sample(text,
             R"(ncclguard_controller_reconcile_time_seconds_count{controller="metrics-test"})"),
      count("success") + count("requeue_after") + count("requeue") + count("error"));
  EXPECT_GE(Sample(text, R"(ncclguard_workqueue_adds_total{name="metrics-test"})"), 6);
  EXPECT_GE(Sample(text, R"(ncclguard_workqueue_retries_total{name="metrics-test"})"), 4);
  EXPECT_GE(Sample(text, R"(ncclguard_workqueue_work_duration_seconds_count{name="metrics-test"})"),
            6);
  EXPECT_EQ(Sample(text, R"(ncclguard_workqueue_depth{name="metrics-test"})"), 0);
  EXPECT_EQ(Sample(text, R"(ncclguard_rest_client_requests_total{code="200",method="PATCH"})"), 1);
  EXPECT_EQ(Sample(text, R"(ncclguard_rest_client_requests_total{code="404",method="PATCH"})"), 1);
  EXPECT_GE(Sample(text, R"(ncclguard_rest_client_requests_total{code="409",method="PATCH"})"), 2);
  // What the controller counts of a reconcile happens once its actions were sent, with how many
  // were applied: none of the conflicting or missing one's (their one patch failed), so it is
  // not told of them at all.
  std::lock_guard lock(mutex);
  EXPECT_EQ(applied, (std::map<std::string, int>{{"patched", 1}}));
  EXPECT_TRUE(partly.empty());
}

TEST(ControllerMetrics, AnInformerCountsWhyItsWatchStartedAgain) {
  std::atomic<int> watches{0};
  CannedHttpServer server([&watches](const std::string&, const std::string& target) {
    if (target.find("watch=true") == std::string::npos) {
      return CannedAnswer{200,
                          R"({"kind":"PodList","metadata":{"resourceVersion":"7"},"items":[]})"};
    }
    // The first watch finds its resourceVersion compacted away; the next ones end at once.
    return watches++ == 0 ? StatusAnswer(410, "Expired") : CannedAnswer{200, ""};
  });
  prometheus::Registry registry;
  kube::Metrics metrics(registry);
  kube::ClientConfig config;
  config.server = server.url();
  kube::ClientOptions client_options;
  client_options.metrics = &metrics;
  kube::InformerOptions options;
  options.resource = kube::resources::Pods();
  options.backoff = {1ms, 5ms, 2.0, 0.0};
  kube::Informer informer(std::make_shared<kube::Client>(config, client_options), options);
  informer.Start();
  const auto restarts = [&](const std::string& reason) {
    return Sample(metrics::Render(registry),
                  R"(ncclguard_watch_restarts_total{reason=")" + reason + R"(",resource="pods"})");
  };
  const bool counted =
      Within(10s, [&] { return restarts("expired") == 1 && restarts("closed") >= 1; });
  informer.Stop();
  EXPECT_TRUE(counted) << metrics::Render(registry);
  EXPECT_EQ(restarts("error"), 0);  // there from the start, never counted
  EXPECT_GE(Sample(metrics::Render(registry),
                   R"(ncclguard_rest_client_requests_total{code="410",method="GET"})"),
            1);
}

TEST(ControllerMetrics, EveryKindDiagnosisAndResultStartsAtZeroAndTheCaOnlyOnceKnown) {
  prometheus::Registry registry;
  manager::Metrics metrics(registry);
  metrics.Controller("trainingjob");
  std::string text = metrics::Render(registry);
  EXPECT_EQ(Sample(text, R"(ncclguard_gate_releases_total{kind="PyTorchJob"})"), 0);
  EXPECT_EQ(Sample(text, R"(ncclguard_gate_releases_total{kind="TrainJob"})"), 0);
  EXPECT_EQ(Sample(text, R"(ncclguard_diagnoses_total{diagnosis="efa-tcp-fallback"})"), 0);
  EXPECT_EQ(Sample(text, R"(ncclguard_job_transports_total{transport="Socket"})"), 0);
  EXPECT_EQ(Sample(text, R"(ncclguard_pod_log_reads_total{result="rate_limited"})"), 0);
  EXPECT_EQ(
      Sample(
          text,
          R"(ncclguard_controller_reconcile_total{controller="trainingjob",result="requeue_after"})"),
      0);
  EXPECT_EQ(text.find("ncclguard_webhook_ca_expiry_timestamp_seconds "), std::string::npos);

  metrics.CountRelease(core::WorkloadKind::PyTorchJob, 90.0);
  metrics.CountRelease(core::WorkloadKind::PyTorchJob, std::nullopt);
  metrics.CountDiagnosis("efa-tcp-fallback");
  metrics.CountDiagnosis("no-such-diagnosis");  // not registered: no series made for it
  metrics.CountTransport("Socket");
  metrics.SetWebhookCaExpiry(1900000000);
  text = metrics::Render(registry);
  EXPECT_EQ(Sample(text, R"(ncclguard_gate_releases_total{kind="PyTorchJob"})"), 2);
  EXPECT_EQ(Sample(text, R"(ncclguard_gate_hold_duration_seconds_count{kind="PyTorchJob"})"), 1);
  EXPECT_EQ(
      Sample(text, R"(ncclguard_gate_hold_duration_seconds_bucket{kind="PyTorchJob",le="60"})"), 0);
  EXPECT_EQ(
      Sample(text, R"(ncclguard_gate_hold_duration_seconds_bucket{kind="PyTorchJob",le="120"})"),
      1);
  EXPECT_EQ(
      Sample(text, R"(ncclguard_gate_hold_duration_seconds_bucket{kind="PyTorchJob",le="86400"})"),
      1);
  EXPECT_EQ(Sample(text, R"(ncclguard_diagnoses_total{diagnosis="efa-tcp-fallback"})"), 1);
  EXPECT_EQ(text.find("no-such-diagnosis"), std::string::npos);
  EXPECT_EQ(Sample(text, R"(ncclguard_job_transports_total{transport="Socket"})"), 1);
  EXPECT_EQ(Sample(text, "ncclguard_webhook_ca_expiry_timestamp_seconds"), 1900000000);
}

}  // namespace
}  // namespace ncclguard::test
