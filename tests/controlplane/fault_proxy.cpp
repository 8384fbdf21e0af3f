#include "fault_proxy.h"

#include <arpa/inet.h>
#include <curl/curl.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <utility>

namespace ncclguard::testenv {

struct FaultProxy::Connection {
  int fd = -1;
  std::atomic<bool> streaming{false};  // forwarding a watch
  std::atomic<bool> cut{false};
  std::atomic<bool> finished{false};
};

namespace {

constexpr std::size_t kMaxHeaderBytes = 1 << 20;

bool SendAll(int fd, std::string_view data) {
  while (!data.empty()) {
    const ssize_t sent = ::send(fd, data.data(), data.size(), MSG_NOSIGNAL);
    if (sent <= 0) return false;
    data.remove_prefix(static_cast<std::size_t>(sent));
  }
  return true;
}

const char* ReasonPhrase(long status) {
  switch (status) {
    case 200:
      return "OK";
    case 201:
      return "Created";
    case 204:
      return "No Content";
    case 404:
      return "Not Found";
    case 409:
      return "Conflict";
    case 429:
      return "Too Many Requests";
    case 500:
      return "Internal Server Error";
    case 502:
      return "Bad Gateway";
    default:
      return "Status";
  }
}

// A metav1.Status answer with its body, as kube-apiserver writes one.
std::string StatusResponse(long code, const std::string& reason, const std::string& message,
                           int retry_after_seconds = 0) {
  nlohmann::json status{
      {"kind", "Status"},    {"apiVersion", "v1"}, {"metadata", nlohmann::json::object()},
      {"status", "Failure"}, {"message", message}, {"reason", reason},
      {"code", code}};
  if (retry_after_seconds > 0) status["details"] = {{"retryAfterSeconds", retry_after_seconds}};
  const std::string body = status.dump();
  std::string response =
      "HTTP/1.1 " + std::to_string(code) + " " + ReasonPhrase(code) +
      "\r\nContent-Type: application/json\r\nCache-Control: no-cache, private\r\n";
  if (retry_after_seconds > 0)
    response += "Retry-After: " + std::to_string(retry_after_seconds) + "\r\n";
  return response + "Content-Length: " + std::to_string(body.size()) + "\r\n\r\n" + body;
}

std::string Lower(std::string text) {
  for (char& c : text) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return text;
}

// "list pods", "watch pytorchjobs", "patch pytorchjobs", ... from a request target.
std::pair<std::string, std::string> Classify(const std::string& method, const std::string& target) {
  const auto question = target.find('?');
  const std::string path = target.substr(0, question);
  const std::string query =
      question == std::string::npos ? "" : "&" + target.substr(question + 1) + "&";
  std::vector<std::string> segments;
  for (std::size_t begin = 1; begin <= path.size();) {
    std::size_t end = path.find('/', begin);
    if (end == std::string::npos) end = path.size();
    if (end > begin) segments.push_back(path.substr(begin, end - begin));
    begin = end + 1;
  }
  // Drop api/v1 or apis/GROUP/VERSION.
  std::size_t skip = !segments.empty() && segments[0] == "apis" ? 3 : 2;
  if (segments.size() <= skip) return {Lower(method), "discovery"};
  segments.erase(segments.begin(), segments.begin() + static_cast<long>(skip));
  bool named = false;
  std::string resource;
  if (segments[0] == "namespaces" && segments.size() >= 3) {
    resource = segments[2];
    named = segments.size() >= 4;
  } else {
    resource = segments[0];
    named = segments.size() >= 2;
  }
  std::string verb = Lower(method);
  if (method == "GET") {
    if (query.find("&watch=true&") != std::string::npos ||
        query.find("&watch=1&") != std::string::npos) {
      verb = "watch";
    } else {
      verb = named ? "get" : "list";
    }
  }
  return {verb, resource};
}

struct ForwardState {
  int fd;
  CURL* curl;
  std::atomic<bool>* cut;
  const std::atomic<bool>* stopping;
  bool headers_sent = false;
  bool bodyless = false;
  bool client_gone = false;
  std::vector<std::string> headers;  // forwarded response headers, "Name: value"
};

size_t CollectHeader(char* data, size_t size, size_t count, void* raw) {
  auto* state = static_cast<ForwardState*>(raw);
  std::string line(data, size * count);
  while (!line.empty() && (line.back() == '\n' || line.back() == '\r')) line.pop_back();
  if (line.starts_with("HTTP/")) {
    state->headers.clear();  // a new response (after a 100 Continue, say)
    return size * count;
  }
  const auto colon = line.find(':');
  if (colon == std::string::npos) return size * count;
  const std::string name = Lower(line.substr(0, colon));
  if (name == "content-type" || name == "retry-after" || name == "warning" || name == "audit-id") {
    state->headers.push_back(line);
  }
  return size * count;
}

bool SendHeaders(ForwardState& state) {
  long status = 0;
  curl_easy_getinfo(state.curl, CURLINFO_RESPONSE_CODE, &status);

  std::string head = "HTTP/1.1 " + std::to_string(status) + " " + ReasonPhrase(status) + "\r\n";
  for (const std::string& h : state.headers) head += h + "\r\n";
  // 204 and 304 have no body: a chunked terminator after them would be read as the next answer.
  state.bodyless = status == 204 || status == 304;
  head += state.bodyless ? "\r\n" : "Transfer-Encoding: chunked\r\n\r\n";
  state.headers_sent = true;
  return SendAll(state.fd, head);
}

size_t ForwardBody(char* data, size_t size, size_t count, void* raw) {
  auto* state = static_cast<ForwardState*>(raw);
  const size_t bytes = size * count;
  if (state->cut->load() || state->stopping->load()) return 0;
  if (!state->headers_sent && !SendHeaders(*state)) {
    state->client_gone = true;
    return 0;
  }
  if (bytes == 0 || state->bodyless) return bytes;
  char length[32];
  std::snprintf(length, sizeof length, "%zx\r\n", bytes);
  if (!SendAll(state->fd, length) || !SendAll(state->fd, std::string_view(data, bytes)) ||
      !SendAll(state->fd, "\r\n")) {
    state->client_gone = true;
    return 0;
  }
  return bytes;
}

// Called by libcurl about once a second even on an idle stream: a cut ends it.
int CheckCut(void* raw, curl_off_t, curl_off_t, curl_off_t, curl_off_t) {
  auto* state = static_cast<ForwardState*>(raw);
  return state->cut->load() || state->stopping->load() ? 1 : 0;
}

}  // namespace

const char* FaultModeName(FaultMode mode) {
  switch (mode) {
    case FaultMode::kPass:
      return "pass";
    case FaultMode::kTooManyRequests:
      return "429";
    case FaultMode::kServerError:
      return "500";
    case FaultMode::kSlow:
      return "slow";
  }
  return "?";
}

FaultProxy::FaultProxy(ControlPlaneInfo upstream) : upstream_(std::move(upstream)) {
  curl_global_init(CURL_GLOBAL_DEFAULT);
  listen_fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (listen_fd_ < 0) throw std::runtime_error("fault proxy: socket failed");
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  address.sin_port = 0;
  socklen_t length = sizeof address;
  if (::bind(listen_fd_, reinterpret_cast<sockaddr*>(&address), sizeof address) != 0 ||
      ::listen(listen_fd_, 64) != 0 ||
      ::getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&address), &length) != 0) {
    ::close(listen_fd_);
    throw std::runtime_error("fault proxy: cannot listen on 127.0.0.1");
  }
  port_ = ntohs(address.sin_port);
  acceptor_ = std::thread([this] { AcceptLoop(); });
}

