// Self-managed webhook certificates against the real kube-apiserver: the controller's
// certificate manager (manager/webhook_cert_manager.h) and webhook server run in this
// process as `ncclguard controller --webhook-cert-secret` runs them; the API server calls the
// webhook through configurations whose caBundle only the manager fills in.
#include <curl/curl.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include "tests/metrics_sample.h"

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <ctime>
#include <fstream>
#include <functional>
#include <memory>
#include <mutex>
#include <set>
#include <sstream>
#include <thread>

#include "controlplane_env.h"
#include "https_client.h"
#include "kube/config.h"
#include "kube/owner_reference.h"
#include "manager/webhook_cert_manager.h"
#include "manifests.h"
#include "served_webhook.h"
#include "test_kube_client.h"
#include "webhook/server.h"
#include "webhook_registration.h"

namespace ncclguard::testenv {
namespace {

using nlohmann::json;
using std::chrono::milliseconds;
using std::chrono::seconds;

constexpr const char* kSecret = "ncclguard-webhook-certs";
constexpr const char* kConfiguration = "ncclguard";

json BarePod(const std::string& name) {
  return json::parse(R"({"apiVersion":"v1","kind":"Pod","metadata":{"name":")" + name +
                     R"("},"spec":{
    "nodeSelector":{"node.kubernetes.io/instance-type":"p5.48xlarge"},
    "containers":[{"name":"pytorch","image":"registry.example/train:1.0",
      "resources":{"limits":{"nvidia.com/gpu":"8","memory":"1000Gi"}}}]}})");
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

// `ncclguard controller ARGS` in the background, stderr to a file; SIGTERM ends it.
class ControllerProcess {
 public:
  explicit ControllerProcess(const std::vector<std::string>& args)
      : log_(MakeTempDir("controller") + "/stderr.log") {
    std::vector<std::string> argv = {NCCLGUARD_BINARY, "controller"};
    argv.insert(argv.end(), args.begin(), args.end());
    pid_ = ::fork();
    if (pid_ == 0) {
      const int fd = ::open(log_.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
      ::dup2(fd, 2);
      std::vector<char*> raw;
      for (std::string& arg : argv) raw.push_back(arg.data());
      raw.push_back(nullptr);
      ::execv(raw[0], raw.data());
      ::_exit(127);
    }
  }
  ~ControllerProcess() {
    if (pid_ > 0) Stop();
  }
  // SIGTERM and the exit status (-1: killed by a signal).
  int Stop() {
    ::kill(pid_, SIGTERM);
    int status = 0;
    ::waitpid(pid_, &status, 0);
    pid_ = -1;
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  }
  std::string Log() const { return ReadFile(log_); }

 private:
  std::string log_;
  pid_t pid_ = -1;
};

// The body of a GET ("" when nothing answered).
std::string HttpBody(const std::string& url) {
  CURL* curl = curl_easy_init();
  std::string body;
  curl_easy_setopt(curl, CURLOPT_URL, url.c_str());
  curl_easy_setopt(curl, CURLOPT_TIMEOUT_MS, 2000L);
  curl_easy_setopt(
      curl, CURLOPT_WRITEFUNCTION, +[](char* data, size_t size, size_t count, void* out) {
        static_cast<std::string*>(out)->append(data, size * count);
        return size * count;
      });
  curl_easy_setopt(curl, CURLOPT_WRITEDATA, &body);
  if (curl_easy_perform(curl) != CURLE_OK) body.clear();
  curl_easy_cleanup(curl);
  return body;
}

// The value of the sample `series` in a metrics exposition (-1 when absent).
double Sample(const std::string& text, const std::string& series) {
  return ncclguard::testing::MetricSample(text, series).value_or(-1);
}

long HttpStatus(const std::string& url) {
  CURL* curl = curl_easy_init();
  curl_easy_setopt(curl, CURLOPT_URL, url.c_str());
  curl_easy_setopt(curl, CURLOPT_NOBODY, 0L);
  curl_easy_setopt(curl, CURLOPT_TIMEOUT_MS, 2000L);
  curl_easy_setopt(
      curl, CURLOPT_WRITEFUNCTION,
      +[](char*, size_t size, size_t count, void*) { return size * count; });
  long status = 0;
  if (curl_easy_perform(curl) == CURLE_OK) curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &status);
  curl_easy_cleanup(curl);
  return status;
}

