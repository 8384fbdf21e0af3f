// Kubeconfig and in-cluster configuration: the fields we read, and a clear error naming the
// field for each way a kubeconfig can be wrong.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <string>

#include "kube/config.h"
#include "kube/transport.h"

namespace ncclguard::kube {
namespace {

namespace fs = std::filesystem;

const char* kValid = R"(apiVersion: v1
kind: Config
clusters:
- name: prod
  cluster:
    server: https://10.1.2.3:6443/
    certificate-authority: pki/ca.crt
- name: inline
  cluster:
    server: https://127.0.0.1:443
    certificate-authority-data: Q0EtUEVN
users:
- name: admin
  user:
    client-certificate: /abs/admin.crt
    client-key: admin.key
- name: robot
  user:
    token: s3cret
    client-certificate-data: Q0VSVA==
    client-key-data: S0VZ
contexts:
- name: main
  context:
    cluster: prod
    user: admin
    namespace: training
- name: other
  context:
    cluster: inline
    user: robot
current-context: main
)";

std::string ErrorOf(const std::string& yaml, const KubeConfigOptions& options = {}) {
  try {
    ParseKubeConfig(yaml, "/cfg/kubeconfig", "/cfg", options);
  } catch (const ConfigError& error) {
    return error.what();
  }
  return "no error";
}

std::string Replace(std::string text, const std::string& from, const std::string& to) {
  auto at = text.find(from);
  EXPECT_NE(at, std::string::npos) << from;
  if (at != std::string::npos) text.replace(at, from.size(), to);
  return text;
}

TEST(KubeConfig, CurrentContextWithFilesResolvedAgainstTheKubeconfigDirectory) {
  ClientConfig config = ParseKubeConfig(kValid, "/cfg/kubeconfig", "/cfg");
  EXPECT_EQ(config.server, "https://10.1.2.3:6443");
  EXPECT_EQ(config.ca_file, "/cfg/pki/ca.crt");
  EXPECT_EQ(config.client_cert_file, "/abs/admin.crt");
  EXPECT_EQ(config.client_key_file, "/cfg/admin.key");
  EXPECT_EQ(config.default_namespace, "training");
  EXPECT_TRUE(config.token.empty());
}

TEST(KubeConfig, ExplicitContextWithInlineDataAndToken) {
  KubeConfigOptions options;
  options.context = "other";
  ClientConfig config = ParseKubeConfig(kValid, "/cfg/kubeconfig", "/cfg", options);
  EXPECT_EQ(config.server, "https://127.0.0.1:443");
  EXPECT_EQ(config.ca_data, "CA-PEM");
  EXPECT_EQ(config.client_cert_data, "CERT");
  EXPECT_EQ(config.client_key_data, "KEY");
  EXPECT_EQ(config.token, "s3cret");
  EXPECT_EQ(config.default_namespace, "default");
}

TEST(KubeConfig, MalformedConfigsNameTheField) {
  struct Case {
    std::string yaml;
    std::string expected;
  };
  std::string valid = kValid;
  std::vector<Case> cases = {
      {"clusters: [", "not valid YAML"},
      {"- a\n- b\n", "must be a YAML map"},
      {Replace(valid, "current-context: main", ""), "current-context: missing"},
      {Replace(valid, "current-context: main", "current-context: nope"),
       "contexts: no entry named 'nope'"},
      {Replace(valid, "    cluster: prod\n", "    cluster: gone\n"),
       "clusters: no entry named 'gone'"},
      {Replace(valid, "    cluster: prod\n", ""), "contexts[main].context.cluster: missing"},
      {Replace(valid, "server: https://10.1.2.3:6443/", "server: 10.1.2.3:6443"),
       "clusters[prod].cluster.server: '10.1.2.3:6443' is not an http(s) URL"},
      {Replace(valid, "    server: https://10.1.2.3:6443/\n", ""),
       "clusters[prod].cluster.server: missing"},
      // Found by fuzz/kubeconfig: a scheme without a host was accepted (and cut to "https:").
      {Replace(valid, "server: https://10.1.2.3:6443/", "server: https://"),
       "clusters[prod].cluster.server: 'https://' names no host"},
      {Replace(valid, "server: https://10.1.2.3:6443/", "server: http:///api"),
       "clusters[prod].cluster.server: 'http:///api' names no host"},
      {Replace(valid, "server: https://10.1.2.3:6443/", "server: [a, b]"),
       "clusters[prod].cluster.server: must be a string"},
      {Replace(valid, "    client-key: admin.key\n", ""),
       "users[admin].user: client-certificate without client-key"},
      {Replace(valid, "    client-certificate: /abs/admin.crt\n", ""),
       "users[admin].user: client-key without client-certificate"},
      {Replace(valid, "    certificate-authority: pki/ca.crt",
               "    certificate-authority-data: '%%%notbase64'"),
       "clusters[prod].cluster.certificate-authority-data: not valid base64"},
      {Replace(valid, "    certificate-authority: pki/ca.crt",
               "    insecure-skip-tls-verify: true"),
       "clusters[prod].cluster.insecure-skip-tls-verify: true, but skipping server certificate "
       "verification is not allowed"},
      {Replace(valid, "    certificate-authority: pki/ca.crt",
               "    insecure-skip-tls-verify: maybe"),
       "insecure-skip-tls-verify: must be true or false, not 'maybe'"},
      {Replace(valid, "    client-certificate: /abs/admin.crt\n    client-key: admin.key\n",
               "    exec:\n      command: aws\n"),
       "users[admin].user.exec: exec credential plugins are not supported"},
      {Replace(valid, "clusters:\n- name: prod", "clusters: {}\nx:\n- name: prod"),
       "clusters: must be a list"},
      {Replace(valid, "    user: admin\n", "    user: nobody\n"), "users: no entry named 'nobody'"},
  };
  for (const auto& test_case : cases) {
    std::string message = ErrorOf(test_case.yaml);
    EXPECT_NE(message.find(test_case.expected), std::string::npos)
        << "expected '" << test_case.expected << "' in: " << message;
    if (message != "no error" && message.find("not valid YAML") == std::string::npos) {
      EXPECT_TRUE(message.starts_with("/cfg/kubeconfig")) << message;
    }
  }
}

TEST(KubeConfig, InsecureSkipVerifyOnlyWhenAllowed) {
  std::string yaml = Replace(kValid, "    certificate-authority: pki/ca.crt",
                             "    insecure-skip-tls-verify: true");
  KubeConfigOptions options;
  options.allow_insecure_skip_tls_verify = true;
  EXPECT_TRUE(ParseKubeConfig(yaml, "k", "", options).insecure_skip_tls_verify);
}

TEST(KubeConfig, MissingFileSaysWhich) {
  try {
    LoadKubeConfigFile("/nonexistent/ncclguard/kubeconfig");
    FAIL() << "no error";
  } catch (const ConfigError& error) {
    EXPECT_NE(std::string(error.what()).find("/nonexistent/ncclguard/kubeconfig"),
              std::string::npos);
  }
}

TEST(Base64, DecodesWithAndWithoutPaddingAndRejectsGarbage) {
  EXPECT_EQ(DecodeBase64("aGVsbG8=", "f"), "hello");
  EXPECT_EQ(DecodeBase64("aGVs\nbG8", "f"), "hello");
  EXPECT_EQ(DecodeBase64("", "f"), "");
  EXPECT_THROW(DecodeBase64("aGV*", "f"), ConfigError);
  EXPECT_THROW(DecodeBase64("a", "f"), ConfigError);
  EXPECT_THROW(DecodeBase64("aG=Vs", "f"), ConfigError);
}

class TempDir {
 public:
  TempDir() {
    std::string pattern = (fs::temp_directory_path() / "kube-config-test-XXXXXX").string();
    path_ = mkdtemp(pattern.data());
  }
  ~TempDir() { fs::remove_all(path_); }
  std::string Write(const std::string& name, const std::string& text) const {
    std::string file = path_ + "/" + name;
    std::ofstream(file) << text;
    return file;
  }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

InClusterEnvironment FakePod(const TempDir& dir, std::map<std::string, std::string> env) {
  InClusterEnvironment pod;
  pod.token_file = dir.path() + "/token";
  pod.ca_file = dir.path() + "/ca.crt";
  pod.namespace_file = dir.path() + "/namespace";
  pod.getenv = [env](const std::string& name) -> std::optional<std::string> {
    auto found = env.find(name);
    if (found == env.end()) return std::nullopt;
    return found->second;
  };
  return pod;
}

TEST(InCluster, ServiceAccountMountAndServiceEnvironment) {
  TempDir dir;
  dir.Write("token", "tok-1\n");
  dir.Write("ca.crt", "CA");
  dir.Write("namespace", "ncclguard-system\n");
  auto pod =
      FakePod(dir, {{"KUBERNETES_SERVICE_HOST", "10.0.0.1"}, {"KUBERNETES_SERVICE_PORT", "443"}});
  ClientConfig config = InClusterConfig(pod);
  EXPECT_EQ(config.server, "https://10.0.0.1:443");
  EXPECT_EQ(config.token_file, dir.path() + "/token");
  EXPECT_EQ(config.ca_file, dir.path() + "/ca.crt");
  EXPECT_EQ(config.default_namespace, "ncclguard-system");

  auto ipv6 =
      FakePod(dir, {{"KUBERNETES_SERVICE_HOST", "fd00::1"}, {"KUBERNETES_SERVICE_PORT", "443"}});
  EXPECT_EQ(InClusterConfig(ipv6).server, "https://[fd00::1]:443");
}

TEST(InCluster, BrokenEnvironmentsSayWhatIsMissing) {
  TempDir dir;
  dir.Write("ca.crt", "CA");
  auto expect_error = [](const InClusterEnvironment& pod, const std::string& expected) {
    try {
      InClusterConfig(pod);
      ADD_FAILURE() << "no error, expected " << expected;
    } catch (const ConfigError& error) {
      EXPECT_NE(std::string(error.what()).find(expected), std::string::npos) << error.what();
    }
  };
  expect_error(FakePod(dir, {}), "KUBERNETES_SERVICE_HOST and KUBERNETES_SERVICE_PORT");
  expect_error(FakePod(dir, {{"KUBERNETES_SERVICE_HOST", "h"}, {"KUBERNETES_SERVICE_PORT", "x1"}}),
               "'x1' is not a port number");
  auto pod = FakePod(dir, {{"KUBERNETES_SERVICE_HOST", "h"}, {"KUBERNETES_SERVICE_PORT", "1"}});
  expect_error(pod, "token file");
  dir.Write("token", "  \n");
  expect_error(pod, "is empty");
}

TEST(LoadClientConfig, FlagThenKubeconfigVariableThenInCluster) {
  TempDir dir;
  std::string from_flag =
      dir.Write("flag", Replace(kValid, "namespace: training", "namespace: flag"));
  std::string from_env = dir.Write("env", Replace(kValid, "namespace: training", "namespace: env"));
  dir.Write("token", "tok");
  dir.Write("ca.crt", "CA");
  auto pod = FakePod(dir, {{"KUBECONFIG", "/missing/one:" + from_env},
                           {"KUBERNETES_SERVICE_HOST", "10.0.0.1"},
                           {"KUBERNETES_SERVICE_PORT", "443"}});
  EXPECT_EQ(LoadClientConfig(from_flag, {}, pod).default_namespace, "flag");
  EXPECT_EQ(LoadClientConfig("", {}, pod).default_namespace, "env");
  auto in_pod =
      FakePod(dir, {{"KUBERNETES_SERVICE_HOST", "10.0.0.1"}, {"KUBERNETES_SERVICE_PORT", "443"}});
  EXPECT_EQ(LoadClientConfig("", {}, in_pod).server, "https://10.0.0.1:443");
  auto nowhere = FakePod(dir, {{"HOME", dir.path()}});
  EXPECT_THROW(LoadClientConfig("", {}, nowhere), ConfigError);
  auto bad_list = FakePod(dir, {{"KUBECONFIG", "/missing/a:/missing/b"}});
  EXPECT_THROW(LoadClientConfig("", {}, bad_list), ConfigError);
}

TEST(TokenSource, RereadsTheTokenFileWhenItChanges) {
  TempDir dir;
  std::string file = dir.Write("token", "first\n");
  TokenSource tokens("", file);
  EXPECT_EQ(tokens.Token(), "first");
  dir.Write("token", "second\n");
  fs::last_write_time(file, fs::last_write_time(file) + std::chrono::seconds(5));
  EXPECT_EQ(tokens.Token(), "second");
  // A refresh after a 401 reports whether the token changed.
  EXPECT_FALSE(tokens.Refresh());
  // A file being rewritten (empty for a moment) keeps the last good token.
  dir.Write("token", "");
  fs::last_write_time(file, fs::last_write_time(file) + std::chrono::seconds(5));
  EXPECT_EQ(tokens.Token(), "second");
}

}  // namespace
}  // namespace ncclguard::kube

