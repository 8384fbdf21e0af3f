// Where the API server is and how to authenticate: from a kubeconfig file or from the
// in-cluster service-account mount. Every malformed field gives a ConfigError naming it.
#pragma once

#include <cstddef>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "kube/errors.h"

namespace ncclguard::kube {

struct ClientConfig {
  std::string server;  // https://host:port, no trailing slash
  std::string source;  // where this came from, for messages ("kubeconfig /x, context y")

  // Server verification: a CA file or PEM data; skipping verification must be allowed
  // explicitly when loading.
  std::string ca_file;
  std::string ca_data;
  bool insecure_skip_tls_verify = false;

  // Client certificate: a file or PEM data each.
  std::string client_cert_file;
  std::string client_cert_data;
  std::string client_key_file;
  std::string client_key_data;

  // Bearer token: inline, or a file re-read when it changes (service-account tokens rotate).
  std::string token;
  std::string token_file;

  // Impersonation (kubeconfig users[].user.as, as-groups, as-uid): sent as Impersonate-*
  // headers on every request, so the API server authorizes as that user.
  std::string impersonate_user;
  std::vector<std::string> impersonate_groups;
  std::string impersonate_uid;

  std::string default_namespace = "default";
};

// A kubeconfig (or service-account file) larger than this is refused unread: kubeconfigs with
// hundreds of clusters and their embedded certificates stay well below it.
inline constexpr std::size_t kMaxConfigFileBytes = 16u << 20;

struct KubeConfigOptions {
  std::string context;  // empty: current-context
  bool allow_insecure_skip_tls_verify = false;
};

// Parses kubeconfig YAML. Relative file paths are resolved against `base_dir`;
// `source_name` names the file in errors.
ClientConfig ParseKubeConfig(const std::string& yaml_text, const std::string& source_name,
                             const std::string& base_dir, const KubeConfigOptions& options = {});

ClientConfig LoadKubeConfigFile(const std::string& path, const KubeConfigOptions& options = {});

// The service-account mount and the environment a pod sees; tests point these elsewhere.
struct InClusterEnvironment {
  std::string token_file = "/var/run/secrets/kubernetes.io/serviceaccount/token";
  std::string ca_file = "/var/run/secrets/kubernetes.io/serviceaccount/ca.crt";
  std::string namespace_file = "/var/run/secrets/kubernetes.io/serviceaccount/namespace";
  std::function<std::optional<std::string>(const std::string&)> getenv;  // default: ::getenv
};

bool RunningInCluster(const InClusterEnvironment& env = {});
ClientConfig InClusterConfig(const InClusterEnvironment& env = {});

// What ncclguard's subcommands use: `kubeconfig_flag` if set, else $KUBECONFIG (its first
// existing entry), else in-cluster, else ~/.kube/config. Throws ConfigError saying what was tried.
ClientConfig LoadClientConfig(const std::string& kubeconfig_flag,
                              const KubeConfigOptions& options = {},
                              const InClusterEnvironment& env = {});

// Standard base64 (padding optional, whitespace ignored); throws ConfigError naming `field`.
std::string DecodeBase64(const std::string& text, const std::string& field);

}  // namespace ncclguard::kube