FaultProxy::~FaultProxy() { Stop(); }

std::string FaultProxy::url() const { return "http://127.0.0.1:" + std::to_string(port_); }

ControlPlaneInfo FaultProxy::ClientInfo(const std::string& dir) const {
  ControlPlaneInfo info = upstream_;
  info.apiserver_url = url();
  info.kubeconfig = dir + "/kubeconfig-via-fault-proxy";
  std::ofstream out(info.kubeconfig);
  out << "apiVersion: v1\nkind: Config\nclusters:\n- name: proxy\n  cluster:\n    server: " << url()
      << "\ncontexts:\n- name: proxy\n  context:\n    cluster: proxy\ncurrent-context: proxy\n";
  if (!out) throw std::runtime_error("fault proxy: cannot write " + info.kubeconfig);
  return info;
}

void FaultProxy::SetMode(FaultMode mode, std::chrono::milliseconds slow_delay) {
  std::lock_guard lock(mutex_);
  mode_ = mode;
  slow_delay_ = slow_delay;
  if (mode == FaultMode::kPass) return;
  for (const auto& connection : connections_) {
    if (!connection->streaming.load()) continue;
    connection->cut = true;
    ::shutdown(connection->fd, SHUT_RDWR);
    ++cut_streams_;
  }
}

std::vector<ProxiedRequest> FaultProxy::Requests() const {
  std::lock_guard lock(mutex_);
  return requests_;
}

std::vector<ProxiedRequest> FaultProxy::RequestsBetween(
    std::chrono::steady_clock::time_point from, std::chrono::steady_clock::time_point to) const {
  std::vector<ProxiedRequest> between;
  for (const ProxiedRequest& r : Requests()) {
    if (r.at >= from && r.at < to) between.push_back(r);
  }
  return between;
}

