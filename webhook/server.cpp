#include "webhook/server.h"

#include <spdlog/spdlog.h>

#include <cpprest/http_listener.h>

#include <csignal>
#include <thread>

#include "core/errors.h"

namespace ncclguard::webhook {
namespace {

using web::http::header_names;
using web::http::http_request;
using web::http::http_response;
using web::http::methods;
using web::http::status_code;
using web::http::status_codes;
using web::http::experimental::listener::http_listener;
using web::http::experimental::listener::http_listener_config;

std::int64_t NowNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

double SecondsSince(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

void LogLine(spdlog::level::level_enum level, const core::Json& fields) {
  if (!spdlog::should_log(level)) return;
  spdlog::log(level, "{}", fields.dump(-1, ' ', false, core::Json::error_handler_t::replace));
}

}  // namespace

struct WebhookServer::Listener {
  std::unique_ptr<http_listener> listener;
};

// Counts a request from arrival until its answer is written to the connection.
class WebhookServer::InFlight {
 public:
  explicit InFlight(std::atomic<int>& counter) : counter_(counter) { ++counter_; }
  ~InFlight() { --counter_; }
  InFlight(const InFlight&) = delete;
  InFlight& operator=(const InFlight&) = delete;

 private:
  std::atomic<int>& counter_;
};

namespace {

// request.reply only queues the answer; `hold` (the request's InFlight count) lives until the
// listener has written it, so a graceful shutdown never closes a connection mid-answer.
void Reply(http_request& request, const http_response& response, std::shared_ptr<void> hold) {
  request.reply(response).then([hold = std::move(hold)](pplx::task<void> written) {
    try {
      written.get();
    } catch (const std::exception&) {
      // The client went away; nothing is left to do for this request.
    }
  });
}

}  // namespace

WebhookServer::WebhookServer(ServerConfig config)
    : config_(std::move(config)),
      listener_(std::make_unique<Listener>()),
      certificate_watch_({config_.tls_cert_file, config_.tls_key_file}),
      policy_watch_(config_.policy_files) {
  certificate_ = ServingCertificate::Load(config_.tls_cert_file, config_.tls_key_file);
  metrics_.SetCertificateExpiry(certificate_->NotAfterUnix());
  policy_ = std::make_shared<const core::Policy>(config_.load_policy());
}

WebhookServer::~WebhookServer() {
  try {
    Shutdown();
  } catch (const std::exception& e) {
    spdlog::error("webhook: shutdown: {}", e.what());
  }
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

  if (certificate_watch_.Changed()) {
    try {
      auto loaded = ServingCertificate::Load(config_.tls_cert_file, config_.tls_key_file);
      {
        std::lock_guard lock(state_mutex_);
        certificate_ = loaded;
      }
      certificate_watch_.Accept();
      metrics_.CountCertificateReload(true);
      metrics_.SetCertificateExpiry(loaded->NotAfterUnix());
      LogLine(spdlog::level::info, {{"msg", "serving certificate reloaded"},
                                    {"subject", loaded->Subject()},
                                    {"notAfter", loaded->NotAfterUnix()}});
    } catch (const TlsError& e) {
      // Mid-rotation the key may not match the certificate yet: keep serving, retry later.
      metrics_.CountCertificateReload(false);
      LogLine(spdlog::level::warn,
              {{"msg", "serving certificate not reloaded; keeping the previous one"},
               {"error", e.what()}});
    }
  }
  if (policy_watch_.Changed()) {
    try {
      auto loaded = std::make_shared<const core::Policy>(config_.load_policy());
      {
        std::lock_guard lock(state_mutex_);
        policy_ = loaded;
      }
      policy_watch_.Accept();
      metrics_.CountPolicyReload(true);
      LogLine(spdlog::level::info, {{"msg", "policy reloaded"}});
    } catch (const std::exception& e) {
      metrics_.CountPolicyReload(false);
      policy_watch_.Accept();  // a broken file is reported once, not on every check
      LogLine(spdlog::level::err,
              {{"msg", "policy not reloaded; keeping the previous one"}, {"error", e.what()}});
    }
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
  LogLine(spdlog::level::info, {{"msg", "webhook listening"},
                                {"listen", config_.listen},
                                {"certificate", CurrentCertificate()->Subject()}});
}

void WebhookServer::Shutdown() {
  if (!listener_->listener || draining_.exchange(true)) return;
  ready_ = false;
  const auto deadline = std::chrono::steady_clock::now() + config_.drain_timeout;
  while (in_flight_.load() > 0 && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  const int abandoned = in_flight_.load();
  listener_->listener->close().wait();
  listener_->listener.reset();
  LogLine(spdlog::level::info, {{"msg", "webhook stopped"}, {"abandonedRequests", abandoned}});
}

void WebhookServer::Handle(void* raw_request) {
  http_request request = *static_cast<http_request*>(raw_request);
  const auto start = std::chrono::steady_clock::now();
  auto in_flight = std::make_shared<InFlight>(in_flight_);
  const std::string path = request.relative_uri().path();

  auto reply = [this, &request, start, &in_flight](std::string_view endpoint, status_code code,
                                                   std::string_view result, std::string body,
                                                   std::string content_type) {
    http_response response(code);
    if (draining_.load()) response.headers().add(header_names::connection, "close");
    response.set_body(std::move(body), content_type);
    Reply(request, response, in_flight);
    metrics_.CountRequest(endpoint, result, SecondsSince(start));
  };
  auto refuse = [&](std::string_view endpoint, status_code code, std::string_view result,
                    const std::string& reason) {
    LogLine(spdlog::level::warn, {{"msg", "request refused"},
                                  {"endpoint", endpoint},
                                  {"path", path},
                                  {"status", code},
                                  {"reason", reason}});
    reply(endpoint, code, result, reason + "\n", "text/plain; charset=utf-8");
  };

  if (request.method() == methods::GET) {
    if (path == "/healthz") return reply("healthz", status_codes::OK, "ok", "ok\n", "text/plain");
    if (path == "/readyz") {
      return Ready() ? reply("readyz", status_codes::OK, "ok", "ok\n", "text/plain")
                     : reply("readyz", status_codes::ServiceUnavailable, "not_ready", "not ready\n",
                             "text/plain");
    }
    if (path == "/metrics") {
      return reply("metrics", status_codes::OK, "ok", metrics_.Render(),
                   "text/plain; version=0.0.4");
    }
  }
  const bool admission_path = path == "/mutate" || path == "/validate";
  if (!admission_path) {
    if (request.method() == methods::GET) {
      return refuse("other", status_codes::NotFound, "not_found", "no such path: " + path);
    }
  }
  if (!admission_path || request.method() != methods::POST) {
    return refuse(
        "other", admission_path ? status_codes::MethodNotAllowed : status_codes::NotFound,
        admission_path ? "method_not_allowed" : "not_found",
        admission_path ? request.method() + " " + path + ": use POST" : "no such path: " + path);
  }
  const Endpoint endpoint = path == "/mutate" ? Endpoint::Mutate : Endpoint::Validate;
  const std::string_view endpoint_name = EndpointName(endpoint);

  const std::string content_type = request.headers().content_type();
  if (content_type.rfind("application/json", 0) != 0) {
    return refuse(endpoint_name, status_codes::UnsupportedMediaType, "bad_content_type",
                  "Content-Type must be application/json, not '" + content_type + "'");
  }
  std::uint64_t length = 0;
  if (!request.headers().match(header_names::content_length, length)) {
    return refuse(endpoint_name, status_codes::LengthRequired, "no_content_length",
                  "a Content-Length header is required");
  }
  if (length > config_.max_body_bytes) {
    // Close the connection: its body will not be read.
    http_response response(status_codes::RequestEntityTooLarge);
    response.headers().add(header_names::connection, "close");
    const std::string reason = "body of " + std::to_string(length) +
                               " bytes exceeds the limit of " +
                               std::to_string(config_.max_body_bytes);
    response.set_body(reason + "\n", "text/plain; charset=utf-8");
    Reply(request, response, in_flight);
    metrics_.CountRequest(endpoint_name, "too_large", SecondsSince(start));
    LogLine(spdlog::level::warn, {{"msg", "request refused"},
                                  {"endpoint", endpoint_name},
                                  {"status", 413},
                                  {"reason", reason}});
    return;
  }

  ReloadIfDue();
  request.extract_utf8string(/*ignore_content_type=*/true)
      .then([this, request, endpoint, start, in_flight](pplx::task<std::string> body_task) mutable {
        std::string body;
        try {
          body = body_task.get();
        } catch (const std::exception& e) {
          // The body was cut short (a half-closed or vanished client). A half-closed client can
          // still read the reason; then the connection is closed.
          metrics_.CountRequest(EndpointName(endpoint), "client_error", SecondsSince(start));
          LogLine(spdlog::level::warn, {{"msg", "request body not received"},
                                        {"endpoint", EndpointName(endpoint)},
                                        {"error", e.what()}});
          try {
            http_response response(status_codes::BadRequest);
            response.headers().add(header_names::connection, "close");
            response.set_body("request body incomplete\n", "text/plain; charset=utf-8");
            Reply(request, response, in_flight);
          } catch (const std::exception&) {
          }
          return;
        }
        AnswerReview(endpoint, &request, body, start, std::move(in_flight));
      });
}

void WebhookServer::AnswerReview(Endpoint endpoint, void* raw_request, const std::string& body,
                                 std::chrono::steady_clock::time_point start,
                                 std::shared_ptr<InFlight> in_flight) {
  http_request& request = *static_cast<http_request*>(raw_request);
  const std::string_view endpoint_name = EndpointName(endpoint);
  http_response response(status_codes::OK);
  if (draining_.load()) response.headers().add(header_names::connection, "close");

  AdmissionRequest admission;
  try {
    admission = ParseAdmissionReview(body);
  } catch (const ReviewError& e) {
    response.set_status_code(status_codes::BadRequest);
    response.set_body(std::string("invalid AdmissionReview: ") + e.what() + "\n",
                      "text/plain; charset=utf-8");
    Reply(request, response, in_flight);
    metrics_.CountRequest(endpoint_name, "bad_request", SecondsSince(start));
    LogLine(spdlog::level::warn, {{"msg", "invalid AdmissionReview"},
                                  {"endpoint", endpoint_name},
                                  {"status", 400},
                                  {"error", e.what()}});
    return;
  }

  const std::shared_ptr<const core::Policy> policy = CurrentPolicy();
  const std::string uid = admission.uid;
  const std::string operation = admission.operation;
  const std::string kind = admission.kind.kind;
  const std::string namespace_ = admission.namespace_;
  std::string name = admission.name;
  if (name.empty()) {
    try {
      name = core::ObjectRef::From(admission.object).name;
    } catch (const std::exception&) {
    }
  }
  const bool dry_run = admission.dry_run;
  AdmissionOutcome outcome = Admit(endpoint, std::move(admission), *policy, config_.admit);
  std::string answer;
  try {
    answer = EncodeAdmissionReview(outcome.response);
  } catch (const std::exception& e) {
    AdmissionResponse denial;
    denial.uid = uid;
    denial.allowed = false;
    denial.status_code = 500;
    denial.message = std::string("ncclguard internal error encoding the answer: ") + e.what();
    outcome.result = AdmitResult::Error;
    answer = EncodeAdmissionReview(denial);
  }
  response.set_body(std::move(answer), "application/json");
  Reply(request, response, std::move(in_flight));

  const double seconds = SecondsSince(start);
  const std::string_view result = AdmitResultName(outcome.result);
  metrics_.CountAdmission(endpoint_name, result, seconds, outcome.findings);
  if (!spdlog::should_log(spdlog::level::info)) return;
  core::Json rules = core::Json::array();
  for (const auto& finding : outcome.findings) rules.push_back(finding.rule);
  core::Json line = {{"msg", "admission"},
                     {"endpoint", endpoint_name},
                     {"uid", uid},
                     {"operation", operation},
                     {"kind", kind},
                     {"namespace", namespace_},
                     {"name", name},
                     {"result", result},
                     {"rules", std::move(rules)},
                     {"dryRun", dry_run},
                     {"durationMs", seconds * 1000.0}};
  if (outcome.result == AdmitResult::Error) line["error"] = outcome.response.message;
  LogLine(outcome.result == AdmitResult::Error ? spdlog::level::err : spdlog::level::info, line);
}

}  // namespace ncclguard::webhook
