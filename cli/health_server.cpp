#include "cli/health_server.h"

#include <cpprest/http_listener.h>

#include <stdexcept>
#include <string>
#include <utility>

#include "metrics/registry.h"

namespace ncclguard::cli {

using web::http::http_request;
using web::http::methods;
using web::http::status_codes;
using web::http::experimental::listener::http_listener;

struct HealthServer::Listener {
  std::unique_ptr<http_listener> listener;
};

namespace {

// The answer's write completes later; a prober that hung up meanwhile is not an error.
void Reply(http_request& request, web::http::status_code status, std::string body,
           const std::string& content_type = "text/plain; charset=utf-8") {
  // The body moved into the response's stream, not copied (a scrape's is megabytes).
  web::http::http_response response(status);
  response.set_body(std::move(body), content_type);
  request.reply(response).then([](pplx::task<void> written) {
    try {
      written.get();
    } catch (const std::exception&) {
    }
  });
}

}  // namespace

bool HealthListenDisabled(const std::string& listen) { return listen.empty() || listen == "0"; }

HealthServer::HealthServer(std::string listen, std::function<bool()> ready, std::string flag)
    : listen_(std::move(listen)),
      flag_(std::move(flag)),
      ready_(std::move(ready)),
      listener_(std::make_unique<Listener>()) {}

HealthServer::~HealthServer() { Shutdown(); }

void HealthServer::Start() {
  const std::string address = listen_.starts_with(':') ? "0.0.0.0" + listen_ : listen_;
  web::uri uri;
  try {
    uri = web::uri("http://" + address + "/");
  } catch (const web::uri_exception& e) {
    throw std::runtime_error(flag_ + " " + listen_ + ": not host:port: " + e.what());
  }
  if (uri.port() <= 0) throw std::runtime_error(flag_ + " " + listen_ + ": no port");
  listener_->listener = std::make_unique<http_listener>(uri);
  listener_->listener->support([this](http_request request) {
    const std::string path = request.relative_uri().path();
    if (request.method() != methods::GET) {
      Reply(request, status_codes::MethodNotAllowed, "use GET\n");
    } else if (path == "/metrics") {
      Reply(request, status_codes::OK, metrics::Render(), std::string(metrics::kContentType));
    } else if (path == "/healthz") {
      Reply(request, status_codes::OK, "ok\n");
    } else if (path == "/readyz") {
      if (ready_()) {
        Reply(request, status_codes::OK, "ok\n");
      } else {
        Reply(request, status_codes::ServiceUnavailable, "not ready: caches not synced\n");
      }
    } else {
      Reply(request, status_codes::NotFound, "no such path: " + path + "\n");
    }
  });
  try {
    listener_->listener->open().wait();
  } catch (const std::exception& e) {
    listener_->listener.reset();
    throw std::runtime_error(flag_ + " " + listen_ + ": " + e.what());
  }
}

void HealthServer::Shutdown() {
  if (!listener_->listener) return;
  try {
    listener_->listener->close().wait();
  } catch (const std::exception&) {
    // Closing a listener whose port vanished: nothing left to release.
  }
  listener_->listener.reset();
}

}  // namespace ncclguard::cli
