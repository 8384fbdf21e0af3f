// A fault-injecting reverse proxy in front of the real kube-apiserver, for tests: the client under
// test speaks plain HTTP/1.1 to 127.0.0.1, the proxy forwards each request over TLS with the
// control plane's admin credentials and streams the answer back as it arrives (watches too, several
// connections at once). At run time it can answer 429 (Retry-After and a Status body, as
// kube-apiserver's priority and fairness does), 500 (an InternalError Status), or hold each request
// before forwarding it (a slow server: the request is still applied after the client gave up).
// Entering a fault cuts the streams in flight, as an overloaded server or a restarted load balancer
// does. Every request is counted, with its time, verb, resource and the mode it met.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "controlplane_env.h"

namespace ncclguard::testenv {

enum class FaultMode { kPass, kTooManyRequests, kServerError, kSlow };

const char* FaultModeName(FaultMode mode);

struct ProxiedRequest {
  std::chrono::steady_clock::time_point at;
  std::string verb;      // get, list, watch, post, put, patch, delete
  std::string resource;  // pods, pytorchjobs, events, ...
  FaultMode mode;
};

class FaultProxy {
 public:
  // Listens on 127.0.0.1 (an ephemeral port) and forwards to `upstream`'s API server.
  explicit FaultProxy(ControlPlaneInfo upstream);
  ~FaultProxy();
  FaultProxy(const FaultProxy&) = delete;
  FaultProxy& operator=(const FaultProxy&) = delete;

  std::string url() const;
  // `upstream` with a kubeconfig (written under `dir`) whose server is this proxy, no credentials.
  ControlPlaneInfo ClientInfo(const std::string& dir) const;

  // Entering a mode other than kPass cuts every response being streamed (watches). kSlow holds
  // each request `slow_delay` before forwarding it.
  void SetMode(FaultMode mode, std::chrono::milliseconds slow_delay = std::chrono::seconds(6));

  // Every request received so far, in order.
  std::vector<ProxiedRequest> Requests() const;
  // Requests received in [from, to).
  std::vector<ProxiedRequest> RequestsBetween(std::chrono::steady_clock::time_point from,
                                              std::chrono::steady_clock::time_point to) const;
  long cut_streams() const { return cut_streams_.load(); }

  void Stop();

 private:
  struct Connection;
  void AcceptLoop();
  void Serve(const std::shared_ptr<Connection>& connection);
  void Forward(Connection& connection, const std::string& method, const std::string& target,
               const std::map<std::string, std::string>& headers, const std::string& body,
               bool is_watch, void* curl);
  bool Hold(std::chrono::milliseconds delay);

  ControlPlaneInfo upstream_;
  int listen_fd_ = -1;
  int port_ = 0;
  std::atomic<bool> stopping_{false};
  std::thread acceptor_;

  mutable std::mutex mutex_;
  std::condition_variable stop_changed_;
  FaultMode mode_ = FaultMode::kPass;
  std::chrono::milliseconds slow_delay_{6000};
  std::vector<ProxiedRequest> requests_;
  std::set<std::shared_ptr<Connection>> connections_;
  std::vector<std::pair<std::shared_ptr<Connection>, std::thread>> threads_;
  std::atomic<long> cut_streams_{0};
};

// Counts of `requests` by "verb resource", most first.
std::vector<std::pair<std::string, long>> CountByVerbAndResource(
    const std::vector<ProxiedRequest>& requests);

}  // namespace ncclguard::testenv
