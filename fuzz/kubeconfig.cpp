// A kubeconfig file: kube::ParseKubeConfig, which LoadKubeConfigFile calls on the file's text.
// Its callers catch kube::ConfigError and say what is wrong; anything else escaping is a
// finding (a yaml-cpp conversion error, say, would end the controller with an internal error).
#include <cstddef>
#include <cstdint>
#include <string>

#include "fuzz/fuzz_support.h"
#include "kube/config.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace ncclguard;
  const std::string text(reinterpret_cast<const char*>(data), size);
  for (bool allow_insecure : {false, true}) {
    try {
      const kube::ClientConfig config =
          kube::ParseKubeConfig(text, "fuzz-kubeconfig", "/nonexistent",
                                {.allow_insecure_skip_tls_verify = allow_insecure});
      fuzz::Require(config.server.starts_with("http://") || config.server.starts_with("https://"),
                    "a parsed kubeconfig has an http(s) server", config.server);
      fuzz::Require(allow_insecure || !config.insecure_skip_tls_verify,
                    "skipping TLS verification needs the caller's permission");
    } catch (const kube::ConfigError& e) {
      fuzz::Require(std::string(e.what()).find("fuzz-kubeconfig") != std::string::npos,
                    "a kubeconfig error names the file", e.what());
    }
  }
  return 0;
}