// `ncclguard controller --webhook-cert-secret` minus the reconcilers: the certificate manager
// on its own thread and the webhook server started once the certificate is written.
class ControllerWebhook {
 public:
  ControllerWebhook(const ControlPlaneInfo& info, manager::WebhookCertOptions options)
      : port_(webhook::testing::FreePort()) {
    options.cert_dir = MakeTempDir("certs");
    options.files_written = [this] {
      if (server_) server_->ReloadCertificateNow();
    };
    certs_ = std::make_unique<manager::WebhookCertManager>(
        kube::Client(kube::LoadKubeConfigFile(info.kubeconfig)), std::move(options));
    // As RunController does it: listen at once with a placeholder, ready once the Secret's
    // certificate is written.
    certs_->WritePlaceholderIfMissing();
    webhook::ServerConfig config;
    config.listen = "127.0.0.1:" + std::to_string(port_);
    config.tls_cert_file = certs_->cert_file();
    config.tls_key_file = certs_->key_file();
    config.ready_gate = [this] { return certs_->CertificateReady(); };
    server_ = std::make_unique<webhook::WebhookServer>(std::move(config));
    server_->Start();
    placeholder_ready_ = server_->Ready();
    thread_ = std::thread([this] { certs_->Run(stop_); });
    if (!Eventually([this] { return server_->Ready(); }, seconds(30))) {
      throw std::runtime_error("no serving certificate within 30 s");
    }
  }
  ~ControllerWebhook() {
    stop_.Stop();
    thread_.join();
    server_->Shutdown();
  }

  int port() const { return port_; }
  manager::WebhookCertManager& certs() { return *certs_; }
  // Whether the server was ready while it served the placeholder (it must not be).
  bool placeholder_ready() const { return placeholder_ready_; }

 private:
  int port_;
  kube::StopToken stop_;
  std::unique_ptr<manager::WebhookCertManager> certs_;
  std::thread thread_;
  std::unique_ptr<webhook::WebhookServer> server_;
  bool placeholder_ready_ = true;
};

class WebhookCertsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    info_ = ControlPlaneEnvironment::Info();
    admin_ = std::make_unique<TestKubeClient>(info_);
    system_ = CreateTestNamespace(*admin_, "ncclguard-system");
    jobs_ = CreateTestNamespace(*admin_, "jobs", {{"ncclguard-cert-test", system_}});
  }
  void TearDown() override {
    registrations_.clear();
    for (const std::string& ns : {jobs_, system_}) {
      if (!ns.empty()) admin_->Delete("/api/v1/namespaces/" + ns);
    }
  }

  manager::WebhookCertOptions Options() const {
    manager::WebhookCertOptions options;
    options.namespace_ = system_;
    options.secret_name = kSecret;
    options.configuration_name = kConfiguration;
    options.extra_hosts = {"127.0.0.1"};
    options.sync_interval = milliseconds(500);
    options.retry_interval = milliseconds(500);
    return options;
  }

  // Both configurations named `ncclguard`, pointing at `port`, with an empty caBundle; with
  // `jobs`, the mutating one also gets the CREATE of batch Jobs.
  void Register(int port, bool jobs = false) {
    for (WebhookKind kind : {WebhookKind::Mutating, WebhookKind::Validating}) {
      WebhookSpec spec;
      spec.kind = kind;
      if (jobs && kind == WebhookKind::Mutating) {
        spec.rules.push_back({{"apiGroups", {"batch"}},
                              {"apiVersions", {"v1"}},
                              {"operations", {"CREATE"}},
                              {"resources", {"jobs"}}});
      }
      spec.name = kConfiguration;
      spec.url = "https://127.0.0.1:" + std::to_string(port) +
                 (kind == WebhookKind::Mutating ? "/mutate" : "/validate");
      spec.namespace_selector = {{"matchLabels", {{"ncclguard-cert-test", system_}}}};
      spec.failure_policy = "Fail";
      registrations_.push_back(std::make_unique<WebhookRegistration>(*admin_, spec));
    }
  }

  std::map<std::string, std::string> SecretData() {
    KubeResponse response = admin_->Get("/api/v1/namespaces/" + system_ + "/secrets/" + kSecret);
    std::map<std::string, std::string> data;
    if (response.status != 200) return data;
    const json secret = response.Json();
    const json encoded = secret.value("data", json::object());
    for (const auto& [key, value] : encoded.items()) {
      data[key] = kube::DecodeBase64(value.get<std::string>(), key);
    }
    return data;
  }

  std::string CaBundleOf(const std::string& resource) {
    KubeResponse response =
        admin_->Get("/apis/admissionregistration.k8s.io/v1/" + resource + "/" + kConfiguration);
    if (response.status != 200) return "";
    return response.Json()["webhooks"][0]["clientConfig"].value("caBundle", "");
  }

  bool BundlePublished() {
    auto data = SecretData();
    if (!data.contains("ca.crt")) return false;
    const std::string expected = Base64(data.at("ca.crt"));
    return CaBundleOf("mutatingwebhookconfigurations") == expected &&
           CaBundleOf("validatingwebhookconfigurations") == expected;
  }

  // A pod the API server sends through our webhook: admitted and fixed (EFA added).
  bool PodMutated(const std::string& name, bool dry_run = true, std::string* why = nullptr) {
    return PodMutatedBy(*admin_, name, dry_run, why);
  }
  bool PodMutatedBy(TestKubeClient& client, const std::string& name, bool dry_run = true,
                    std::string* why = nullptr) {
    KubeResponse response = client.Post(
        "/api/v1/namespaces/" + jobs_ + "/pods" + (dry_run ? "?dryRun=All" : ""), BarePod(name));
    if (response.status != 201) {
      if (why != nullptr) *why = std::to_string(response.status) + " " + response.body;
      return false;
    }
    if (response.Json()["spec"]["containers"][0]["resources"]["limits"].contains(
            "vpc.amazonaws.com/efa")) {
      return true;
    }
    if (why != nullptr) *why = "admitted but not mutated";
    return false;
  }

  ControlPlaneInfo info_;
  std::unique_ptr<TestKubeClient> admin_;
  std::string system_;
  std::string jobs_;
  std::vector<std::unique_ptr<WebhookRegistration>> registrations_;
};

TEST_F(WebhookCertsTest, SecretCreatedBundlePatchedAndTheApiServerTrustsTheWebhook) {
  auto first = std::make_unique<ControllerWebhook>(info_, Options());
  EXPECT_FALSE(first->placeholder_ready()) << "ready before the Secret's certificate was written";
  Register(first->port());

  const auto data = SecretData();
  for (const char* key : {"tls.crt", "tls.key", "ca.crt", "ca.key"}) {
    EXPECT_TRUE(data.contains(key)) << key;
  }
  KubeResponse secret = admin_->Get("/api/v1/namespaces/" + system_ + "/secrets/" + kSecret);
  EXPECT_EQ(secret.Json().value("type", ""), "kubernetes.io/tls");
  const std::string resource_version = secret.Json()["metadata"].value("resourceVersion", "");

  // The configurations existed only after the manager started: a later pass fills them in.
  ASSERT_TRUE(Eventually([&] { return BundlePublished(); }, seconds(20)));
  std::string why;
  ASSERT_TRUE(Eventually([&] { return PodMutated("probe", true, &why); }, seconds(30)))
      << "kube-apiserver never reached the webhook: " << why;
  EXPECT_TRUE(PodMutated("stored", /*dry_run=*/false, &why)) << why;

  // The key file is the process's alone; the files are what the Secret holds.
  struct stat info {};
  ASSERT_EQ(::stat(first->certs().key_file().c_str(), &info), 0);
  EXPECT_EQ(info.st_mode & 0777, 0600u);
  EXPECT_EQ(ReadFile(first->certs().cert_file()), data.at("tls.crt"));

  // A second replica finds the Secret and serves the same certificate, valid for its address.
  ControllerWebhook second(info_, Options());
  EXPECT_EQ(ReadFile(second.certs().cert_file()), data.at("tls.crt"));
  EXPECT_EQ(ReadFile(second.certs().key_file()), data.at("tls.key"));
  const std::string bundle_file = MakeTempDir("bundle") + "/ca.crt";
  std::ofstream(bundle_file) << data.at("ca.crt");
  webhook::testing::CurlOptions get;
  get.method = "GET";
  const auto ready = webhook::testing::Fetch(
      "https://127.0.0.1:" + std::to_string(second.port()) + "/readyz", bundle_file, "", get);
  EXPECT_EQ(ready.status, 200) << ready.error;
  std::this_thread::sleep_for(seconds(1));  // two sync passes of each replica
  EXPECT_EQ(admin_->Get("/api/v1/namespaces/" + system_ + "/secrets/" + kSecret)
                .Json()["metadata"]
                .value("resourceVersion", ""),
            resource_version)
      << "a replica rewrote a valid Secret";
}