namespace ncclguard::kube {
namespace {

std::string WithUser(const std::string& user_fields) {
  return "clusters:\n- name: c\n  cluster:\n    server: https://127.0.0.1:6443\n"
         "users:\n- name: u\n  user:\n    token: t\n" +
         user_fields +
         "contexts:\n- name: x\n  context:\n    cluster: c\n    user: u\n"
         "current-context: x\n";
}

std::string ImpersonationError(const std::string& user_fields) {
  try {
    ParseKubeConfig(WithUser(user_fields), "/cfg/kubeconfig", "/cfg");
  } catch (const ConfigError& error) {
    return error.what();
  }
  return "no error";
}

TEST(KubeConfigImpersonation, ReadsKubectlFieldNames) {
  ClientConfig config = ParseKubeConfig(
      WithUser("    as: system:serviceaccount:ncclguard-system:ncclguard-controller\n"
               "    as-groups: [system:serviceaccounts, \"system:serviceaccounts:ncclguard\"]\n"
               "    as-uid: 1234-abcd\n"),
      "/cfg/kubeconfig", "/cfg");
  EXPECT_EQ(config.impersonate_user, "system:serviceaccount:ncclguard-system:ncclguard-controller");
  EXPECT_EQ(
      config.impersonate_groups,
      (std::vector<std::string>{"system:serviceaccounts", "system:serviceaccounts:ncclguard"}));
  EXPECT_EQ(config.impersonate_uid, "1234-abcd");
  // The token still authenticates the caller that impersonates.
  EXPECT_EQ(config.token, "t");
}

TEST(KubeConfigImpersonation, NoneByDefault) {
  ClientConfig config = ParseKubeConfig(WithUser(""), "/cfg/kubeconfig", "/cfg");
  EXPECT_TRUE(config.impersonate_user.empty());
  EXPECT_TRUE(config.impersonate_groups.empty());
  EXPECT_TRUE(config.impersonate_uid.empty());
}

TEST(KubeConfigImpersonation, MalformedValuesNameTheField) {
  EXPECT_EQ(ImpersonationError("    as: [a, b]\n"),
            "/cfg/kubeconfig: users[u].user.as: must be a string");
  EXPECT_EQ(ImpersonationError("    as: alice\n    as-groups: admins\n"),
            "/cfg/kubeconfig: users[u].user.as-groups: must be a list of strings");
  EXPECT_EQ(ImpersonationError("    as: alice\n    as-groups: [ok, {a: b}]\n"),
            "/cfg/kubeconfig: users[u].user.as-groups[1]: must be a non-empty one-line string");
  EXPECT_EQ(ImpersonationError("    as: alice\n    as-groups: [\"\"]\n"),
            "/cfg/kubeconfig: users[u].user.as-groups[0]: must be a non-empty one-line string");
  EXPECT_EQ(ImpersonationError("    as-groups: [admins]\n"),
            "/cfg/kubeconfig: users[u].user: as-groups or as-uid without as (the user to "
            "impersonate)");
  EXPECT_EQ(ImpersonationError("    as-uid: \"42\"\n"),
            "/cfg/kubeconfig: users[u].user: as-groups or as-uid without as (the user to "
            "impersonate)");
  EXPECT_EQ(ImpersonationError("    as: \"alice\\r\\nX-Evil: 1\"\n"),
            "/cfg/kubeconfig: users[u].user: impersonation values must be one line");
}

}  // namespace
}  // namespace ncclguard::kube
