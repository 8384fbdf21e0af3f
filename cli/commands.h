#pragma once

#include <optional>
#include <string>
#include <vector>

#include "core/policy.h"

namespace ncclguard::cli {

// Exit codes of lint and fix (RULES.md): no deny finding, a deny finding, input or usage error.
inline constexpr int kExitClean = 0;
inline constexpr int kExitDenied = 1;
inline constexpr int kExitInputError = 2;

enum class OutputFormat { Text, Json };

struct PolicyOptions {
  std::optional<std::string> policy_file;
  std::optional<std::string> guide_base_url;
};

// Loads the policy file (if any) over the defaults, then applies flag overrides.
core::Policy LoadPolicy(const PolicyOptions& options);

int RunLint(const std::vector<std::string>& files, OutputFormat format,
            const PolicyOptions& options);
int RunFix(const std::vector<std::string>& files, const PolicyOptions& options);
struct WebhookOptions {
  std::string listen = "0.0.0.0:8443";
  std::string tls_cert_file;
  std::string tls_key_file;
  std::string tls_min_version = "VersionTLS13";
  std::vector<std::string> exempt_namespaces;
  PolicyOptions policy;
  int reload_interval_ms = 1000;
  int drain_timeout_ms = 20000;
  std::size_t threads = 0;  // 0: the listener's default
  std::string log_level = "info";
};

// Serves the admission webhook until SIGTERM/SIGINT, then drains and returns 0.
int RunWebhook(const WebhookOptions& options);

int RunExplain(const std::string& id, bool all, bool markdown, const PolicyOptions& options);

}  // namespace ncclguard::cli
