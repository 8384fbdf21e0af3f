// Keeps the webhook's self-managed certificates (manager/webhook_certs.h) in a Secret, the
// serving certificate and key in files the webhook server reloads, and the CA bundle in the
// webhook configurations. Runs on every replica (not only the leader): any replica may create
// or rotate the Secret, and all serve what it holds (docs/certificates.md).
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "core/json.h"
#include "kube/client.h"
#include "kube/owner_reference.h"
#include "kube/stop_token.h"
#include "manager/controller_module.h"
#include "manager/metrics.h"
#include "manager/webhook_certs.h"

namespace ncclguard::manager {

struct WebhookCertOptions {
  std::string namespace_;   // the controller's own namespace
  std::string secret_name;  // --webhook-cert-secret
  std::string service_name = "ncclguard-webhook";
  std::vector<std::string> extra_hosts;          // --webhook-host
  std::string configuration_name = "ncclguard";  // both webhook configurations
  std::string cert_dir = "/var/run/ncclguard/certs";
  CertLifetimes lifetimes;
  // How often the Secret and the configurations are read again (rotation by another replica,
  // a caBundle reset by someone else, a configuration created later).
  std::chrono::milliseconds sync_interval{10000};
  std::chrono::milliseconds retry_interval{2000};  // after a failed sync
  std::function<std::int64_t()> now;               // unix seconds; default: the system clock
  // Called after new certificate files were written, before CertificateReady() turns true:
  // the server loads them at once (WebhookServer::ReloadCertificateNow).
  std::function<void()> files_written;
  // Set on the Secret when created, and added to one without it, so that the garbage collector
  // deletes the Secret (and the CA key in it) with its owner. None: no owner reference.
  std::optional<kube::OwnerReference> owner;
  // Where the CA's expiry is reported (ncclguard_webhook_ca_expiry_timestamp_seconds); null:
  // Metrics::Process().
  Metrics* metrics = nullptr;
};

// The RBAC the certificate manager needs (beside the controllers' own; RequiredAccess): create
// the Secret in its namespace, then read and rewrite that Secret only; read and patch the caBundle
// of the two webhook configurations of that name only.
std::vector<Access> WebhookCertAccess(const WebhookCertOptions& options);

// The certificate Secret created with `data` (decoded values, e.g. from ApplyCertAction): type
// kubernetes.io/tls, labelled, owned by options.owner when set.
core::Json NewCertSecret(const WebhookCertOptions& options,
                         const std::map<std::string, std::string>& data);

class WebhookCertManager {
 public:
  // Throws CertError for unusable options (a bad host, lifetimes that cannot work).
  WebhookCertManager(kube::Client client, WebhookCertOptions options);

  // One pass: read the Secret, create / repair / rotate it, write the files, patch the bundle.
  // Throws kube::ApiError (or CertError) when a step fails; the next pass retries.
  void SyncOnce();
  // SyncOnce every sync_interval until `stop`; failures are logged and retried.
  void Run(const kube::StopToken& stop);

  // When --cert-dir holds no certificate yet: writes one from a throwaway CA, so the webhook
  // server can listen (and answer /readyz with 503) before the real one arrives. A pair left
  // by an earlier run of the container is kept. Throws CertError when the files cannot be
  // written.
  void WritePlaceholderIfMissing();

  // True once the serving certificate from the Secret was written.
  bool CertificateReady() const { return ready_.load(); }
  // Blocks until CertificateReady() or `stop`; returns CertificateReady().
  bool WaitUntilReady(const kube::StopToken& stop) const;

  std::string cert_file() const;
  std::string key_file() const;
  const std::vector<std::string>& hosts() const { return hosts_; }
  // The bundle last written to the configurations (PEM), for tests and logs.
  std::string ca_bundle() const;

 private:
  // Makes every webhook of both configurations carry `bundle_pem`. Returns true when all that
  // exist already did (nothing patched), i.e. the API server trusts every CA in it.
  bool EnsureBundle(const std::string& bundle_pem);
  void WriteFiles(const std::string& cert_pem, const std::string& key_pem, bool from_secret);
  // ncclguard_webhook_ca_expiry_timestamp_seconds: the latest notAfter of the bundle's CAs.
  void ReportCaExpiry(const std::string& bundle_pem);
  std::int64_t Now() const;

  kube::Client client_;
  WebhookCertOptions options_;
  std::vector<std::string> hosts_;
  std::atomic<bool> ready_{false};
  mutable std::mutex mutex_;
  std::string bundle_;
  std::vector<std::string> missing_configurations_;  // reported once each, not every pass
};

}  // namespace ncclguard::manager
