#include "webhook/server.h"

#include <cpprest/http_listener.h>

#include <csignal>
#include <optional>
#include <thread>

#include "core/errors.h"
#include "log/log.h"
#include "memory/headroom.h"
#include "memory/resident.h"
#include "metrics/registry.h"
#include "webhook/review_answer.h"

namespace ncclguard::webhook {
namespace {

using web::http::header_names;
using web::http::http_headers;
using web::http::http_request;
using web::http::http_response;
using web::http::methods;
using web::http::status_code;
using web::http::status_codes;
using web::http::experimental::listener::http_listener;
using web::http::experimental::listener::http_listener_config;

constexpr const char* kTextPlain = "text/plain; charset=utf-8";

std::int64_t NowNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

// An admission path: its endpoint and the mode it names. kube-apiserver sends a namespace labelled
// ncclguard.io/mode=enforce to the /enforce paths, one labelled audit to /validate/audit (audit
// changes nothing: it has no mutating path), any other to the plain paths, where the policy's
// mode holds.
struct AdmissionRoute {
  Endpoint endpoint;
  std::optional<core::Mode> mode;
};

std::optional<AdmissionRoute> AdmissionEndpoint(const std::string& path) {
  if (path == "/mutate") return AdmissionRoute{Endpoint::Mutate, std::nullopt};
  if (path == "/validate") return AdmissionRoute{Endpoint::Validate, std::nullopt};
  if (path == "/mutate/enforce") return AdmissionRoute{Endpoint::Mutate, core::Mode::Enforce};
  if (path == "/validate/enforce") return AdmissionRoute{Endpoint::Validate, core::Mode::Enforce};
  if (path == "/validate/audit") return AdmissionRoute{Endpoint::Validate, core::Mode::Audit};
  return std::nullopt;
}

// A request answered before its body is read: status, the result its metric counts, the reason
// (body and log), and whether the connection closes because its body will not be read.
struct Refusal {
  status_code code;
  std::string_view result;
  std::string reason;
  bool close = false;
};

std::optional<Refusal> CheckBodyHeaders(const http_headers& headers, std::size_t max_body_bytes) {
  const std::string content_type = headers.content_type();
  if (content_type.rfind("application/json", 0) != 0) {
    return Refusal{status_codes::UnsupportedMediaType, "bad_content_type",
                   "Content-Type must be application/json, not '" + content_type + "'"};
  }
  std::uint64_t length = 0;
  if (!headers.match(header_names::content_length, length)) {
    return Refusal{status_codes::LengthRequired, "no_content_length",
                   "a Content-Length header is required"};
  }
  if (length > max_body_bytes) {
    return Refusal{status_codes::RequestEntityTooLarge, "too_large",
                   "body of " + std::to_string(length) + " bytes exceeds the limit of " +
                       std::to_string(max_body_bytes),
                   /*close=*/true};
  }
  return std::nullopt;
}

void LogAdmission(std::string_view endpoint, const RequestSummary& request,
                  const AdmissionOutcome& outcome, double seconds, std::size_t memory_bytes) {
  const bool failed = outcome.result == AdmitResult::Error;
  const log::Level level = failed ? log::Level::Error : log::Level::Info;
  if (!log::Enabled(level)) return;
  log::Value rules = log::Value::array();
  for (const auto& finding : outcome.findings) rules.push_back(finding.rule);
  log::Fields fields{{"endpoint", endpoint},
                     {"uid", request.uid},
                     {"operation", request.operation},
                     {"kind", request.kind},
                     {"namespace", request.namespace_},
                     // A CREATE with generateName has no name yet; the object may still carry one.
                     {"name", request.name.empty() ? outcome.object.name : request.name},
                     {"result", AdmitResultName(outcome.result)},
                     {"rules", std::move(rules)},
                     {"dryRun", request.dry_run},
                     {"durationMs", seconds * 1000.0},
                     {"memoryBytes", memory_bytes}};
  if (failed) fields.push_back({"error", outcome.response.message});
  log::Write(level, "admission", fields);
}

}  // namespace

struct WebhookServer::Listener {
  std::unique_ptr<http_listener> listener;
};

// One request and its answer. It counts as in flight from arrival until the listener has written
// the answer (request.reply only queues it), so a graceful shutdown never closes a connection
// mid-answer.
class WebhookServer::Exchange : public std::enable_shared_from_this<Exchange> {
 public:
  Exchange(WebhookServer& server, http_request request)
      : server_(server),
        request_(std::move(request)),
        path_(request_.relative_uri().path()),
        start_(std::chrono::steady_clock::now()) {
    ++server_.in_flight_;
  }
  ~Exchange() {
    server_.memory_pool_.Give(body_bytes_);
    server_.held_bodies_.fetch_sub(body_bytes_, std::memory_order_relaxed);
    --server_.in_flight_;
  }
  Exchange(const Exchange&) = delete;
  Exchange& operator=(const Exchange&) = delete;

