// The HTTPS admission server: cpprestsdk's listener with our OpenSSL context. Stateless; every
// replica serves. Endpoints: POST /mutate, /validate (the policy's mode), /mutate/enforce,
// /validate/enforce (enforce), /validate/audit (audit); GET /healthz, /readyz, /metrics.
#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "core/policy.h"
#include "memory/allocation_budget.h"
#include "memory/resident.h"
#include "webhook/admission_handler.h"
#include "webhook/file_watch.h"
#include "webhook/metrics.h"
#include "webhook/tls.h"

namespace ncclguard::webhook {

struct ServerConfig {
  std::string listen = "127.0.0.1:8443";  // host:port, [v6]:port
  std::string tls_cert_file;
  std::string tls_key_file;
  TlsVersion tls_min_version = TlsVersion::V1_3;
  AdmitOptions admit;
  // Loads the policy; throws core::PolicyError / core::InputError. Re-run when a watched file
  // changes; a policy that fails to load keeps the last good one.
  std::function<core::Policy()> load_policy = [] { return core::Policy::Defaults(); };
  std::vector<std::string> policy_files;
  // How often the certificate and policy files are checked for changes (on use, not by a timer).
  std::chrono::milliseconds reload_interval{1000};
  // kube-apiserver refuses objects over 3 MiB; a review carries object and oldObject.
  std::size_t max_body_bytes = 7u * 1024u * 1024u;
  // Memory one review may allocate (parsing, the rules, the answer), counted on every allocation
  // (memory/allocation_budget.h): past it the review is refused (413), alone.
  std::size_t max_review_bytes = std::size_t{64} << 20;
  // Memory all reviews in flight may hold together, their bodies included (twice: the listener's
  // buffer and the string read from it): past it a review is refused (503) and kube-apiserver
  // applies the webhook's failurePolicy. docs/limits.md: what the chart's 256Mi limit holds.
  std::size_t max_in_flight_bytes = std::size_t{128} << 20;
  // The container's memory limit, shared with whatever else the process holds (the controller's
  // caches): when set, the reviews in flight get at most what it leaves, re-read from the
  // process's resident size with the files (reload_interval) and before each review of 1 MiB or
  // more (memory/headroom.h). The chart passes it through the downward API
  // ($CONTAINER_MEMORY_LIMIT, cli/webhook_config.cpp).
  std::optional<std::size_t> memory_limit_bytes;
  // The process's resident size; tests give their own.
  std::function<std::optional<std::size_t>()> resident_bytes = memory::ResidentBytes;
  // Also required for /readyz (empty: nothing more). The controller's self-managed mode
  // listens with a placeholder certificate and is ready only once the real one is written.
  std::function<bool()> ready_gate;
  // Where the webhook's metrics are registered (and what its /metrics renders); null: the
  // process's registry, metrics::Global(). Tests give each server its own.
  prometheus::Registry* metrics_registry = nullptr;
  // On shutdown, how long in-flight requests may take to finish.
  std::chrono::milliseconds drain_timeout{20000};
  // On shutdown, how long the server keeps answering (each answer closing its connection) before
  // it closes the listener. In a cluster the pod leaves the Service's endpoints while it is told
  // to stop, and the API server keeps pooled keep-alive connections to it: closing at once makes
  // the next admission on such a connection fail ("broken pipe", EOF). Counted from BeginShutdown.
  std::chrono::milliseconds shutdown_delay{0};
};

class WebhookServer {
 public:
  // Loads the certificate and the policy; throws TlsError or the policy's error.
  explicit WebhookServer(ServerConfig config);
  // The policy from now on, pushed by its owner (the controller's NcclPolicy, with the catalog
  // learned from the nodes); the policy files are no longer read.
  void UsePolicy(std::shared_ptr<const core::Policy> policy);
  // Where TrainJobs' runtimes are read from now on (the controller's caches); an empty lookup:
  // nowhere, TrainJobs are judged by themselves (the default).
  void UseRuntimes(core::RuntimeLookup runtimes);
  // The gate's fast path from now on (the controller's count of validated nodes, core/gate.h);
  // an empty lookup: none, every managed job is held for the controller (the default).
  void UseGate(core::GateLookup gate);
  // Where the jobs' recorded image digests are read from now on (the controller's caches,
  // core/image_pin.h); an empty lookup: nowhere, nothing is pinned (the default).
  void UseImagePins(core::ImagePinLookup pins);
  // Where managed jobs' pods are asked to go from now on (the controller's caches,
  // core/placement_request.h); an empty lookup: nowhere, nothing is asked for (the default).
  void UsePlacement(core::PlacementLookup placement);
  ~WebhookServer();
  WebhookServer(const WebhookServer&) = delete;
  WebhookServer& operator=(const WebhookServer&) = delete;