// Pods created through the webhook at a steady rate from several clients of their own until
// stopped: what the API server sends while certificates rotate (issue 17: 100 pods/s).
class AdmissionLoad {
 public:
  AdmissionLoad(int per_second, int threads,
                const std::function<bool(TestKubeClient&, std::string*)>& admit,
                const ControlPlaneInfo& info) {
    const auto interval = std::chrono::duration_cast<std::chrono::steady_clock::duration>(
        std::chrono::duration<double>(static_cast<double>(threads) / per_second));
    began_ = std::chrono::steady_clock::now();
    for (int t = 0; t < threads; ++t) {
      threads_.emplace_back([this, t, threads, interval, admit, info] {
        TestKubeClient client(info);
        // Each thread's slots are offset so the requests spread over the interval.
        auto next = began_ + interval * t / threads;
        while (!stop_) {
          std::this_thread::sleep_until(next);
          next += interval;
          std::string why;
          const bool ok = admit(client, &why);
          ++sent_;
          if (!ok) {
            std::lock_guard lock(mutex_);
            if (failures_.size() < 5) failures_.push_back(why);
            ++failed_;
          }
        }
      });
    }
  }
  ~AdmissionLoad() { Stop(); }
  void Stop() {
    stop_ = true;
    for (std::thread& t : threads_) {
      if (t.joinable()) t.join();
    }
    if (ended_ == std::chrono::steady_clock::time_point{})
      ended_ = std::chrono::steady_clock::now();
  }
  int sent() const { return sent_; }
  int failed() const { return failed_; }
  double rate() const { return sent_ / std::chrono::duration<double>(ended_ - began_).count(); }
  std::string first_failures() {
    std::lock_guard lock(mutex_);
    std::string text;
    for (const std::string& f : failures_) text += "\n  " + f;
    return text;
  }

 private:
  std::atomic<bool> stop_{false};
  std::atomic<int> sent_{0};
  std::atomic<int> failed_{0};
  std::mutex mutex_;
  std::vector<std::string> failures_;
  std::chrono::steady_clock::time_point began_;
  std::chrono::steady_clock::time_point ended_;
  std::vector<std::thread> threads_;
};

