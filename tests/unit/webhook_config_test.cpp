// The webhook settings `ncclguard webhook` and `ncclguard controller` take from the environment
// the chart gives them (cli/webhook_config.h).
#include "cli/webhook_config.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <optional>
#include <stdexcept>
#include <string>

namespace ncclguard::test {
namespace {

// Sets a variable (nullptr: unsets it) for one test and restores what was there.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const char* value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old;
    if (value != nullptr) {
      ::setenv(name, value, 1);
    } else {
      ::unsetenv(name);
    }
  }
  ~ScopedEnv() {
    if (old_) {
      ::setenv(name_, old_->c_str(), 1);
    } else {
      ::unsetenv(name_);
    }
  }
  ScopedEnv(const ScopedEnv&) = delete;
  ScopedEnv& operator=(const ScopedEnv&) = delete;

 private:
  const char* name_;
  std::optional<std::string> old_;
};

webhook::ServerConfig Config() {
  return cli::WebhookServerConfig("127.0.0.1:0", "tls.crt", "tls.key", cli::PolicyOptions{});
}

TEST(WebhookConfig, TheContainersMemoryLimitComesFromTheDownwardApi) {
  {
    const ScopedEnv limit("CONTAINER_MEMORY_LIMIT", "268435456");
    EXPECT_EQ(Config().memory_limit_bytes, std::size_t{256} << 20);
  }
  const ScopedEnv none("CONTAINER_MEMORY_LIMIT", nullptr);
  EXPECT_EQ(Config().memory_limit_bytes, std::nullopt);
}

TEST(WebhookConfig, AMemoryLimitThatIsNotBytesStopsTheStartNamingIt) {
  const ScopedEnv limit("CONTAINER_MEMORY_LIMIT", "256Mi");
  try {
    Config();
    ADD_FAILURE() << "256Mi was taken as a limit in bytes";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("$CONTAINER_MEMORY_LIMIT: \"256Mi\""), std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace ncclguard::test