  // Starts listening; throws std::runtime_error when the address cannot be bound.
  void Start();
  // Starts the graceful shutdown without waiting: /readyz turns 503 and every answer from now
  // on closes its connection, so clients stop reusing pooled ones. Idempotent.
  void BeginShutdown();
  // Graceful: BeginShutdown, then the server keeps answering until shutdown_delay has passed
  // since BeginShutdown and no request is in flight (at most drain_timeout after the delay), then
  // the listener closes. Idempotent.
  void Shutdown();

  // Loads the certificate files now if they changed (a writer that knows it replaced them calls
  // this, so no connection gets the old pair after it reports ready).
  void ReloadCertificateNow();

  // Listening, not draining, and the ready_gate (if any) holds.
  bool Ready() const { return ready_.load() && (!config_.ready_gate || config_.ready_gate()); }
  // Requests whose headers were read and whose answer is not yet sent.
  int InFlightRequests() const { return in_flight_.load(); }
  const Metrics& metrics() const { return metrics_; }

 private:
  struct Listener;
  class Exchange;  // one request and its answer (cpprestsdk types are kept out of this header)

  void Handle(void* request);  // web::http::http_request*
  void Route(const std::shared_ptr<Exchange>& exchange);
  void AnswerInternalError(Exchange* exchange, const char* what) noexcept;
  bool ServeStatusPage(Exchange& exchange);  // GET /healthz, /readyz, /metrics
  void ReadReview(Endpoint endpoint, std::optional<core::Mode> mode,
                  std::shared_ptr<Exchange> exchange);
  void AnswerReview(Endpoint endpoint, std::optional<core::Mode> mode, Exchange& exchange,
                    const std::string& body);
  void ReloadIfDue(bool force = false);
  // Sets what the reviews in flight may hold from the room left under config_.memory_limit_bytes:
  // with the files, and before each review whose body is kFreshHeadroomBody or more.
  void AdjustInFlightMemory();
  static constexpr std::size_t kFreshHeadroomBody = std::size_t{1} << 20;
  // "(128 MiB)", or when the room under the memory limit cut it, "(8 MiB of 128 MiB: the rest of
  // the process leaves no more under its 256 MiB memory limit)".
  std::string InFlightBudgetText() const;
  void ReloadCertificate();
  void ReloadPolicy();
  std::shared_ptr<const core::Policy> CurrentPolicy() const;
  std::shared_ptr<const ServingCertificate> CurrentCertificate() const;

  ServerConfig config_;
  Metrics metrics_;
  memory::BudgetPool memory_pool_;  // every review in flight: bodies and what they allocate
  std::unique_ptr<Listener> listener_;

  mutable std::mutex state_mutex_;  // guards the two pointers below and the watches
  std::shared_ptr<const ServingCertificate> certificate_;
  std::shared_ptr<const core::Policy> policy_;
  bool policy_pushed_ = false;  // UsePolicy was called: the files no longer count
  std::shared_ptr<const core::RuntimeLookup> runtimes_;     // UseRuntimes; guarded as the two above
  std::shared_ptr<const core::GateLookup> gate_;            // UseGate; guarded as the two above
  std::shared_ptr<const core::ImagePinLookup> image_pins_;  // UseImagePins; guarded as above
  std::shared_ptr<const core::PlacementLookup> placement_;  // UsePlacement; guarded as above
  FileWatch certificate_watch_;
  FileWatch policy_watch_;
  std::atomic<std::int64_t> next_reload_check_ns_{0};
  std::mutex reload_mutex_;
  std::mutex headroom_mutex_;  // AdjustInFlightMemory, one at a time, and memory_cut_
  bool memory_cut_ = false;    // the budget was cut below half, and has not come back whole
  // What the exchanges took from memory_pool_ for their bodies before reading them.
  std::atomic<std::size_t> held_bodies_{0};

  std::atomic<bool> ready_{false};
  std::atomic<bool> draining_{false};
  std::atomic<std::int64_t> draining_since_ns_{0};  // steady clock, set by BeginShutdown
  std::atomic<bool> closed_{false};
  std::atomic<int> answered_draining_{0};
  std::atomic<int> in_flight_{0};
};

}  // namespace ncclguard::webhook
