// Load generator for the webhook benchmark: HTTP/1.1 POSTs over TLS keep-alive connections.
//   saturation: every connection sends its next request as soon as the answer arrives;
//   --rate R:   requests are scheduled at a fixed rate (open loop) and latency is measured from
//               the scheduled time, so a stalled server cannot hide its queueing delay.
// Prints one JSON line: requests, errors, throughput and latency percentiles in milliseconds.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

namespace {

using Clock = std::chrono::steady_clock;

struct Options {
  std::string host = "127.0.0.1";
  int port = 8443;
  std::string path = "/mutate";
  std::string body_file;
  std::string ca_file;
  std::string expect = "\"allowed\":true";
  int connections = 8;
  double seconds = 5;
  double rate = 0;  // 0 = saturation
};

struct Result {
  std::vector<double> latencies_ms;
  long errors = 0;
};

[[noreturn]] void Die(const std::string& message) {
  std::cerr << "loadgen: " << message << "\n";
  std::exit(2);
}

class Connection {
 public:
  Connection(SSL_CTX* context, const Options& options) {
    fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_port = htons(static_cast<uint16_t>(options.port));
    if (inet_pton(AF_INET, options.host.c_str(), &address.sin_addr) != 1) Die("bad host");
    if (::connect(fd_, reinterpret_cast<sockaddr*>(&address), sizeof address) != 0) {
      Die("connect: " + std::string(std::strerror(errno)));
    }
    int one = 1;
    setsockopt(fd_, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    ssl_ = SSL_new(context);
    SSL_set_fd(ssl_, fd_);
    SSL_set_tlsext_host_name(ssl_, options.host.c_str());
    if (SSL_connect(ssl_) != 1) Die("TLS handshake failed");
  }
  ~Connection() {
    SSL_free(ssl_);
    ::close(fd_);
  }

  // Sends `request` and reads one response; returns false on any transport or HTTP error.
  bool RoundTrip(const std::string& request, const std::string& expect) {
    if (SSL_write(ssl_, request.data(), static_cast<int>(request.size())) <= 0) return false;
    std::string& in = buffer_;
    size_t header_end;
    while ((header_end = in.find("\r\n\r\n")) == std::string::npos) {
      if (!Fill()) return false;
    }
    const size_t length_at = in.find("Content-Length: ");
    if (length_at == std::string::npos || length_at > header_end) return false;
    const size_t length = std::strtoul(in.c_str() + length_at + 16, nullptr, 10);
    const size_t total = header_end + 4 + length;
    while (in.size() < total) {
      if (!Fill()) return false;
    }
    const bool ok = in.compare(0, 12, "HTTP/1.1 200") == 0 && in.find(expect, header_end) < total;
    in.erase(0, total);
    return ok;
  }

 private:
  bool Fill() {
    char chunk[16384];
    const int n = SSL_read(ssl_, chunk, sizeof chunk);
    if (n <= 0) return false;
    buffer_.append(chunk, static_cast<size_t>(n));
    return true;
  }

  int fd_ = -1;
  SSL* ssl_ = nullptr;
  std::string buffer_;
};

Options Parse(int argc, char** argv) {
  Options options;
  for (int i = 1; i < argc; ++i) {
    const std::string flag = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) Die(flag + " needs a value");
      return argv[++i];
    };
    if (flag == "--port")
      options.port = std::stoi(value());
    else if (flag == "--path")
      options.path = value();
    else if (flag == "--body")
      options.body_file = value();
    else if (flag == "--ca")
      options.ca_file = value();
    else if (flag == "--expect")
      options.expect = value();
    else if (flag == "--connections")
      options.connections = std::stoi(value());
    else if (flag == "--seconds")
      options.seconds = std::stod(value());
    else if (flag == "--rate")
      options.rate = std::stod(value());
    else
      Die("unknown flag " + flag);
  }
  if (options.body_file.empty() || options.ca_file.empty()) Die("--body and --ca are required");
  if (options.connections < 1 || options.connections > 256) Die("--connections: 1..256");
  if (options.seconds <= 0 || options.seconds > 120) Die("--seconds: (0, 120]");
  return options;
}

