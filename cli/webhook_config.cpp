#include "cli/webhook_config.h"

#include <cstdlib>

namespace ncclguard::cli {

webhook::ServerConfig WebhookServerConfig(const std::string& listen,
                                          const std::string& tls_cert_file,
                                          const std::string& tls_key_file,
                                          const PolicyOptions& policy) {
  webhook::ServerConfig config;
  config.listen = listen;
  config.tls_cert_file = tls_cert_file;
  config.tls_key_file = tls_key_file;
  if (const char* own = std::getenv("POD_NAMESPACE"); own != nullptr && *own != '\0') {
    config.admit.exempt_namespaces.emplace_back(own);
  }
  config.load_policy = [policy] { return LoadPolicy(policy); };
  if (policy.policy_file) config.policy_files.push_back(*policy.policy_file);
  return config;
}

}  // namespace ncclguard::cli
