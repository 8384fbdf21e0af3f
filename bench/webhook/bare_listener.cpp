// The HTTP/TLS layer alone: cpprestsdk's listener with the webhook's TLS settings, answering
// every POST with a fixed AdmissionReview. The webhook benchmark runs it beside ncclguard so
// the report separates the rules' cost from the listener's.
#include <cpprest/http_listener.h>
#include <pplx/threadpool.h>

#include <csignal>
#include <iostream>

#include "webhook/tls.h"

int main(int argc, char** argv) {
  if (argc < 4) {
    std::cerr << "usage: bare_listener host:port cert.pem key.pem [threads]\n";
    return 2;
  }
  if (argc > 4) crossplat::threadpool::initialize_with_threads(std::stoul(argv[4]));
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);

  auto certificate = ncclguard::webhook::ServingCertificate::Load(argv[2], argv[3]);
  web::http::experimental::listener::http_listener_config config;
  config.set_ssl_context_callback([certificate](boost::asio::ssl::context& context) {
    certificate->Configure(context.native_handle(), ncclguard::webhook::TlsVersion::V1_3);
  });
  // About the size of ncclguard's answer for the benchmark pod (a five-fix patch).
  const std::string answer =
      R"({"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","response":{"uid":"x",)"
      R"("allowed":true,"patchType":"JSONPatch","patch":")" +
      std::string(1100, 'A') + R"("}})";
  web::http::experimental::listener::http_listener listener(
      web::uri(std::string("https://") + argv[1] + "/"), config);
  listener.support([&answer](web::http::http_request request) {
    request.extract_utf8string(true).then([request, &answer](pplx::task<std::string> body) {
      body.wait();
      web::http::http_response response(web::http::status_codes::OK);
      response.set_body(answer, "application/json");
      request.reply(response);
    });
  });
  listener.open().wait();
  int received = 0;
  sigwait(&signals, &received);
  listener.close().wait();
  return 0;
}