double Percentile(std::vector<double>& sorted, double p) {
  if (sorted.empty()) return 0;
  const size_t index =
      std::min(sorted.size() - 1, static_cast<size_t>(p * static_cast<double>(sorted.size())));
  return sorted[index];
}

}  // namespace

int main(int argc, char** argv) {
  const Options options = Parse(argc, argv);
  std::ifstream body_in(options.body_file);
  if (!body_in) Die("cannot read " + options.body_file);
  std::stringstream body;
  body << body_in.rdbuf();
  const std::string request =
      "POST " + options.path + "?timeout=10s HTTP/1.1\r\nHost: " + options.host +
      "\r\nContent-Type: application/json\r\n" +
      "Accept: application/json\r\nContent-Length: " + std::to_string(body.str().size()) +
      "\r\n\r\n" + body.str();

  SSL_CTX* context = SSL_CTX_new(TLS_client_method());
  SSL_CTX_set_min_proto_version(context, TLS1_2_VERSION);
  if (SSL_CTX_load_verify_locations(context, options.ca_file.c_str(), nullptr) != 1) {
    Die("cannot load CA " + options.ca_file);
  }
  SSL_CTX_set_verify(context, SSL_VERIFY_PEER, nullptr);

  std::vector<Result> results(static_cast<size_t>(options.connections));
  std::vector<std::thread> threads;
  const auto start = Clock::now() + std::chrono::milliseconds(200);
  const auto end = start + std::chrono::duration_cast<Clock::duration>(
                               std::chrono::duration<double>(options.seconds));
  for (int c = 0; c < options.connections; ++c) {
    threads.emplace_back([&, c] {
      Result& result = results[static_cast<size_t>(c)];
      Connection connection(context, options);
      std::this_thread::sleep_until(start);
      if (options.rate <= 0) {
        while (Clock::now() < end) {
          const auto sent = Clock::now();
          if (!connection.RoundTrip(request, options.expect)) {
            ++result.errors;
            return;
          }
          result.latencies_ms.push_back(
              std::chrono::duration<double, std::milli>(Clock::now() - sent).count());
        }
        return;
      }
      // Open loop: connection c sends at start + (c + k * connections) / rate.
      const double interval = static_cast<double>(options.connections) / options.rate;
      for (long k = 0;; ++k) {
        const auto scheduled =
            start +
            std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(
                (static_cast<double>(c) / options.rate) + static_cast<double>(k) * interval));
        if (scheduled >= end) return;
        std::this_thread::sleep_until(scheduled);
        if (!connection.RoundTrip(request, options.expect)) {
          ++result.errors;
          return;
        }
        result.latencies_ms.push_back(
            std::chrono::duration<double, std::milli>(Clock::now() - scheduled).count());
      }
    });
  }
  for (auto& thread : threads) thread.join();

  std::vector<double> all;
  long errors = 0;
  for (auto& result : results) {
    all.insert(all.end(), result.latencies_ms.begin(), result.latencies_ms.end());
    errors += result.errors;
  }
  std::sort(all.begin(), all.end());
  std::printf(
      "{\"mode\":\"%s\",\"connections\":%d,\"requests\":%zu,\"errors\":%ld,"
      "\"throughput\":%.0f,\"p50_ms\":%.3f,\"p90_ms\":%.3f,\"p99_ms\":%.3f,\"max_ms\":%.3f}\n",
      options.rate > 0 ? "rate" : "saturation", options.connections, all.size(), errors,
      static_cast<double>(all.size()) / options.seconds, Percentile(all, 0.5), Percentile(all, 0.9),
      Percentile(all, 0.99), all.empty() ? 0.0 : all.back());
  SSL_CTX_free(context);
  return errors == 0 ? 0 : 1;
}