TEST_F(WebhookCertsTest, RotationAndCaRolloverUnderOneHundredPodsASecondFailNoAdmission) {
  manager::WebhookCertOptions options = Options();
  // The production timeline, compressed: serving certificates live 9 s (renewed at 6 s), CAs
  // 24 s (a new one joins the bundle 8 s before the newest expires, at 16 s; the old one leaves
  // at 24 s).
  options.lifetimes.serving_validity = seconds(9);
  options.lifetimes.ca_validity = seconds(24);
  options.lifetimes.ca_rollover_before = seconds(8);
  options.lifetimes.backdate = seconds(0);
  ControllerWebhook webhook(info_, options);
  Register(webhook.port());
  std::string why;
  ASSERT_TRUE(Eventually([&] { return PodMutated("warmup", true, &why); }, seconds(30))) << why;

  // 100 pods/s (dry-run creates: each goes through both webhooks, none is stored) from 8
  // clients while the certificates rotate.
  AdmissionLoad load(
      100, 8,
      [this](TestKubeClient& client, std::string* failure) {
        return PodMutatedBy(client, "during-rotation", true, failure);
      },
      info_);
  std::set<std::string> serving_seen;
  std::set<std::string> cas_seen;
  std::size_t most_cas_in_bundle = 0;
  bool old_ca_left = false;  // the bundle shrank back to one CA after the overlap
  const auto end = std::chrono::steady_clock::now() + seconds(32);
  while (std::chrono::steady_clock::now() < end) {
    auto data = SecretData();
    if (data.contains("tls.crt")) {
      serving_seen.insert(data.at("tls.crt"));
      const auto cas = manager::InspectCertificates(data.at("ca.crt"), "ca.crt");
      most_cas_in_bundle = std::max(most_cas_in_bundle, cas.size());
      if (most_cas_in_bundle == 2 && cas.size() == 1) old_ca_left = true;
      for (const auto& ca : cas) cas_seen.insert(ca.fingerprint);
    }
    std::this_thread::sleep_for(milliseconds(100));
  }
  load.Stop();
  std::printf(
      "[ figure ] certificate rotation: %d admissions at %.1f/s (aimed at 100/s), %d failed; "
      "%zu serving certificates and %zu CAs seen\n",
      load.sent(), load.rate(), load.failed(), serving_seen.size(), cas_seen.size());
  EXPECT_EQ(load.failed(), 0) << load.failed() << " of " << load.sent()
                              << " admissions failed; first:" << load.first_failures();
  EXPECT_GE(serving_seen.size(), 4u) << "the serving certificate was not renewed";
  EXPECT_GE(cas_seen.size(), 2u) << "the CA did not roll over";
  EXPECT_EQ(most_cas_in_bundle, 2u) << "old and new CA were never in the bundle together";
  EXPECT_TRUE(old_ca_left) << "the expired CA stayed in the bundle";
  EXPECT_GT(load.sent(), 100) << "the load did not run through the rotation";
}

TEST_F(WebhookCertsTest, MalformedOrDeletedSecretIsReplacedAndServingResumes) {
  ControllerWebhook webhook(info_, Options());
  Register(webhook.port());
  std::string why;
  ASSERT_TRUE(Eventually([&] { return PodMutated("before", true, &why); }, seconds(30))) << why;
  const std::string first_ca = SecretData().at("ca.crt");

  // tls.key of something else: the manager notices and starts over with new material.
  json secret = admin_->Get("/api/v1/namespaces/" + system_ + "/secrets/" + kSecret).Json();
  secret["data"]["tls.key"] = Base64("-----BEGIN PRIVATE KEY-----\nbroken\n");
  ASSERT_EQ(
      admin_->Request("PUT", "/api/v1/namespaces/" + system_ + "/secrets/" + kSecret, secret.dump())
          .status,
      200);
  ASSERT_TRUE(Eventually(
      [&] {
        auto data = SecretData();
        return data.contains("ca.crt") && data.at("ca.crt") != first_ca &&
               manager::KeyMatchesCertificate(data.at("tls.crt"), data.at("tls.key"));
      },
      seconds(20)));
  EXPECT_TRUE(
      Eventually([&] { return BundlePublished() && PodMutated("after-repair"); }, seconds(30)));

  const std::string second_ca = SecretData().at("ca.crt");
  ASSERT_EQ(admin_->Delete("/api/v1/namespaces/" + system_ + "/secrets/" + kSecret).status, 200);
  ASSERT_TRUE(Eventually(
      [&] {
        auto data = SecretData();
        return data.contains("ca.crt") && data.at("ca.crt") != second_ca;
      },
      seconds(20)));
  EXPECT_TRUE(
      Eventually([&] { return BundlePublished() && PodMutated("after-delete"); }, seconds(30)));
}

