#include "kueue_harness.h"

#include <curl/curl.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>

#include "manifests.h"
#include "served_webhook.h"
#include "test_https_server.h"
#include "webhook_registration.h"

namespace ncclguard::testenv {
namespace {

using nlohmann::json;
using namespace std::chrono_literals;

std::string Trim(std::string text) {
  while (!text.empty() && (text.back() == '\n' || text.back() == ' ')) text.pop_back();
  return text;
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

long HttpStatus(const std::string& url) {
  CURL* curl = curl_easy_init();
  curl_easy_setopt(curl, CURLOPT_URL, url.c_str());
  curl_easy_setopt(curl, CURLOPT_TIMEOUT_MS, 2000L);
  curl_easy_setopt(
      curl, CURLOPT_WRITEFUNCTION,
      +[](char*, size_t size, size_t count, void*) { return size * count; });
  long status = 0;
  if (curl_easy_perform(curl) == CURLE_OK) curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &status);
  curl_easy_cleanup(curl);
  return status;
}

// The webhooks of the integrations the tests enable, and of Kueue's own kinds; the others
// (pods, deployments, ...) are not served by a manager without those integrations.
bool Wanted(const std::string& path) {
  for (const char* part : {"batch-v1-job", "kubeflow-org-v1-pytorchjob", "jobset-x-k8s-io",
                           "trainer-kubeflow-org-v1alpha1-trainjob", "kueue-x-k8s-io"}) {
    if (path.find(part) != std::string::npos) return true;
  }
  return false;
}

json QueuedJobProbe() {
  return json::parse(R"({"apiVersion":"batch/v1","kind":"Job",
    "metadata":{"name":"kueue-probe","labels":{"kueue.x-k8s.io/queue-name":"probe"}},
    "spec":{"suspend":false,"template":{"spec":{"restartPolicy":"Never",
      "containers":[{"name":"c","image":"x:1"}]}}}})");
}

}  // namespace

KueueBuild BuildKueue(const ControlPlaneInfo& info) {
  const ProcessResult built = RunProcess({ControlPlaneScript(), "build", "kueue"});
  if (built.exit_code != 0) {
    return {"", "scripts/controlplane.sh build kueue failed (exit " +
                    std::to_string(built.exit_code) + "): " + built.stderr_text};
  }
  const std::string binary = info.bin_dir + "/kueue";
  if (!std::filesystem::exists(binary)) return {"", binary + " missing after the build"};
  return {binary, ""};
}

std::string ModuleSourceDir(const std::string& module_at_version) {
  const ProcessResult dir = RunProcess({ControlPlaneScript(), "source-dir", module_at_version});
  if (dir.exit_code != 0) {
    throw std::runtime_error("source-dir " + module_at_version + ": " + dir.stderr_text);
  }
  return Trim(dir.stdout_text);
}

void InstallKueueCrds(TestKubeClient& client) {
  const std::string kueue =
      ModuleSourceDir(std::string("sigs.k8s.io/kueue@") + NCCLGUARD_KUEUE_VERSION) +
      "/config/components/crd/bases";
  for (const auto& entry : std::filesystem::directory_iterator(kueue)) {
    const std::string name = entry.path().filename();
    if (name.rfind("kueue.x-k8s.io_", 0) == 0) ApplyCrds(client, entry.path(), 60s);
  }
  ApplyCrds(client,
            ModuleSourceDir(std::string("github.com/kubeflow/training-operator@") +
                            NCCLGUARD_TRAINING_OPERATOR_VERSION) +
                "/manifests/base/crds/kubeflow.org_pytorchjobs.yaml",
            60s);
  // The JobSet and TrainJob integrations watch these kinds from the start (the TrainJob one also
  // indexes TrainingRuntimes and ClusterTrainingRuntimes, and owns JobSets); without their CRDs
  // Kueue defers those integrations.
  ApplyCrds(client, JobSetCrd(), 60s);
  for (const std::string& crd : TrainerCrds()) ApplyCrds(client, crd, 60s);
}

