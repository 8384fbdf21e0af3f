#include "kube/config.h"

#include <yaml-cpp/yaml.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "core/base64.h"

namespace ncclguard::kube {
namespace {

namespace fs = std::filesystem;

// Reads at most kMaxConfigFileBytes: a FIFO or /dev/zero named as a kubeconfig ends in an error,
// not in memory exhaustion.
std::string ReadFile(const std::string& path, const std::string& what) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw ConfigError(what + ": cannot read " + path);
  std::string text;
  char buffer[1 << 16];
  while (in.read(buffer, sizeof buffer) || in.gcount() > 0) {
    text.append(buffer, static_cast<std::size_t>(in.gcount()));
    if (text.size() > kMaxConfigFileBytes) {
      throw ConfigError(what + ": " + path + ": larger than the " +
                        std::to_string(kMaxConfigFileBytes >> 20) + " MiB limit");
    }
  }
  if (in.bad()) throw ConfigError(what + ": cannot read " + path);
  return text;
}

std::string Trim(std::string text) {
  const char* space = " \t\r\n";
  text.erase(0, text.find_first_not_of(space));
  auto end = text.find_last_not_of(space);
  text.erase(end == std::string::npos ? 0 : end + 1);
  return text;
}

class KubeConfigReader {
 public:
  KubeConfigReader(const std::string& source, const std::string& base_dir)
      : source_(source), base_dir_(base_dir) {}

  std::string Where(const std::string& field) const { return source_ + ": " + field; }

  // A string field of `node` or "" when absent; anything but a scalar is an error.
  std::string String(const YAML::Node& node, const std::string& key,
                     const std::string& field) const {
    YAML::Node value = node[key];
    if (!value || value.IsNull()) return "";
    if (!value.IsScalar()) throw ConfigError(Where(field + "." + key) + ": must be a string");
    return value.Scalar();
  }

  bool Bool(const YAML::Node& node, const std::string& key, const std::string& field) const {
    YAML::Node value = node[key];
    if (!value || value.IsNull()) return false;
    std::string text = value.IsScalar() ? value.Scalar() : "";
    if (text == "true") return true;
    if (text == "false") return false;
    throw ConfigError(Where(field + "." + key) + ": must be true or false, not '" + text + "'");
  }

  std::string Path(const std::string& path) const {
    if (path.empty() || fs::path(path).is_absolute() || base_dir_.empty()) return path;
    return (fs::path(base_dir_) / path).string();
  }

  // The `inner` map of the entry called `name` in the list `list_key` (clusters, users...).
  YAML::Node Entry(const YAML::Node& root, const std::string& list_key,
                   const std::string& inner_key, const std::string& name) const {
    YAML::Node list = root[list_key];
    if (!list || list.IsNull()) throw ConfigError(Where(list_key) + ": missing");
    if (!list.IsSequence()) throw ConfigError(Where(list_key) + ": must be a list");
    for (std::size_t i = 0; i < list.size(); ++i) {
      const YAML::Node& item = list[i];
      std::string field = list_key + "[" + std::to_string(i) + "]";
      if (!item.IsMap()) throw ConfigError(Where(field) + ": must be a map");
      if (String(item, "name", field) != name) continue;
      YAML::Node inner = item[inner_key];
      if (!inner || !inner.IsMap()) {
        throw ConfigError(Where(field + "." + inner_key) + " (name " + name +
                          "): missing or not a map");
      }
      return inner;
    }
    throw ConfigError(Where(list_key) + ": no entry named '" + name + "'");
  }