// The Secret (with the CA key) is owned by the controller's ServiceAccount, so that the
// garbage collector deletes it on uninstall: one from before owner references gets the owner
// with its certificates kept; one created anew carries it.
TEST_F(WebhookCertsTest, TheSecretIsOwnedByTheServiceAccountWhetherFoundOrCreated) {
  const std::string path = "/api/v1/namespaces/" + system_ + "/secrets/" + kSecret;
  KubeResponse created = admin_->Post("/api/v1/namespaces/" + system_ + "/serviceaccounts",
                                      {{"apiVersion", "v1"},
                                       {"kind", "ServiceAccount"},
                                       {"metadata", {{"name", "ncclguard-controller"}}}});
  ASSERT_EQ(created.status, 201) << created.body;
  const std::string uid = created.Json()["metadata"]["uid"];
  const json expected = json::array({{{"apiVersion", "v1"},
                                      {"kind", "ServiceAccount"},
                                      {"name", "ncclguard-controller"},
                                      {"uid", uid}}});
  auto owners = [&] {
    KubeResponse secret = admin_->Get(path);
    return secret.status == 200 ? secret.Json()["metadata"].value("ownerReferences", json())
                                : json();
  };

  // An install from before owner references.
  auto unowned = std::make_unique<ControllerWebhook>(info_, Options());
  EXPECT_TRUE(owners().is_null()) << owners();
  const auto before = SecretData();
  unowned.reset();

  kube::Client client(kube::LoadKubeConfigFile(info_.kubeconfig));
  manager::WebhookCertOptions options = Options();
  options.owner = kube::ServiceAccountOwner(client, system_, "ncclguard-controller");
  ASSERT_TRUE(options.owner.has_value());
  ControllerWebhook owned(info_, options);
  ASSERT_TRUE(Eventually([&] { return owners() == expected; }, seconds(20))) << owners();
  EXPECT_EQ(SecretData(), before) << "adding the owner must keep the certificates";

  ASSERT_EQ(admin_->Delete(path).status, 200);
  ASSERT_TRUE(Eventually([&] { return SecretData().contains("ca.crt"); }, seconds(20)));
  EXPECT_NE(SecretData().at("ca.crt"), before.at("ca.crt"));
  EXPECT_EQ(owners(), expected);
}

TEST_F(WebhookCertsTest, ControllerCommandServesTheWebhookWithSelfManagedCertificates) {
  const int port = webhook::testing::FreePort();
  const int metrics_port = webhook::testing::FreePort();
  Register(port);
  ControllerProcess controller(
      {"--kubeconfig", info_.kubeconfig, "--leader-elect=false", "--lease-namespace", system_,
       "--webhook-cert-secret", kSecret, "--webhook-host", "127.0.0.1", "--webhook-listen",
       "127.0.0.1:" + std::to_string(port), "--cert-dir", MakeTempDir("certs"), "--metrics-listen",
       "127.0.0.1:" + std::to_string(metrics_port)});
  std::string why;
  EXPECT_TRUE(Eventually([&] { return PodMutated("from-the-binary", true, &why); }, seconds(60)))
      << why << "\n"
      << controller.Log();
  EXPECT_TRUE(BundlePublished());

  // Its /metrics: the webhook's and the controller's families in one registry, the CA's
  // expiry (a five-year CA made just now).
  const std::string url = "http://127.0.0.1:" + std::to_string(metrics_port) + "/metrics";
  std::string text;
  EXPECT_TRUE(Eventually(
      [&] {
        text = HttpBody(url);
        return Sample(
                   text,
                   R"(ncclguard_controller_reconcile_total{controller="ncclpolicy",result="success"})") >=
               0;
      },
      seconds(30)))
      << text << controller.Log();
  const double now = static_cast<double>(std::time(nullptr));
  EXPECT_GT(Sample(text, "ncclguard_webhook_ca_expiry_timestamp_seconds"), now + 4 * 365 * 86400.0)
      << text;
  EXPECT_GE(Sample(text, R"(ncclguard_webhook_requests_total{endpoint="mutate",result="patched"})"),
            1);
  EXPECT_GT(Sample(text, R"(ncclguard_rest_client_requests_total{code="200",method="GET"})"), 0);
  EXPECT_GE(Sample(text, R"(ncclguard_workqueue_depth{name="trainingjob"})"), 0);
  EXPECT_GE(
      Sample(text,
             R"(ncclguard_controller_reconcile_time_seconds_count{controller="trainingjob"})"),
      0);
  EXPECT_NE(text.find("# TYPE ncclguard_gate_held_jobs gauge"), std::string::npos);
  EXPECT_NE(text.find("ncclguard_build_info{version="), std::string::npos);
  // Without leader election the one replica leads.
  EXPECT_EQ(Sample(text, R"(ncclguard_leader_election_master_status{name="ncclguard-controller"})"),
            1);
  // SIGTERM while the caches of kinds without a CRD here still wait to sync: a prompt exit 0
  // (kubelet kills after its 30 s grace period).
  const auto stopping = std::chrono::steady_clock::now();
  EXPECT_EQ(controller.Stop(), 0) << controller.Log();
  EXPECT_LT(std::chrono::steady_clock::now() - stopping, seconds(15));
}