KueueManager::KueueManager(const ControlPlaneInfo& info, TestKubeClient& client,
                           const std::string& binary)
    : client_(client), dir_(MakeTempDir("kueue")) {
  client_.Post(
      "/api/v1/namespaces",
      {{"apiVersion", "v1"}, {"kind", "Namespace"}, {"metadata", {{"name", "kueue-system"}}}});
  const TlsMaterial tls = MakeServingCertificate("kueue-webhook");
  std::filesystem::create_directories(dir_ + "/certs");
  webhook::testing::WriteFile(dir_ + "/certs/tls.crt", tls.cert_pem);
  webhook::testing::WriteFile(dir_ + "/certs/tls.key", tls.key_pem);
  const int webhook_port = webhook::testing::FreePort();
  const int health_port = webhook::testing::FreePort();
  webhook::testing::WriteFile(dir_ + "/config.yaml", R"(apiVersion: config.kueue.x-k8s.io/v1beta2
kind: Configuration
namespace: kueue-system
health:
  healthProbeBindAddress: 127.0.0.1:)" + std::to_string(health_port) +
                                                         R"(
metrics:
  bindAddress: "0"
webhook:
  host: 127.0.0.1
  port: )" + std::to_string(webhook_port) + R"(
  certDir: )" + dir_ + R"(/certs
leaderElection:
  leaderElect: false
internalCertManagement:
  enable: false
manageJobsWithoutQueueName: false
integrations:
  frameworks: ["batch/job", "kubeflow.org/pytorchjob", "jobset.x-k8s.io/jobset",
               "trainer.kubeflow.org/trainjob"]
)");

  // The upstream webhook configurations, pointed at this process.
  const std::string manifests =
      ModuleSourceDir(std::string("sigs.k8s.io/kueue@") + NCCLGUARD_KUEUE_VERSION) +
      "/config/components/webhook/manifests.yaml";
  for (json configuration : LoadYamlDocuments(manifests)) {
    const std::string kind = configuration.value("kind", "");
    if (kind != "MutatingWebhookConfiguration" && kind != "ValidatingWebhookConfiguration") {
      continue;
    }
    const std::string name = "kueue-test-" + configuration["metadata"].value("name", "webhooks");
    configuration["metadata"] = {{"name", name}};
    json webhooks = json::array();
    for (json hook : configuration.value("webhooks", json::array())) {
      const std::string path =
          hook.value(json::json_pointer("/clientConfig/service/path"), std::string());
      if (!Wanted(path)) continue;
      hook["clientConfig"] = {{"url", "https://127.0.0.1:" + std::to_string(webhook_port) + path},
                              {"caBundle", Base64(tls.ca_pem)}};
      webhooks.push_back(std::move(hook));
    }
    configuration["webhooks"] = std::move(webhooks);
    const std::string collection = kind == "MutatingWebhookConfiguration"
                                       ? "mutatingwebhookconfigurations"
                                       : "validatingwebhookconfigurations";
    const std::string path = "/apis/admissionregistration.k8s.io/v1/" + collection + "/" + name;
    const KubeResponse applied =
        client_.Request("PATCH", path + "?fieldManager=ncclguard-tests&force=true",
                        configuration.dump(), "application/apply-patch+yaml");
    if (applied.status != 200 && applied.status != 201) {
      throw std::runtime_error("registering " + name + ": HTTP " + std::to_string(applied.status) +
                               " " + applied.body);
    }
    configurations_.push_back(path);
  }

  const std::string log = dir_ + "/kueue.log";
  // Without internal certificate management Kueue reads its metrics certificate from the fixed
  // path /etc/kueue/metrics/certs (even with metrics off): it runs in a mount namespace of its
  // own where /etc is this test's directory holding that certificate (nothing on the host).
  std::filesystem::create_directories(dir_ + "/etc/kueue/metrics/certs");
  webhook::testing::WriteFile(dir_ + "/etc/kueue/metrics/certs/tls.crt", tls.cert_pem);
  webhook::testing::WriteFile(dir_ + "/etc/kueue/metrics/certs/tls.key", tls.key_pem);
  std::vector<std::string> argv = {"unshare", "--mount", "--propagation", "private", "/bin/sh",
                                   "-c", "mount --bind \"$0\" /etc && exec \"$@\"", dir_ + "/etc",
                                   binary, "--config=" + dir_ + "/config.yaml",
                                   // its visibility API server would listen on every address
                                   "--feature-gates=VisibilityOnDemand=false", "--zap-log-level=2"};
  const std::string kubeconfig = "KUBECONFIG=" + info.kubeconfig;
  pid_ = ::fork();
  if (pid_ == 0) {
    const int fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    ::dup2(fd, 1);
    ::dup2(fd, 2);
    ::putenv(const_cast<char*>(kubeconfig.c_str()));
    std::vector<char*> raw;
    for (std::string& arg : argv) raw.push_back(arg.data());
    raw.push_back(nullptr);
    ::execvp(raw[0], raw.data());
    ::_exit(127);
  }
  const std::string readyz = "http://127.0.0.1:" + std::to_string(health_port) + "/readyz";
  ready_ = Eventually([&] { return HttpStatus(readyz) == 200; }, 120s, 250ms) &&
           // The API server loads webhook configurations asynchronously: a queued Job comes
           // back suspended once Kueue's webhook is called.
           Eventually(
               [&] {
                 const KubeResponse probe = client_.Post(
                     "/apis/batch/v1/namespaces/default/jobs?dryRun=All", QueuedJobProbe());
                 return probe.status == 201 &&
                        probe.Json().value(json::json_pointer("/spec/suspend"), false);
               },
               60s, 250ms);
}

KueueManager::~KueueManager() {
  if (pid_ > 0) {
    ::kill(pid_, SIGTERM);
    int status = 0;
    if (!Eventually([&] { return ::waitpid(pid_, &status, WNOHANG) == pid_; }, 20s)) {
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, &status, 0);
    }
  }
  for (const std::string& path : configurations_) client_.Delete(path);
}

std::string KueueManager::Log() const { return ReadFile(dir_ + "/kueue.log"); }

}  // namespace ncclguard::testenv
