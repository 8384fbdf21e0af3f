// The webhook server settings both `ncclguard webhook` and `ncclguard controller` use.
#pragma once

#include <string>

#include "cli/policy_flags.h"
#include "webhook/server.h"

namespace ncclguard::cli {

// The listen address, certificate files, the policy (re-read when its file changes),
// $POD_NAMESPACE exempt beside kube-system and $CONTAINER_MEMORY_LIMIT (bytes) as the memory
// limit the reviews in flight share with the rest of the process. Throws std::runtime_error on a
// $CONTAINER_MEMORY_LIMIT that is not a whole number of bytes.
webhook::ServerConfig WebhookServerConfig(const std::string& listen,
                                          const std::string& tls_cert_file,
                                          const std::string& tls_key_file,
                                          const PolicyOptions& policy);

}  // namespace ncclguard::cli