  http_request& request() { return request_; }
  const std::string& path() const { return path_; }
  // Takes the body's memory from the in-flight pool until the answer is written: twice its
  // length, for the listener's buffer and the string the review is read from.
  bool HoldBody(std::size_t length) {
    if (!server_.memory_pool_.TryTake(2 * length)) return false;
    body_bytes_ = 2 * length;
    server_.held_bodies_.fetch_add(body_bytes_, std::memory_order_relaxed);
    return true;
  }
  double Seconds() const {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  }

  // Sends the answer; draining, every answer closes its connection.
  void Reply(status_code code, std::string body, const std::string& content_type,
             bool close = false) {
    http_response response(code);
    if (server_.draining_.load()) {
      ++server_.answered_draining_;
      close = true;
    }
    if (close) response.headers().add(header_names::connection, "close");
    response.set_body(std::move(body), content_type);
    request_.reply(response).then([hold = shared_from_this()](pplx::task<void> written) {
      try {
        written.get();
      } catch (const std::exception&) {
        // The client went away; nothing is left to do for this request.
      }
    });
  }

  // Counts the request in /metrics under `endpoint` and `result`, then replies.
  void Answer(std::string_view endpoint, status_code code, std::string_view result,
              std::string body, const std::string& content_type, bool close = false) {
    server_.metrics_.CountRequest(endpoint, result, Seconds());
    Reply(code, std::move(body), content_type, close);
  }

  void Refuse(std::string_view endpoint, const Refusal& refusal) {
    log::Warn("request refused", {{"endpoint", endpoint},
                                  {"path", path_},
                                  {"status", refusal.code},
                                  {"reason", refusal.reason}});
    Answer(endpoint, refusal.code, refusal.result, refusal.reason + "\n", kTextPlain,
           refusal.close);
  }

