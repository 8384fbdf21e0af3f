// Robustness of scripts/controlplane.sh as the harness uses it: several
// instances side by side, recovery from a crashed run, ports taken by someone
// else, failing starts that explain themselves, and cleanup when the owning
// test process dies. Each test starts its own instance next to the shared one.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <stdexcept>
#include <string>
#include <vector>

#include "controlplane_env.h"
#include "test_kube_client.h"

namespace ncclguard::testenv {
namespace {

namespace fs = std::filesystem;
using std::chrono::seconds;

// Process ids whose command line mentions `needle` (the state dir appears in
// the flags of every server an instance starts).
std::vector<pid_t> ProcessesMentioning(const std::string& needle) {
  std::vector<pid_t> pids;
  for (const auto& entry : fs::directory_iterator("/proc")) {
    const std::string name = entry.path().filename();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    // A process that exits while its cmdline is read fails the read (ESRCH, thrown by
    // libstdc++'s filebuf): it mentions nothing any more.
    std::string cmdline;
    try {
      std::ifstream in(entry.path() / "cmdline", std::ios::binary);
      cmdline.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
    } catch (const std::exception&) {
      continue;
    }
    if (cmdline.find(needle) != std::string::npos && std::stoi(name) != getpid())
      pids.push_back(std::stoi(name));
  }
  return pids;
}

// A socket listening on a free 127.0.0.1 port, closed on destruction.
class OccupiedPort {
 public:
  OccupiedPort() {
    fd_ = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t length = sizeof(address);
    if (fd_ < 0 || bind(fd_, reinterpret_cast<sockaddr*>(&address), sizeof(address)) != 0 ||
        listen(fd_, 1) != 0 ||
        getsockname(fd_, reinterpret_cast<sockaddr*>(&address), &length) != 0) {
      throw std::runtime_error("occupying a port on 127.0.0.1 failed");
    }
    port_ = ntohs(address.sin_port);
  }
  ~OccupiedPort() { close(fd_); }
  OccupiedPort(const OccupiedPort&) = delete;
  OccupiedPort& operator=(const OccupiedPort&) = delete;
  int port() const { return port_; }