void FaultProxy::Stop() {
  if (stopping_.exchange(true)) return;
  ::shutdown(listen_fd_, SHUT_RDWR);
  if (acceptor_.joinable()) acceptor_.join();
  ::close(listen_fd_);
  std::vector<std::pair<std::shared_ptr<Connection>, std::thread>> threads;
  {
    std::lock_guard lock(mutex_);
    for (const auto& connection : connections_) {
      connection->cut = true;
      ::shutdown(connection->fd, SHUT_RDWR);
    }
    threads = std::move(threads_);
  }
  stop_changed_.notify_all();
  for (auto& [connection, thread] : threads) thread.join();
}

void FaultProxy::AcceptLoop() {
  while (!stopping_.load()) {
    const int fd = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
    if (fd < 0) {
      if (stopping_.load()) return;
      continue;
    }
    auto connection = std::make_shared<Connection>();
    connection->fd = fd;
    std::lock_guard lock(mutex_);
    if (stopping_.load()) {
      ::close(fd);
      return;
    }
    connections_.insert(connection);
    // Threads of connections that ended are joined here, so a long test does not keep them.
    std::erase_if(threads_, [](auto& entry) {
      if (!entry.first->finished.load()) return false;
      entry.second.join();
      return true;
    });
    threads_.emplace_back(connection, std::thread([this, connection] {
                            Serve(connection);
                            std::lock_guard inner(mutex_);
                            connections_.erase(connection);
                            ::close(connection->fd);
                            connection->finished = true;
                          }));
  }
}

bool FaultProxy::Hold(std::chrono::milliseconds delay) {
  std::unique_lock lock(mutex_);
  return !stop_changed_.wait_for(lock, delay, [&] { return stopping_.load(); });
}

void FaultProxy::Serve(const std::shared_ptr<Connection>& connection) {
  const int fd = connection->fd;
  std::unique_ptr<CURL, decltype(&curl_easy_cleanup)> curl(curl_easy_init(), curl_easy_cleanup);
  std::string buffer;
  const auto read_more = [&] {
    char chunk[16384];
    const ssize_t n = ::recv(fd, chunk, sizeof chunk, 0);
    if (n <= 0) return false;
    buffer.append(chunk, static_cast<std::size_t>(n));
    return true;
  };
  while (!stopping_.load() && curl) {
    std::size_t end;
    while ((end = buffer.find("\r\n\r\n")) == std::string::npos) {
      if (buffer.size() > kMaxHeaderBytes || !read_more()) return;
    }
    const std::string head = buffer.substr(0, end);
    buffer.erase(0, end + 4);
    std::size_t line_end = head.find("\r\n");
    const std::string request_line = head.substr(0, line_end);
    const auto first_space = request_line.find(' ');
    const auto second_space = request_line.find(' ', first_space + 1);
    if (first_space == std::string::npos || second_space == std::string::npos) return;
    const std::string method = request_line.substr(0, first_space);
    const std::string target = request_line.substr(first_space + 1, second_space - first_space - 1);
    std::map<std::string, std::string> headers;
    while (line_end != std::string::npos) {
      const std::size_t next = head.find("\r\n", line_end + 2);
      const std::string line = head.substr(
          line_end + 2, next == std::string::npos ? std::string::npos : next - line_end - 2);
      const auto colon = line.find(':');
      if (colon != std::string::npos) {
        std::string value = line.substr(colon + 1);
        while (!value.empty() && value.front() == ' ') value.erase(0, 1);
        headers[Lower(line.substr(0, colon))] = value;
      }
      line_end = next;
    }
    if (headers.contains("transfer-encoding")) {
      SendAll(fd, StatusResponse(501, "NotImplemented", "fault proxy: chunked bodies unsupported"));
      return;
    }
    const std::size_t length = std::strtoul(headers["content-length"].c_str(), nullptr, 10);
    if (buffer.size() < length && Lower(headers["expect"]) == "100-continue" &&
        !SendAll(fd, "HTTP/1.1 100 Continue\r\n\r\n")) {
      return;
    }
    while (buffer.size() < length) {
      if (!read_more()) return;
    }
    const std::string body = buffer.substr(0, length);
    buffer.erase(0, length);

    const auto [verb, resource] = Classify(method, target);
    FaultMode mode;
    std::chrono::milliseconds delay;
    {
      std::lock_guard lock(mutex_);
      mode = mode_;
      delay = slow_delay_;
      requests_.push_back({std::chrono::steady_clock::now(), verb, resource, mode});
    }
    bool keep = true;
    switch (mode) {
      case FaultMode::kTooManyRequests:
        keep = SendAll(fd, StatusResponse(429, "TooManyRequests",
                                          "Too many requests, please try again later.", 1));
        break;
      case FaultMode::kServerError:
        keep = SendAll(fd, StatusResponse(500, "InternalError",
                                          "Internal error occurred: injected by the test's "
                                          "fault proxy"));
        break;
      case FaultMode::kSlow:
        if (!Hold(delay)) return;
        [[fallthrough]];
      case FaultMode::kPass:
        connection->cut = false;
        connection->streaming = verb == "watch";
        Forward(*connection, method, target, headers, body, verb == "watch", curl.get());
        keep = !connection->cut.load();
        connection->streaming = false;
        break;
    }
    if (!keep || Lower(headers["connection"]) == "close") return;
  }
}