 private:
  std::string source_;
  std::string base_dir_;
};

void CheckServer(const std::string& server, const std::string& where) {
  if (server.empty()) throw ConfigError(where + ": missing");
  if (!server.starts_with("https://") && !server.starts_with("http://")) {
    throw ConfigError(where + ": '" + server + "' is not an http(s) URL");
  }
  const std::size_t host = server.find("//") + 2;
  if (host >= server.size() || server[host] == '/') {
    throw ConfigError(where + ": '" + server + "' names no host");
  }
}

std::string Getenv(const InClusterEnvironment& env, const std::string& name) {
  if (env.getenv) return env.getenv(name).value_or("");
  const char* value = std::getenv(name.c_str());
  return value ? value : "";
}

// kubectl's field names; groups or a uid without a user is refused (as kubectl does).
void ReadImpersonation(const KubeConfigReader& reader, const YAML::Node& user,
                       const std::string& user_field, ClientConfig& config) {
  config.impersonate_user = reader.String(user, "as", user_field);
  config.impersonate_uid = reader.String(user, "as-uid", user_field);
  YAML::Node groups = user["as-groups"];
  if (groups && !groups.IsNull()) {
    if (!groups.IsSequence()) {
      throw ConfigError(reader.Where(user_field + ".as-groups") + ": must be a list of strings");
    }
    for (std::size_t i = 0; i < groups.size(); ++i) {
      if (!groups[i].IsScalar() || groups[i].Scalar().empty() ||
          groups[i].Scalar().find_first_of("\r\n") != std::string::npos) {
        throw ConfigError(reader.Where(user_field + ".as-groups[" + std::to_string(i) + "]") +
                          ": must be a non-empty one-line string");
      }
      config.impersonate_groups.push_back(groups[i].Scalar());
    }
  }
  if (config.impersonate_user.empty() &&
      (!config.impersonate_groups.empty() || !config.impersonate_uid.empty())) {
    throw ConfigError(reader.Where(user_field) +
                      ": as-groups or as-uid without as (the user "
                      "to impersonate)");
  }
  for (const std::string* value : {&config.impersonate_user, &config.impersonate_uid}) {
    if (value->find_first_of("\r\n") != std::string::npos) {
      throw ConfigError(reader.Where(user_field) + ": impersonation values must be one line");
    }
  }
}

}  // namespace

std::string DecodeBase64(const std::string& text, const std::string& field) {
  std::string problem;
  std::optional<std::string> decoded = core::DecodeBase64(text, &problem);
  if (!decoded) throw ConfigError(field + ": not valid base64 (" + problem + ")");
  return std::move(*decoded);
}

ClientConfig ParseKubeConfig(const std::string& yaml_text, const std::string& source_name,
                             const std::string& base_dir, const KubeConfigOptions& options) {
  KubeConfigReader reader(source_name, base_dir);
  YAML::Node root;
  try {
    root = YAML::Load(yaml_text);
  } catch (const YAML::Exception& e) {
    throw ConfigError(source_name + ": not valid YAML: " + e.what());
  }
  if (!root.IsMap()) throw ConfigError(source_name + ": must be a YAML map (a kubeconfig)");

  std::string context_name = options.context;
  if (context_name.empty()) context_name = reader.String(root, "current-context", "");
  if (context_name.empty()) {
    throw ConfigError(reader.Where("current-context") + ": missing and no --context given");
  }
  YAML::Node context = reader.Entry(root, "contexts", "context", context_name);
  std::string context_field = "contexts[" + context_name + "].context";
  std::string cluster_name = reader.String(context, "cluster", context_field);
  std::string user_name = reader.String(context, "user", context_field);
  if (cluster_name.empty())
    throw ConfigError(reader.Where(context_field + ".cluster") + ": missing");

  ClientConfig config;
  config.source = "kubeconfig " + source_name + ", context " + context_name;
  std::string ns = reader.String(context, "namespace", context_field);
  if (!ns.empty()) config.default_namespace = ns;

  YAML::Node cluster = reader.Entry(root, "clusters", "cluster", cluster_name);
  std::string cluster_field = "clusters[" + cluster_name + "].cluster";
  config.server = reader.String(cluster, "server", cluster_field);
  CheckServer(config.server, reader.Where(cluster_field + ".server"));
  while (config.server.ends_with('/')) config.server.pop_back();
  config.ca_file = reader.Path(reader.String(cluster, "certificate-authority", cluster_field));
  std::string ca_data = reader.String(cluster, "certificate-authority-data", cluster_field);
  if (!ca_data.empty()) {
    config.ca_data =
        DecodeBase64(ca_data, reader.Where(cluster_field + ".certificate-authority-data"));
  }
  if (!reader.String(cluster, "tls-server-name", cluster_field).empty()) {
    throw ConfigError(reader.Where(cluster_field + ".tls-server-name") + ": not supported");
  }
  config.insecure_skip_tls_verify = reader.Bool(cluster, "insecure-skip-tls-verify", cluster_field);
  if (config.insecure_skip_tls_verify && !options.allow_insecure_skip_tls_verify) {
    throw ConfigError(reader.Where(cluster_field + ".insecure-skip-tls-verify") +
                      ": true, but skipping server certificate verification is not allowed "
                      "(the API server could be impersonated)");
  }

  if (!user_name.empty()) {
    YAML::Node user = reader.Entry(root, "users", "user", user_name);
    std::string user_field = "users[" + user_name + "].user";
    if (user["exec"]) {
      throw ConfigError(reader.Where(user_field + ".exec") +
                        ": exec credential plugins are not supported; use a token or client "
                        "certificate");
    }
    if (user["auth-provider"]) {
      throw ConfigError(reader.Where(user_field + ".auth-provider") + ": not supported");
    }
    config.client_cert_file = reader.Path(reader.String(user, "client-certificate", user_field));
    config.client_key_file = reader.Path(reader.String(user, "client-key", user_field));
    std::string cert_data = reader.String(user, "client-certificate-data", user_field);
    std::string key_data = reader.String(user, "client-key-data", user_field);
    if (!cert_data.empty()) {
      config.client_cert_data =
          DecodeBase64(cert_data, reader.Where(user_field + ".client-certificate-data"));
    }
    if (!key_data.empty()) {
      config.client_key_data =
          DecodeBase64(key_data, reader.Where(user_field + ".client-key-data"));
    }
    bool has_cert = !config.client_cert_file.empty() || !config.client_cert_data.empty();
    bool has_key = !config.client_key_file.empty() || !config.client_key_data.empty();
    if (has_cert != has_key) {
      throw ConfigError(reader.Where(user_field) + ": " +
                        (has_cert ? "client-certificate without client-key"
                                  : "client-key without client-certificate"));
    }
    config.token = reader.String(user, "token", user_field);
    config.token_file = reader.Path(reader.String(user, "tokenFile", user_field));
    ReadImpersonation(reader, user, user_field, config);
  }
  return config;
}

