#include "cli/webhook_config.h"

#include <cstdlib>
#include <stdexcept>

#include "memory/headroom.h"

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
  // The container's memory limit, from the downward API (resourceFieldRef limits.memory): the
  // webhook's reviews in flight get what the controller's caches leave under it.
  if (const char* limit = std::getenv("CONTAINER_MEMORY_LIMIT"); limit != nullptr) {
    config.memory_limit_bytes = memory::ParseMemoryLimit(limit);
    if (!config.memory_limit_bytes) {
      throw std::runtime_error(std::string("$CONTAINER_MEMORY_LIMIT: \"") + limit +
                               "\" is not a memory limit in bytes (a whole number from 1 to 2^50)");
    }
  }
  config.load_policy = [policy] { return LoadPolicy(policy); };
  if (policy.policy_file) config.policy_files.push_back(*policy.policy_file);
  return config;
}

}  // namespace ncclguard::cli