void FaultProxy::Forward(Connection& connection, const std::string& method,
                         const std::string& target,
                         const std::map<std::string, std::string>& headers, const std::string& body,
                         bool is_watch, void* raw_curl) {
  CURL* curl = static_cast<CURL*>(raw_curl);
  curl_easy_reset(curl);
  const std::string url = upstream_.apiserver_url + target;
  curl_easy_setopt(curl, CURLOPT_URL, url.c_str());
  curl_easy_setopt(curl, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(curl, CURLOPT_HTTP_VERSION, CURL_HTTP_VERSION_1_1);
  curl_easy_setopt(curl, CURLOPT_CONNECTTIMEOUT_MS, 10000L);
  curl_easy_setopt(curl, CURLOPT_CAINFO, upstream_.ca_file.c_str());
  curl_easy_setopt(curl, CURLOPT_SSLCERT, upstream_.admin_cert_file.c_str());
  curl_easy_setopt(curl, CURLOPT_SSLKEY, upstream_.admin_key_file.c_str());
  if (method == "GET") {
    curl_easy_setopt(curl, CURLOPT_HTTPGET, 1L);
  } else {
    curl_easy_setopt(curl, CURLOPT_CUSTOMREQUEST, method.c_str());
  }
  if (!body.empty() || method == "POST" || method == "PUT" || method == "PATCH") {
    curl_easy_setopt(curl, CURLOPT_POSTFIELDSIZE_LARGE, static_cast<curl_off_t>(body.size()));
    curl_easy_setopt(curl, CURLOPT_COPYPOSTFIELDS, body.c_str());
  }
  curl_slist* list = curl_slist_append(nullptr, "Expect:");
  for (const char* name : {"content-type", "accept", "user-agent"}) {
    const auto found = headers.find(name);
    if (found != headers.end()) {
      list = curl_slist_append(list, (std::string(name) + ": " + found->second).c_str());
    }
  }
  std::unique_ptr<curl_slist, decltype(&curl_slist_free_all)> owned(list, curl_slist_free_all);
  curl_easy_setopt(curl, CURLOPT_HTTPHEADER, list);
  ForwardState state{connection.fd, curl, &connection.cut, &stopping_, false, false, false, {}};
  curl_easy_setopt(curl, CURLOPT_HEADERFUNCTION, CollectHeader);
  curl_easy_setopt(curl, CURLOPT_HEADERDATA, &state);
  curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, ForwardBody);
  curl_easy_setopt(curl, CURLOPT_WRITEDATA, &state);
  curl_easy_setopt(curl, CURLOPT_NOPROGRESS, 0L);
  curl_easy_setopt(curl, CURLOPT_XFERINFOFUNCTION, CheckCut);
  curl_easy_setopt(curl, CURLOPT_XFERINFODATA, &state);
  if (!is_watch) curl_easy_setopt(curl, CURLOPT_TIMEOUT_MS, 120000L);
  const CURLcode code = curl_easy_perform(curl);
  if (state.client_gone || connection.cut.load()) {
    connection.cut = true;  // the connection ends
    return;
  }
  if (code != CURLE_OK) {
    if (state.headers_sent) {
      connection.cut = true;  // a broken stream, as the client would see from the server
    } else {
      SendAll(connection.fd, StatusResponse(502, "ServiceUnavailable",
                                            std::string("fault proxy: upstream failed: ") +
                                                curl_easy_strerror(code)));
    }
    return;
  }
  if (!state.headers_sent && !SendHeaders(state)) {
    connection.cut = true;
    return;
  }
  if (!state.bodyless && !SendAll(connection.fd, "0\r\n\r\n")) connection.cut = true;
}

std::vector<std::pair<std::string, long>> CountByVerbAndResource(
    const std::vector<ProxiedRequest>& requests) {
  std::map<std::string, long> counts;
  for (const ProxiedRequest& r : requests) ++counts[r.verb + " " + r.resource];
  std::vector<std::pair<std::string, long>> sorted(counts.begin(), counts.end());
  std::stable_sort(sorted.begin(), sorted.end(),
                   [](const auto& a, const auto& b) { return a.second > b.second; });
  return sorted;
}

}  // namespace ncclguard::testenv