 private:
  WebhookServer& server_;
  http_request request_;
  const std::string path_;
  const std::chrono::steady_clock::time_point start_;
  std::size_t body_bytes_ = 0;
};

WebhookServer::WebhookServer(ServerConfig config)
    : config_(std::move(config)),
      metrics_(config_.metrics_registry != nullptr ? *config_.metrics_registry : metrics::Global()),
      memory_pool_(config_.max_in_flight_bytes),
      listener_(std::make_unique<Listener>()),
      certificate_watch_({config_.tls_cert_file, config_.tls_key_file}),
      policy_watch_(config_.policy_files) {
  certificate_ = ServingCertificate::Load(config_.tls_cert_file, config_.tls_key_file);
  metrics_.SetCertificateExpiry(certificate_->NotAfterUnix());
  metrics_.SetInFlightMemory(config_.max_in_flight_bytes);
  AdjustInFlightMemory();
  policy_ = std::make_shared<const core::Policy>(config_.load_policy());
  // Requests find runtimes through this, whatever UseRuntimes sets later.
  if (!config_.admit.runtimes) {
    config_.admit.runtimes = [this](const core::RuntimeRef& ref,
                                    std::string_view ns) -> std::optional<core::Json> {
      std::shared_ptr<const core::RuntimeLookup> runtimes;
      {
        std::lock_guard lock(state_mutex_);
        runtimes = runtimes_;
      }
      if (!runtimes) return std::nullopt;
      return (*runtimes)(ref, ns);
    };
  }
  // And the gate's fast path, once the controller's caches give one (UseGate).
  if (!config_.admit.gate) {
    config_.admit.gate = [this](const core::Json& job, const core::Policy& policy,
                                const core::RuntimeLookup& runtimes) {
      std::shared_ptr<const core::GateLookup> gate;
      {
        std::lock_guard lock(state_mutex_);
        gate = gate_;
      }
      return gate && (*gate)(job, policy, runtimes);
    };
  }
  // And the jobs' image digests, once the controller's caches give them (UseImagePins).
  if (!config_.admit.image_pins) {
    config_.admit.image_pins = [this](const core::Json& pod, std::string_view ns,
                                      core::PinMode mode) -> std::optional<core::JobImagePins> {
      std::shared_ptr<const core::ImagePinLookup> pins;
      {
        std::lock_guard lock(state_mutex_);
        pins = image_pins_;
      }
      if (!pins) return std::nullopt;
      return (*pins)(pod, ns, mode);
    };
  }
  // And where jobs' pods are asked to go, once the controller's caches say (UsePlacement).
  if (!config_.admit.placement) {
    config_.admit.placement =
        [this](const core::Json& object, const core::Workload& workload, std::string_view ns,
               core::PlacementMode mode) -> std::optional<core::PlacementRequest> {
      std::shared_ptr<const core::PlacementLookup> placement;
      {
        std::lock_guard lock(state_mutex_);
        placement = placement_;
      }
      if (!placement) return std::nullopt;
      return (*placement)(object, workload, ns, mode);
    };
  }
}

WebhookServer::~WebhookServer() {
  try {
    Shutdown();
  } catch (const std::exception& e) {
    log::Error("webhook shutdown failed", {{"error", e.what()}});
  }
}

void WebhookServer::UsePolicy(std::shared_ptr<const core::Policy> policy) {
  if (!policy) return;
  std::lock_guard lock(state_mutex_);
  policy_ = std::move(policy);
  policy_pushed_ = true;
}

void WebhookServer::UseGate(core::GateLookup gate) {
  auto next = gate ? std::make_shared<const core::GateLookup>(std::move(gate)) : nullptr;
  std::lock_guard lock(state_mutex_);
  gate_ = std::move(next);
}

void WebhookServer::UseRuntimes(core::RuntimeLookup runtimes) {
  auto next = runtimes ? std::make_shared<const core::RuntimeLookup>(std::move(runtimes)) : nullptr;
  std::lock_guard lock(state_mutex_);
  runtimes_ = std::move(next);
}

void WebhookServer::UseImagePins(core::ImagePinLookup pins) {
  auto next = pins ? std::make_shared<const core::ImagePinLookup>(std::move(pins)) : nullptr;
  std::lock_guard lock(state_mutex_);
  image_pins_ = std::move(next);
}

void WebhookServer::UsePlacement(core::PlacementLookup placement) {
  auto next =
      placement ? std::make_shared<const core::PlacementLookup>(std::move(placement)) : nullptr;
  std::lock_guard lock(state_mutex_);
  placement_ = std::move(next);
}

std::shared_ptr<const core::Policy> WebhookServer::CurrentPolicy() const {
  std::lock_guard lock(state_mutex_);
  return policy_;
}

std::shared_ptr<const ServingCertificate> WebhookServer::CurrentCertificate() const {
  std::lock_guard lock(state_mutex_);
  return certificate_;
}

void WebhookServer::ReloadCertificateNow() { ReloadIfDue(/*force=*/true); }

void WebhookServer::ReloadIfDue(bool force) {
  const std::int64_t now = NowNs();
  if (!force && now < next_reload_check_ns_.load(std::memory_order_relaxed)) return;
  std::unique_lock reload(reload_mutex_, std::defer_lock);
  if (force) {
    reload.lock();
  } else if (!reload.try_lock()) {
    return;  // another thread is checking
  }
  next_reload_check_ns_.store(
      now + std::chrono::duration_cast<std::chrono::nanoseconds>(config_.reload_interval).count());

  if (certificate_watch_.Changed()) ReloadCertificate();
  if (policy_watch_.Changed()) ReloadPolicy();
  AdjustInFlightMemory();
}

void WebhookServer::AdjustInFlightMemory() {
  if (!config_.memory_limit_bytes) return;
  std::lock_guard lock(headroom_mutex_);
  const std::optional<std::size_t> resident = config_.resident_bytes();
  if (!resident) return;
  const std::size_t limit = *config_.memory_limit_bytes;
  const std::size_t configured = config_.max_in_flight_bytes;
  // What the reviews allocated: the budget in use less the bodies held for reading, which are
  // not all resident yet.
  const std::size_t in_use = memory_pool_.InUse();
  const std::size_t bodies = held_bodies_.load(std::memory_order_relaxed);
  const std::size_t allocated = in_use > bodies ? in_use - bodies : 0;
  const std::size_t capacity = memory::InFlightCapacity(limit, *resident, allocated, configured);
  memory_pool_.SetCapacity(capacity);
  metrics_.SetInFlightMemory(capacity);
  // Told once a cut below half starts, and once the whole budget is back: not at every step of
  // a process that rests near the line.
  const bool starts = !memory_cut_ && capacity < configured / 2;
  const bool ends = memory_cut_ && capacity >= configured;
  if (!starts && !ends) return;
  memory_cut_ = starts;
  const log::Fields fields = {
      {"inFlightBudgetBytes", capacity}, {"residentBytes", *resident}, {"memoryLimitBytes", limit}};
  if (starts) {
    log::Write(log::Level::Warn,
               "the rest of the process leaves the reviews in flight less than half their memory "
               "budget under the memory limit: large reviews are refused (503)",
               fields);
  } else {
    log::Write(log::Level::Info, "the reviews in flight have their whole memory budget again",
               fields);
  }
}

std::string WebhookServer::InFlightBudgetText() const {
  const std::size_t capacity = memory_pool_.Capacity();
  std::string text = "(" + std::to_string(capacity >> 20) + " MiB";
  if (capacity < config_.max_in_flight_bytes && config_.memory_limit_bytes) {
    text += " of " + std::to_string(config_.max_in_flight_bytes >> 20) +
            " MiB: the rest of the process leaves no more under its " +
            std::to_string(*config_.memory_limit_bytes >> 20) + " MiB memory limit";
  }
  return text + ")";
}

void WebhookServer::ReloadCertificate() {
  try {
    auto loaded = ServingCertificate::Load(config_.tls_cert_file, config_.tls_key_file);
    {
      std::lock_guard lock(state_mutex_);
      certificate_ = loaded;
    }
    certificate_watch_.Accept();
    metrics_.CountCertificateReload(true);
    metrics_.SetCertificateExpiry(loaded->NotAfterUnix());
    log::Info("serving certificate reloaded",
              {{"subject", loaded->Subject()}, {"notAfter", loaded->NotAfterUnix()}});
  } catch (const TlsError& e) {
    // Mid-rotation the key may not match the certificate yet: keep serving, retry later.
    metrics_.CountCertificateReload(false);
    log::Warn("serving certificate not reloaded; keeping the previous one", {{"error", e.what()}});
  }
}

void WebhookServer::ReloadPolicy() {
  try {
    auto loaded = std::make_shared<const core::Policy>(config_.load_policy());
    {
      std::lock_guard lock(state_mutex_);
      if (policy_pushed_) {
        policy_watch_.Accept();
        return;  // its owner's policy stands
      }
      policy_ = loaded;
    }
    policy_watch_.Accept();
    metrics_.CountPolicyReload(true);
    log::Info("policy reloaded");
  } catch (const std::exception& e) {
    metrics_.CountPolicyReload(false);
    policy_watch_.Accept();  // a broken file is reported once, not on every check
    log::Error("policy not reloaded; keeping the previous one", {{"error", e.what()}});
  }
}

void WebhookServer::Start() {
  // OpenSSL writes to sockets with write(2): a client that hangs up mid-answer must not kill the
  // process with SIGPIPE.
  std::signal(SIGPIPE, SIG_IGN);
  http_listener_config listener_config;
  listener_config.set_ssl_context_callback([this](boost::asio::ssl::context& context) {
    // Called for every new connection: a rotated certificate is used from the next handshake.
    ReloadIfDue();
    CurrentCertificate()->Configure(context.native_handle(), config_.tls_min_version);
  });
  web::uri uri;
  try {
    uri = web::uri("https://" + config_.listen + "/");
  } catch (const web::uri_exception& e) {
    throw std::runtime_error("--listen " + config_.listen + ": not host:port: " + e.what());
  }
  if (uri.port() <= 0) throw std::runtime_error("--listen " + config_.listen + ": no port");
  listener_->listener = std::make_unique<http_listener>(uri, listener_config);
  listener_->listener->support([this](http_request request) { Handle(&request); });
  try {
    listener_->listener->open().wait();
  } catch (const std::exception& e) {
    listener_->listener.reset();
    throw std::runtime_error("listening on " + config_.listen + ": " + e.what());
  }
  ready_ = true;
  log::Info("webhook listening",
            {{"listen", config_.listen}, {"certificate", CurrentCertificate()->Subject()}});
}

void WebhookServer::BeginShutdown() {
  if (!listener_->listener) return;
  // The start time is set before draining_, so whoever sees draining_ also sees when it began.
  std::int64_t unset = 0;
  const std::int64_t now = std::chrono::steady_clock::now().time_since_epoch().count();
  if (!draining_since_ns_.compare_exchange_strong(unset, now)) return;
  ready_ = false;
  draining_ = true;
  log::Info("webhook draining", {{"shutdownDelayMs", config_.shutdown_delay.count()},
                                 {"drainTimeoutMs", config_.drain_timeout.count()}});
}

void WebhookServer::Shutdown() {
  if (!listener_->listener || closed_.exchange(true)) return;
  BeginShutdown();
  using Clock = std::chrono::steady_clock;
  const Clock::time_point since{Clock::duration{draining_since_ns_.load()}};
  const Clock::time_point delay_end = since + config_.shutdown_delay;
  const Clock::time_point deadline = delay_end + config_.drain_timeout;
  while (Clock::now() < delay_end || (in_flight_.load() > 0 && Clock::now() < deadline)) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  const int abandoned = in_flight_.load();
  listener_->listener->close().wait();
  listener_->listener.reset();
  log::Info("webhook stopped", {{"answeredWhileDraining", answered_draining_.load()},
                                {"abandonedRequests", abandoned}});
}

void WebhookServer::Handle(void* raw_request) {
  // Nothing may escape into the listener: an exception there ends the process.
  std::shared_ptr<Exchange> exchange;
  try {
    exchange = std::make_shared<Exchange>(*this, *static_cast<http_request*>(raw_request));
    Route(exchange);
  } catch (const std::exception& e) {
    AnswerInternalError(exchange.get(), e.what());
  } catch (...) {
    AnswerInternalError(exchange.get(), "unknown exception");
  }
}

void WebhookServer::AnswerInternalError(Exchange* exchange, const char* what) noexcept {
  try {
    log::Error("request failed", {{"error", what}});
    if (exchange != nullptr) {
      exchange->Answer("other", status_codes::InternalError, "error", "internal error\n",
                       kTextPlain, /*close=*/true);
    }
  } catch (...) {
    // Out of memory even for the answer: the request object, once dropped, closes the
    // connection; the process keeps serving.
  }
}

void WebhookServer::Route(const std::shared_ptr<Exchange>& exchange) {
  const http_request& request = exchange->request();
  const std::string& path = exchange->path();
  if (request.method() == methods::GET && ServeStatusPage(*exchange)) return;
  const std::optional<AdmissionRoute> route = AdmissionEndpoint(path);
  if (!route) {
    return exchange->Refuse("other",
                            {status_codes::NotFound, "not_found", "no such path: " + path});
  }
  if (request.method() != methods::POST) {
    return exchange->Refuse("other", {status_codes::MethodNotAllowed, "method_not_allowed",
                                      request.method() + " " + path + ": use POST"});
  }
  if (auto refusal = CheckBodyHeaders(request.headers(), config_.max_body_bytes)) {
    return exchange->Refuse(EndpointName(route->endpoint), *refusal);
  }
  const std::size_t length = request.headers().content_length();
  // A large body: the room under the memory limit as it is now, not as it was up to a second
  // ago (the pages a burst just freed may still be resident).
  if (length >= kFreshHeadroomBody) AdjustInFlightMemory();
  if (!exchange->HoldBody(length)) {
    return exchange->Refuse(
        EndpointName(route->endpoint),
        {status_codes::ServiceUnavailable, "busy",
         "the memory budget for reviews in flight " + InFlightBudgetText() + " is spent; retry",
         /*close=*/true});
  }
  ReloadIfDue();
  ReadReview(route->endpoint, route->mode, exchange);
}

void WebhookServer::ReadReview(Endpoint endpoint, std::optional<core::Mode> mode,
                               std::shared_ptr<Exchange> exchange) {
  http_request& request = exchange->request();
  request.extract_utf8string(/*ignore_content_type=*/true)
      .then([this, endpoint, mode, exchange = std::move(exchange)](pplx::task<std::string> read) {
        std::string body;
        try {
          body = read.get();
        } catch (const std::exception& e) {
          // The body was cut short (a half-closed or vanished client). A half-closed client can
          // still read the reason; then the connection is closed.
          log::Warn("request body not received",
                    {{"endpoint", EndpointName(endpoint)}, {"error", e.what()}});
          try {
            exchange->Answer(EndpointName(endpoint), status_codes::BadRequest, "client_error",
                             "request body incomplete\n", kTextPlain, /*close=*/true);
          } catch (const std::exception&) {
          }
          return;
        }
        try {
          AnswerReview(endpoint, mode, *exchange, body);
        } catch (const std::exception& e) {
          AnswerInternalError(exchange.get(), e.what());
        } catch (...) {
          AnswerInternalError(exchange.get(), "unknown exception");
        }
      });
}

bool WebhookServer::ServeStatusPage(Exchange& exchange) {
  const std::string& path = exchange.path();
  if (path == "/healthz") {
    exchange.Answer("healthz", status_codes::OK, "ok", "ok\n", "text/plain");
  } else if (path == "/readyz" && Ready()) {
    exchange.Answer("readyz", status_codes::OK, "ok", "ok\n", "text/plain");
  } else if (path == "/readyz") {
    exchange.Answer("readyz", status_codes::ServiceUnavailable, "not_ready", "not ready\n",
                    "text/plain");
  } else if (path == "/metrics") {
    exchange.Answer("metrics", status_codes::OK, "ok", metrics_.Render(),
                    "text/plain; version=0.0.4");
  } else {
    return false;
  }
  return true;
}

// Decode, evaluate, encode: the review is parsed once and its object moved into the rules.
void WebhookServer::AnswerReview(Endpoint endpoint, std::optional<core::Mode> mode,
                                 Exchange& exchange, const std::string& body) {
  const std::string_view endpoint_name = EndpointName(endpoint);
  ReviewAnswer answer;
  std::optional<Refusal> refusal;
  std::size_t memory_bytes = 0;
  {
    // Every allocation of the review counts, from parsing to the answer's bytes.
    memory::BudgetScope budget(config_.max_review_bytes, &memory_pool_);
    try {
      answer = webhook::AnswerReview(endpoint, body, *CurrentPolicy(), config_.admit, mode);
    } catch (const memory::BudgetExceeded& e) {
      // The pool: said as the refusal before the body is read says it.
      refusal = e.Pool() ? Refusal{status_codes::ServiceUnavailable, "busy",
                                   "the memory budget for reviews in flight " +
                                       InFlightBudgetText() + " is spent; retry"}
                         : Refusal{status_codes::RequestEntityTooLarge, "too_large",
                                   "reading the review needs more than its memory budget of " +
                                       std::to_string(config_.max_review_bytes >> 20) + " MiB"};
    } catch (const std::bad_alloc&) {
      refusal = Refusal{status_codes::ServiceUnavailable, "out_of_memory",
                        "out of memory while reading the review; retry"};
    }
    memory_bytes = budget.Peak();
  }
  if (refusal) return exchange.Refuse(endpoint_name, *refusal);
  if (!answer.decoded) {
    log::Warn("invalid AdmissionReview",
              {{"endpoint", endpoint_name}, {"status", 400}, {"error", answer.error}});
    return exchange.Answer(endpoint_name, status_codes::BadRequest, "bad_request",
                           "invalid AdmissionReview: " + answer.error + "\n", kTextPlain);
  }
  const AdmissionOutcome& outcome = answer.outcome;
  const double seconds = exchange.Seconds();
  metrics_.CountAdmission(endpoint_name, AdmitResultName(outcome.result), seconds, outcome.findings,
                          outcome.audit);
  if (outcome.gate != GateDecision::None) {
    metrics_.CountGateDecision(outcome.gate == GateDecision::Admitted);
  }
  exchange.Reply(status_codes::OK, std::move(answer.body), "application/json");
  LogAdmission(endpoint_name, answer.request, outcome, seconds, memory_bytes);
}

}  // namespace ncclguard::webhook