ClientConfig LoadKubeConfigFile(const std::string& path, const KubeConfigOptions& options) {
  std::string text = ReadFile(path, "kubeconfig");
  return ParseKubeConfig(text, path, fs::path(path).parent_path().string(), options);
}

bool RunningInCluster(const InClusterEnvironment& env) {
  return !Getenv(env, "KUBERNETES_SERVICE_HOST").empty() &&
         !Getenv(env, "KUBERNETES_SERVICE_PORT").empty();
}

ClientConfig InClusterConfig(const InClusterEnvironment& env) {
  std::string host = Getenv(env, "KUBERNETES_SERVICE_HOST");
  std::string port = Getenv(env, "KUBERNETES_SERVICE_PORT");
  if (host.empty() || port.empty()) {
    throw ConfigError(
        "in-cluster: KUBERNETES_SERVICE_HOST and KUBERNETES_SERVICE_PORT must be set");
  }
  if (port.find_first_not_of("0123456789") != std::string::npos) {
    throw ConfigError("in-cluster: KUBERNETES_SERVICE_PORT '" + port + "' is not a port number");
  }
  ClientConfig config;
  config.source = "in-cluster service account";
  // An IPv6 service address needs brackets in a URL.
  bool ipv6 = host.find(':') != std::string::npos;
  config.server = "https://" + (ipv6 ? "[" + host + "]" : host) + ":" + port;
  if (Trim(ReadFile(env.token_file, "in-cluster token file")).empty()) {
    throw ConfigError("in-cluster: token file " + env.token_file + " is empty");
  }
  config.token_file = env.token_file;
  if (!fs::exists(env.ca_file))
    throw ConfigError("in-cluster: CA file " + env.ca_file + " missing");
  config.ca_file = env.ca_file;
  std::error_code ignored;
  if (fs::exists(env.namespace_file, ignored)) {
    std::string ns = Trim(ReadFile(env.namespace_file, "in-cluster namespace file"));
    if (!ns.empty()) config.default_namespace = ns;
  }
  return config;
}

ClientConfig LoadClientConfig(const std::string& kubeconfig_flag, const KubeConfigOptions& options,
                              const InClusterEnvironment& env) {
  if (!kubeconfig_flag.empty()) return LoadKubeConfigFile(kubeconfig_flag, options);
  std::string list = Getenv(env, "KUBECONFIG");
  if (!list.empty()) {
    std::istringstream entries(list);
    for (std::string entry; std::getline(entries, entry, ':');) {
      if (!entry.empty() && fs::exists(entry)) return LoadKubeConfigFile(entry, options);
    }
    throw ConfigError("$KUBECONFIG=" + list + ": no such file");
  }
  if (RunningInCluster(env)) return InClusterConfig(env);
  std::string home = Getenv(env, "HOME");
  if (!home.empty() && fs::exists(home + "/.kube/config")) {
    return LoadKubeConfigFile(home + "/.kube/config", options);
  }
  throw ConfigError(
      "no Kubernetes configuration: pass --kubeconfig, set $KUBECONFIG, run in a pod, or "
      "create ~/.kube/config");
}

}  // namespace ncclguard::kube
