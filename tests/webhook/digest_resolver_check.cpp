// Resolves image tags with one webhook::DigestResolver, as tests/scripts/digest_resolver_test.sh
// asks against a real registry: one line a tag, in the order given, so that the script sees what
// was cached and what each registry answered.
//   digest_resolver_check [--plain-http HOST:PORT]... [--ca-file FILE] [--budget-ms N]
//                         [--docker-config FILE] [anon=]IMAGE...
// An IMAGE written anon=IMAGE is resolved without the docker config's credentials. Each line:
//   <Status> digest=<digest or -> cached=<0|1> ms=<elapsed> why=<why>
// Exit 0 whatever was resolved; 2 on a bad argument or docker config.
#include <chrono>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

#include "core/errors.h"
#include "core/image_ref.h"
#include "webhook/digest_resolver.h"

namespace {

int Usage() {
  std::cerr << "usage: digest_resolver_check [--plain-http HOST:PORT]... [--ca-file FILE] "
               "[--budget-ms N] [--docker-config FILE] [anon=]IMAGE...\n";
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  using namespace ncclguard;
  webhook::DigestResolverOptions options;
  std::vector<webhook::RegistryCredential> credentials;
  std::vector<std::string> images;
  for (int i = 1; i < argc; ++i) {
    const std::string_view arg = argv[i];
    const bool has_value = i + 1 < argc;
    if (arg == "--plain-http" && has_value) {
      options.plain_http_registries.emplace_back(argv[++i]);
    } else if (arg == "--ca-file" && has_value) {
      options.ca_file = argv[++i];
    } else if (arg == "--budget-ms" && has_value) {
      options.budget = std::chrono::milliseconds(std::stol(argv[++i]));
    } else if (arg == "--docker-config" && has_value) {
      std::ifstream in(argv[++i]);
      std::stringstream bytes;
      bytes << in.rdbuf();
      try {
        credentials = webhook::ReadDockerConfig(bytes.str());
      } catch (const core::InputError& e) {
        std::cerr << e.what() << "\n";
        return 2;
      }
    } else if (arg.starts_with("--")) {
      return Usage();
    } else {
      images.emplace_back(arg);
    }
  }
  if (images.empty()) return Usage();

  webhook::DigestResolver resolver(options);
  for (const std::string& item : images) {
    const bool anonymous = item.starts_with("anon=");
    const std::string image = anonymous ? item.substr(5) : item;
    core::ImageReference ref;
    try {
      ref = core::ParseImageReference(image);
    } catch (const core::InputError& e) {
      std::cerr << e.what() << "\n";
      return 2;
    }
    const auto start = std::chrono::steady_clock::now();
    const webhook::Resolution result = resolver.Resolve(
        ref, anonymous ? std::span<const webhook::RegistryCredential>{}
                       : std::span<const webhook::RegistryCredential>(credentials));
    const auto elapsed =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
    std::printf("%s digest=%s cached=%d ms=%.1f why=%s\n",
                std::string(webhook::ResolveStatusName(result.status)).c_str(),
                result.digest.empty() ? "-" : result.digest.c_str(), result.cached ? 1 : 0, elapsed,
                result.why.c_str());
  }
  std::fflush(stdout);
  return 0;
}