 private:
  int fd_ = -1;
  int port_ = 0;
};

void ExpectStartOk(const ProcessResult& started) {
  ASSERT_EQ(started.exit_code, 0) << started.stderr_text;
}

TEST(ControlPlaneHarness, SecondInstanceIsIndependentOfTheShared) {
  const ControlPlaneInfo& shared = ControlPlaneEnvironment::Info();
  ControlPlane second(MakeTempDir("ncclguard-cp-second"));
  ASSERT_NO_FATAL_FAILURE(ExpectStartOk(second.Start()));
  EXPECT_NE(second.info().apiserver_url, shared.apiserver_url);

  TestKubeClient second_client(second.info());
  TestKubeClient shared_client(shared);
  std::string ns = CreateTestNamespace(second_client, "only-in-second");
  EXPECT_EQ(second_client.Get("/api/v1/namespaces/" + ns).status, 200);
  EXPECT_EQ(shared_client.Get("/api/v1/namespaces/" + ns).status, 404);

  ProcessResult stopped = second.Stop();
  EXPECT_EQ(stopped.exit_code, 0) << stopped.stderr_text;
  EXPECT_FALSE(fs::exists(second.state_dir()));
  EXPECT_TRUE(ProcessesMentioning(second.state_dir()).empty());
  EXPECT_EQ(shared_client.Get("/readyz").status, 200)
      << "stopping one instance must not touch another";
}

TEST(ControlPlaneHarness, ApiServerRestartsAloneKeepingItsDataAndUrl) {
  ControlPlane instance(MakeTempDir("ncclguard-cp-restart"));
  ASSERT_NO_FATAL_FAILURE(ExpectStartOk(instance.Start()));
  TestKubeClient client(instance.info());
  std::string ns = CreateTestNamespace(client, "survives-restart");

  ProcessResult stopped = instance.StopApiServer();
  ASSERT_EQ(stopped.exit_code, 0) << stopped.stderr_text;
  EXPECT_NE(client.Get("/readyz").status, 200);
  ProcessResult started = instance.StartApiServer();
  ASSERT_EQ(started.exit_code, 0) << started.stderr_text;
  EXPECT_EQ(client.Get("/readyz").status, 200);
  EXPECT_EQ(client.Get("/api/v1/namespaces/" + ns).status, 200) << "etcd data was lost";
  ProcessResult twice = instance.StartApiServer();
  EXPECT_NE(twice.exit_code, 0);
  EXPECT_NE(twice.stderr_text.find("already runs"), std::string::npos) << twice.stderr_text;
  EXPECT_EQ(instance.Stop().exit_code, 0);
  EXPECT_TRUE(ProcessesMentioning(instance.state_dir()).empty());
}

TEST(ControlPlaneHarness, EtcdRestartsAloneKeepingItsDataWhileTheApiServerRuns) {
  ControlPlane instance(MakeTempDir("ncclguard-cp-etcd-restart"));
  ASSERT_NO_FATAL_FAILURE(ExpectStartOk(instance.Start()));
  TestKubeClient client(instance.info());
  std::string ns = CreateTestNamespace(client, "survives-etcd-restart");

  ProcessResult stopped = instance.StopEtcd();
  ASSERT_EQ(stopped.exit_code, 0) << stopped.stderr_text;
  // kube-apiserver's readiness includes its etcd check.
  EXPECT_TRUE(Eventually([&] { return client.Get("/readyz").status != 200; }, seconds(30)))
      << "kube-apiserver stayed ready without etcd";
  ProcessResult started = instance.StartEtcd();
  ASSERT_EQ(started.exit_code, 0) << started.stderr_text;
  // kube-apiserver was never restarted: it reconnects to etcd on the same URL.
  EXPECT_TRUE(
      Eventually([&] { return client.Get("/api/v1/namespaces/" + ns).status == 200; }, seconds(60)))
      << "etcd data was lost or the API server did not reconnect";
  const nlohmann::json config_map = {
      {"apiVersion", "v1"}, {"kind", "ConfigMap"}, {"metadata", {{"name", "after-restart"}}}};
  EXPECT_TRUE(Eventually(
      [&] {
        return client.Post("/api/v1/namespaces/" + ns + "/configmaps", config_map).status == 201;
      },
      seconds(30)))
      << "writes fail after etcd came back";
  ProcessResult twice = instance.StartEtcd();
  EXPECT_NE(twice.exit_code, 0);
  EXPECT_NE(twice.stderr_text.find("already runs"), std::string::npos) << twice.stderr_text;
  EXPECT_EQ(instance.Stop().exit_code, 0);
  EXPECT_TRUE(ProcessesMentioning(instance.state_dir()).empty());
}

TEST(ControlPlaneHarness, StaleStateDirFromACrashedRunIsCleanedUp) {
  std::string dir = MakeTempDir("ncclguard-cp-stale");
  // What a killed run leaves: the marker, pid files of dead processes (one a
  // recycled pid that now runs something else: this test), data and logs.
  std::ofstream(dir + "/.ncclguard-controlplane").put('\n');
  std::ofstream(dir + "/etcd.pid") << "2147483646 /nonexistent/etcd\n";
  std::ofstream(dir + "/kube-apiserver.pid") << getpid() << " /nonexistent/kube-apiserver\n";
  fs::create_directories(dir + "/etcd-data/member");
  std::ofstream(dir + "/etcd-data/member/leftover") << "stale";

  ControlPlane recovered(dir);
  ProcessResult started = recovered.Start();
  ASSERT_NO_FATAL_FAILURE(ExpectStartOk(started));
  EXPECT_NE(started.stderr_text.find("stale state"), std::string::npos) << started.stderr_text;
  EXPECT_FALSE(fs::exists(dir + "/etcd-data/member/leftover"));
  TestKubeClient client(recovered.info());
  EXPECT_EQ(client.Get("/readyz").status, 200);
}

TEST(ControlPlaneHarness, RefusesADirItDidNotCreate) {
  std::string dir = MakeTempDir("ncclguard-cp-foreign");
  std::ofstream(dir + "/precious") << "user data";
  ControlPlane foreign(dir);
  ProcessResult started = foreign.Start();
  EXPECT_NE(started.exit_code, 0);
  EXPECT_NE(started.stderr_text.find("refusing"), std::string::npos) << started.stderr_text;
  EXPECT_TRUE(fs::exists(dir + "/precious"));
  fs::remove_all(dir);
}

TEST(ControlPlaneHarness, RetriesWhenAChosenPortIsTaken) {
  OccupiedPort taken;
  std::string ports = std::to_string(taken.port()) + " 0 " + std::to_string(taken.port());
  ControlPlane instance(MakeTempDir("ncclguard-cp-ports"),
                        {{"NCCLGUARD_CONTROLPLANE_PORTS", ports}});
  ProcessResult started = instance.Start();
  ASSERT_NO_FATAL_FAILURE(ExpectStartOk(started));
  EXPECT_NE(started.stderr_text.find("etcd could not bind"), std::string::npos)
      << started.stderr_text;
  EXPECT_NE(started.stderr_text.find("kube-apiserver could not bind"), std::string::npos)
      << started.stderr_text;
  EXPECT_EQ(instance.info().apiserver_url.find(":" + std::to_string(taken.port())),
            std::string::npos);
  TestKubeClient client(instance.info());
  EXPECT_EQ(client.Get("/readyz").status, 200);
  EXPECT_EQ(instance.Stop().exit_code, 0);
  EXPECT_TRUE(ProcessesMentioning(instance.state_dir()).empty())
      << "a failed attempt's server outlived stop";
}

TEST(ControlPlaneHarness, FailingEtcdStartExitsNonZeroWithLogTail) {
  ControlPlane broken(MakeTempDir("ncclguard-cp-broken-etcd"),
                      {{"NCCLGUARD_CONTROLPLANE_EXTRA_ETCD_ARGS", "--ncclguard-no-such-flag"}});
  ProcessResult started = broken.Start();
  EXPECT_NE(started.exit_code, 0);
  EXPECT_NE(started.stderr_text.find("etcd exited during startup"), std::string::npos)
      << started.stderr_text;
  EXPECT_NE(started.stderr_text.find("ncclguard-no-such-flag"), std::string::npos)
      << "the log tail should show etcd's complaint:\n"
      << started.stderr_text;
  EXPECT_TRUE(ProcessesMentioning(broken.state_dir()).empty());
  EXPECT_EQ(broken.Stop().exit_code, 0);
}

TEST(ControlPlaneHarness, FailingApiServerStartStopsEtcdToo) {
  ControlPlane broken(
      MakeTempDir("ncclguard-cp-broken-apiserver"),
      {{"NCCLGUARD_CONTROLPLANE_EXTRA_APISERVER_ARGS", "--ncclguard-no-such-flag"}});
  ProcessResult started = broken.Start();
  EXPECT_NE(started.exit_code, 0);
  EXPECT_NE(started.stderr_text.find("kube-apiserver exited during startup"), std::string::npos)
      << started.stderr_text;
  EXPECT_NE(started.stderr_text.find("ncclguard-no-such-flag"), std::string::npos)
      << started.stderr_text;
  EXPECT_TRUE(ProcessesMentioning(broken.state_dir()).empty())
      << "etcd must not outlive a failed start";
  EXPECT_EQ(broken.Stop().exit_code, 0);
}

TEST(ControlPlaneHarness, UnbuiltCacheSaysHowToBuild) {
  std::string empty_cache = MakeTempDir("ncclguard-cp-nocache");
  ControlPlane unbuilt(MakeTempDir("ncclguard-cp-unbuilt"),
                       {{"NCCLGUARD_CONTROLPLANE_CACHE", empty_cache}});
  ProcessResult started = unbuilt.Start();
  EXPECT_NE(started.exit_code, 0);
  EXPECT_NE(started.stderr_text.find("control plane not built: run scripts/controlplane.sh build"),
            std::string::npos)
      << started.stderr_text;
  unbuilt.Stop();
  fs::remove_all(empty_cache);
}

TEST(ControlPlaneHarness, DeadOwnerProcessStopsTheInstance) {
  // Stand-in for a test binary that crashes: a child we kill ourselves.
  pid_t owner = fork();
  ASSERT_GE(owner, 0);
  if (owner == 0) {
    pause();
    _exit(0);
  }
  ControlPlane orphan(MakeTempDir("ncclguard-cp-orphan"),
                      {{"NCCLGUARD_CONTROLPLANE_OWNER_PID", std::to_string(owner)}});
  ProcessResult started = orphan.Start();
  if (started.exit_code != 0) {
    kill(owner, SIGKILL);
    waitpid(owner, nullptr, 0);
  }
  ASSERT_NO_FATAL_FAILURE(ExpectStartOk(started));
  ASSERT_FALSE(ProcessesMentioning(orphan.state_dir()).empty());

  kill(owner, SIGKILL);
  waitpid(owner, nullptr, 0);
  EXPECT_TRUE(
      Eventually([&] { return ProcessesMentioning(orphan.state_dir()).empty(); }, seconds(30)))
      << "the watchdog did not stop the servers of a dead owner";
  EXPECT_TRUE(Eventually([&] { return !fs::exists(orphan.state_dir()); }, seconds(10)));
}

}  // namespace
}  // namespace ncclguard::testenv