// The gate's fast path through the real API server: the in-process webhook asks the controller's
// count of validated nodes, admits a Job whose nodes exist unsuspended (ncclguard.io/gate=
// admitted, no round trip), holds one that needs more, and the controller writes the admitted
// one's NcclPreflight condition.
TEST_F(WebhookCertsTest, ControllerCommandAdmitsAJobWhoseNodesAreValidatedAndHoldsTheRest) {
  const std::string type = jobs_ + ".48xlarge";  // this test's own: no other test's nodes count
  const std::vector<std::string> nodes = {jobs_ + "-a", jobs_ + "-b"};
  ApplyCrds(*admin_, SourceDir() + "/crds/nodevalidation.yaml");
  ApplyCrds(*admin_, SourceDir() + "/crds/ncclpolicy.yaml");
  for (const std::string& node : nodes) {
    ASSERT_EQ(
        admin_
            ->Post("/api/v1/nodes",
                   {{"apiVersion", "v1"},
                    {"kind", "Node"},
                    {"metadata",
                     {{"name", node}, {"labels", {{"node.kubernetes.io/instance-type", type}}}}}})
            .status,
        201);
    ASSERT_EQ(admin_
                  ->Post("/apis/ncclguard.io/v1alpha1/nodevalidations",
                         {{"apiVersion", "ncclguard.io/v1alpha1"},
                          {"kind", "NodeValidation"},
                          {"metadata", {{"name", node}}}})
                  .status,
              201);
    ASSERT_EQ(
        admin_
            ->Request("PATCH", "/apis/ncclguard.io/v1alpha1/nodevalidations/" + node + "/status",
                      json{{"status",
                            {{"instanceType", type},
                             {"summary", "Pass"},
                             {"lastProbeTime", "2026-12-02T14:00:00Z"},
                             {"probeVersion", "test"},
                             {"checks", json::array()}}}}
                          .dump(),
                      "application/merge-patch+json")
            .status,
        200);
  }
  ASSERT_EQ(
      admin_
          ->Request("PATCH", "/api/v1/namespaces/" + jobs_,
                    json{{"metadata", {{"labels", {{"ncclguard.io/enabled", "true"}}}}}}.dump(),
                    "application/merge-patch+json")
          .status,
      200);
  const int port = webhook::testing::FreePort();
  const int metrics_port = webhook::testing::FreePort();
  Register(port, /*jobs=*/true);
  ControllerProcess controller(
      {"--kubeconfig", info_.kubeconfig, "--leader-elect=false", "--lease-namespace", system_,
       "--webhook-cert-secret", kSecret, "--webhook-host", "127.0.0.1", "--webhook-listen",
       "127.0.0.1:" + std::to_string(port), "--cert-dir", MakeTempDir("certs"), "--metrics-listen",
       "127.0.0.1:" + std::to_string(metrics_port)});
  // A managed Indexed Job of `pods` GPU pods on this test's instance type (one node a pod: the
  // type is not in the catalog).
  const auto job = [&](const std::string& name, int pods) {
    return json{{"apiVersion", "batch/v1"},
                {"kind", "Job"},
                {"metadata", {{"name", name}, {"labels", {{"ncclguard.io/managed", "true"}}}}},
                {"spec",
                 {{"parallelism", pods},
                  {"completions", pods},
                  {"completionMode", "Indexed"},
                  {"template",
                   {{"spec",
                     {{"restartPolicy", "Never"},
                      {"nodeSelector", {{"node.kubernetes.io/instance-type", type}}},
                      {"containers",
                       {{{"name", "trainer"},
                         {"image", "registry.example/train:1.0"},
                         {"resources", {{"limits", {{"nvidia.com/gpu", "8"}}}}}}}}}}}}}}};
  };
  const std::string collection = "/apis/batch/v1/namespaces/" + jobs_ + "/jobs";
  const auto gate_of = [](const json& object) {
    return object["metadata"].value("annotations", json::object()).value("ncclguard.io/gate", "");
  };
  // Once the webhook serves and the controller's caches hold the two nodes.
  std::string seen;
  ASSERT_TRUE(Eventually(
      [&] {
        const KubeResponse dry = admin_->Post(collection + "?dryRun=All", job("fits", 2));
        seen = std::to_string(dry.status) + " " + dry.body.substr(0, 300);
        return dry.status == 201 && gate_of(dry.Json()) == "admitted";
      },
      seconds(60)))
      << seen << "\n"
      << controller.Log();

  const KubeResponse fits = admin_->Post(collection, job("fits", 2));
  ASSERT_EQ(fits.status, 201) << fits.body;
  EXPECT_EQ(gate_of(fits.Json()), "admitted");
  EXPECT_FALSE(fits.Json()["spec"].value("suspend", false)) << "never suspended";
  const KubeResponse big = admin_->Post(collection, job("big", 3));
  ASSERT_EQ(big.status, 201) << big.body;
  EXPECT_EQ(gate_of(big.Json()), "pending");
  EXPECT_TRUE(big.Json()["spec"].value("suspend", false)) << "held: 2 of 3 nodes";

  const auto preflight = [&](const std::string& name) {
    const KubeResponse got = admin_->Get(collection + "/" + name);
    for (const json& c : got.Json()["status"].value("conditions", json::array())) {
      if (c.value("type", "") == "NcclPreflight") {
        return c.value("status", "") + " " + c.value("reason", "") + ": " + c.value("message", "");
      }
    }
    return std::string();
  };
  EXPECT_TRUE(Eventually(
      [&] { return preflight("fits").starts_with("True ValidatedNodesAvailable: admitted at"); },
      seconds(30)))
      << preflight("fits") << "\n"
      << controller.Log();
  EXPECT_TRUE(Eventually(
      [&] { return preflight("big").starts_with("False InsufficientValidatedNodes: 2/3"); },
      seconds(30)))
      << preflight("big");
  const std::string text =
      HttpBody("http://127.0.0.1:" + std::to_string(metrics_port) + "/metrics");
  EXPECT_GE(Sample(text, R"(ncclguard_webhook_gate_decisions_total{decision="admitted"})"), 2)
      << "the dry run and the Job";
  EXPECT_GE(Sample(text, R"(ncclguard_webhook_gate_decisions_total{decision="held"})"), 1);
  EXPECT_EQ(controller.Stop(), 0) << controller.Log();
  for (const std::string& node : nodes) {
    admin_->Delete("/apis/ncclguard.io/v1alpha1/nodevalidations/" + node);
    admin_->Delete("/api/v1/nodes/" + node);
  }
}

TEST_F(WebhookCertsTest, ControllerCommandWithoutWebhookServesHealthEndpoints) {
  const int port = webhook::testing::FreePort();
  ControllerProcess controller({"--kubeconfig", info_.kubeconfig, "--leader-elect=false",
                                "--health-listen", "127.0.0.1:" + std::to_string(port)});
  const std::string base = "http://127.0.0.1:" + std::to_string(port);
  EXPECT_TRUE(Eventually([&] { return HttpStatus(base + "/healthz") == 200; }, seconds(20)))
      << controller.Log();
  // Ready once the caches synced (CRDs this control plane lacks time out after 30 s).
  EXPECT_TRUE(Eventually([&] { return HttpStatus(base + "/readyz") == 200; }, seconds(60)))
      << controller.Log();
  EXPECT_EQ(controller.Stop(), 0) << controller.Log();
  EXPECT_EQ(HttpStatus(base + "/healthz"), 0);
}

}  // namespace
}  // namespace ncclguard::testenv
