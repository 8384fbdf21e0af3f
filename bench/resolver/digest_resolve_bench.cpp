// What webhook::DigestResolver::Resolve costs the admission that calls it (bench/digest_resolve.sh
// runs it against real registries on 127.0.0.1): RUNS calls, each timed, then one line
//   case=CASE runs=N threads=T median_us=.. p99_us=.. max_us=.. status=<the statuses seen>
//   ncclguard_digest_resolve_bench CASE RUNS [--threads T] [--fresh] [--no-cache]
//       [--plain-http HOST:PORT]... [--ca-file FILE] [--docker-config FILE] [--budget-ms N] IMAGE
// --no-cache: ttl and failure_ttl 0, every call asks the registry (on the resolver's kept-alive
// connection); --fresh: a new resolver a call (a new connection, TLS handshake included);
// neither: the tag is resolved once first and the timed calls are cache hits.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <map>
#include <memory>
#include <mutex>
#include <sstream>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "core/image_ref.h"
#include "webhook/digest_resolver.h"

namespace {

using namespace ncclguard;
using Clock = std::chrono::steady_clock;

int Usage() {
  std::fprintf(stderr,
               "usage: ncclguard_digest_resolve_bench CASE RUNS [--threads T] [--fresh] "
               "[--no-cache] [--plain-http HOST:PORT]... [--ca-file FILE] [--docker-config FILE] "
               "[--budget-ms N] IMAGE\n");
  return 2;
}

double Percentile(const std::vector<double>& sorted, double fraction) {
  const auto rank =
      static_cast<std::size_t>(std::ceil(fraction * static_cast<double>(sorted.size())));
  return sorted[std::min(sorted.size(), std::max<std::size_t>(rank, 1)) - 1];
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 4) return Usage();
  const std::string name = argv[1];
  const long runs = std::stol(argv[2]);
  int threads = 1;
  bool fresh = false;
  webhook::DigestResolverOptions options;
  std::vector<webhook::RegistryCredential> credentials;
  std::string image;
  for (int i = 3; i < argc; ++i) {
    const std::string_view arg = argv[i];
    const bool has_value = i + 1 < argc;
    if (arg == "--threads" && has_value) {
      threads = std::stoi(argv[++i]);
    } else if (arg == "--fresh") {
      fresh = true;
    } else if (arg == "--no-cache") {
      options.ttl = options.failure_ttl = std::chrono::seconds(0);
    } else if (arg == "--plain-http" && has_value) {
      options.plain_http_registries.emplace_back(argv[++i]);
    } else if (arg == "--ca-file" && has_value) {
      options.ca_file = argv[++i];
    } else if (arg == "--budget-ms" && has_value) {
      options.budget = std::chrono::milliseconds(std::stol(argv[++i]));
    } else if (arg == "--docker-config" && has_value) {
      std::ifstream in(argv[++i]);
      std::stringstream bytes;
      bytes << in.rdbuf();
      credentials = webhook::ReadDockerConfig(bytes.str());
    } else if (arg.starts_with("--") || !image.empty()) {
      return Usage();
    } else {
      image = arg;
    }
  }
  if (image.empty() || runs < 1 || threads < 1) return Usage();
  const core::ImageReference ref = core::ParseImageReference(image);

  auto shared = std::make_unique<webhook::DigestResolver>(options);
  const bool warm = !fresh && options.ttl.count() > 0;
  if (warm) shared->Resolve(ref, credentials);  // fills the cache

  std::mutex mutex;
  std::vector<double> micros;
  std::map<std::string, long> statuses;
  std::vector<std::thread> workers;
  for (int t = 0; t < threads; ++t) {
    workers.emplace_back([&, t] {
      std::vector<double> mine;
      std::map<std::string, long> seen;
      for (long i = t; i < runs; i += threads) {
        std::unique_ptr<webhook::DigestResolver> own;
        if (fresh) own = std::make_unique<webhook::DigestResolver>(options);
        webhook::DigestResolver& resolver = fresh ? *own : *shared;
        const auto start = Clock::now();
        const webhook::Resolution result = resolver.Resolve(ref, credentials);
        mine.push_back(std::chrono::duration<double, std::micro>(Clock::now() - start).count());
        ++seen[std::string(webhook::ResolveStatusName(result.status)) +
               (result.cached ? "(cached)" : "")];
      }
      std::lock_guard lock(mutex);
      micros.insert(micros.end(), mine.begin(), mine.end());
      for (const auto& [status, count] : seen) statuses[status] += count;
    });
  }
  for (std::thread& worker : workers) worker.join();
  std::sort(micros.begin(), micros.end());
  std::string said;
  for (const auto& [status, count] : statuses) {
    said += (said.empty() ? "" : ",") + status + ":" + std::to_string(count);
  }
  std::printf("case=%s runs=%ld threads=%d median_us=%.2f p99_us=%.2f max_us=%.2f status=%s\n",
              name.c_str(), runs, threads, Percentile(micros, 0.5), Percentile(micros, 0.99),
              micros.back(), said.c_str());
  return 0;
}
