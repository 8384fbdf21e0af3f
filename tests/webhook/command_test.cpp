// `ncclguard webhook` as the process a Deployment runs: serves, and on SIGTERM drains and exits 0.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <iterator>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "controlplane_env.h"
#include "https_client.h"
#include "served_webhook.h"
#include "test_https_server.h"

namespace ncclguard::webhook::testing {
namespace {

pid_t Spawn(const std::vector<std::string>& args, const std::string& log) {
  const pid_t pid = fork();
  if (pid == 0) {
    std::vector<char*> argv;
    for (const auto& arg : args) argv.push_back(const_cast<char*>(arg.c_str()));
    argv.push_back(nullptr);
    if (freopen(log.c_str(), "w", stderr) == nullptr) _exit(126);
    execv(argv[0], argv.data());
    _exit(127);
  }
  return pid;
}

TEST(WebhookCommand, ServesThenExitsZeroOnSigterm) {
  const std::string dir = testenv::MakeTempDir("ncclguard-webhook-cmd");
  const testenv::TlsMaterial tls = testenv::MakeServingCertificate("cmd");
  WriteFile(dir + "/tls.crt", tls.cert_pem);
  WriteFile(dir + "/tls.key", tls.key_pem);
  WriteFile(dir + "/ca.crt", tls.ca_pem);
  // A port taken between FreePort and the server's bind makes the process exit: try another.
  pid_t pid = -1;
  int port = 0;
  bool ready = false;
  for (int attempt = 0; attempt < 3 && !ready; ++attempt) {
    port = FreePort();
    pid = Spawn(
        {NCCLGUARD_BINARY, "webhook", "--listen", "127.0.0.1:" + std::to_string(port),
         "--tls-cert-file", dir + "/tls.crt", "--tls-key-file", dir + "/tls.key", "--threads", "2"},
        dir + "/stderr.log");
    const std::string url = "https://127.0.0.1:" + std::to_string(port) + "/readyz";
    for (int i = 0; i < 200 && !ready; ++i) {
      int status = 0;
      if (waitpid(pid, &status, WNOHANG) == pid) break;  // exited: retry on another port
      ready = Fetch(url, dir + "/ca.crt", "", {.method = "GET"}).status == 200;
      if (!ready) std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
  }
  ASSERT_TRUE(ready);
  {
    // A client that gives up halfway through its body: shutdown must not wait on it forever.
    RawTlsClient gave_up(port);
    gave_up.Send(
        "POST /validate HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
        "Content-Length: 100000\r\n\r\n{\"apiVersion\":");
  }
  kill(pid, SIGTERM);
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  EXPECT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0);
  std::ifstream log(dir + "/stderr.log");
  const std::string text((std::istreambuf_iterator<char>(log)), std::istreambuf_iterator<char>());
  EXPECT_NE(text.find(R"("level":"info","msg":"webhook listening")"), std::string::npos) << text;
  EXPECT_NE(text.find("received SIGTERM"), std::string::npos) << text;
}

// Runs `ncclguard webhook` with a missing certificate and `extra` flags, which must stop it
// before it serves; returns its exit status and what it wrote to stderr.
std::pair<int, std::string> RunRefused(std::vector<std::string> extra) {
  const std::string dir = testenv::MakeTempDir("ncclguard-webhook-cmd");
  std::vector<std::string> args{NCCLGUARD_BINARY, "webhook",         "--listen",
                                "127.0.0.1:1",    "--tls-cert-file", dir + "/none.crt",
                                "--tls-key-file", dir + "/none.key"};
  args.insert(args.end(), extra.begin(), extra.end());
  const pid_t pid = Spawn(args, dir + "/stderr.log");
  int status = 0;
  if (waitpid(pid, &status, 0) != pid) return {-1, "waitpid failed"};
  std::ifstream log(dir + "/stderr.log");
  return {WEXITSTATUS(status),
          std::string((std::istreambuf_iterator<char>(log)), std::istreambuf_iterator<char>())};
}

TEST(WebhookCommand, OneListenerThreadIsRefused) {
  // Was: with --threads 1 the process never exited on SIGTERM once a client had given up while
  // the thread was busy: cpprestsdk's listener close ran on that one thread and waited there for
  // the connection's completion, which needed a second thread.
  const auto [code, text] = RunRefused({"--threads", "1"});
  EXPECT_EQ(code, 2);
  EXPECT_NE(text.find("--threads"), std::string::npos) << text;
}

TEST(WebhookCommand, MissingCertificateIsAClearErrorAndExitTwo) {
  const auto [code, text] = RunRefused({});
  EXPECT_EQ(code, 2);
  EXPECT_NE(text.find("none.crt: cannot open"), std::string::npos) << text;
}

}  // namespace
}  // namespace ncclguard::webhook::testing
