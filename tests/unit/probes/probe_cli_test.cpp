// `ncclguard probe --once` on the built binary: exit codes, the JSON report's shape, and a
// clean Skip for hardware this machine does not have.
#include <dlfcn.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "core/catalog.h"
#include "core/json.h"
#include "tests/unit/probes/probe_test_support.h"
#include "tests/unit/test_support.h"

namespace ncclguard::test {
namespace {

using core::Json;

TEST(ProbeCli, JsonReportHasEveryCheckInContractOrder) {
  const auto result = RunCli({"probe", "--once", "-o", "json", "--host-root",
                              FixturePath("p5-30efa"), "--node-name", "node-a"});
  ASSERT_EQ(result.exit_code, 1) << result.err;  // 30 of 32 EFA devices
  const Json report = Json::parse(result.out);
  EXPECT_EQ(report["node"], "node-a");
  EXPECT_EQ(report["instanceType"], "p5.48xlarge");
  EXPECT_EQ(report["instanceTypeSource"], "DMI product name");
  EXPECT_EQ(report["summary"], "Fail");
  EXPECT_EQ(report["probeVersion"], "0.1.0");
  EXPECT_TRUE(report["probeTime"].get<std::string>().ends_with("Z"));
  const auto catalog = core::Catalog::Of(core::FindingKind::Check);
  ASSERT_EQ(report["checks"].size(), catalog.size());
  for (std::size_t i = 0; i < catalog.size(); ++i) {
    const Json& check = report["checks"][i];
    EXPECT_EQ(check["id"], catalog[i].id);
    for (const char* key : {"status", "observed", "expected", "message", "guide"})
      EXPECT_TRUE(check.contains(key)) << catalog[i].id << " lacks " << key;
    EXPECT_TRUE(check["guide"].get<std::string>().ends_with("#" + std::string(catalog[i].slug)));
  }
  EXPECT_EQ(report["checks"][0]["status"], "Fail");
}

TEST(ProbeCli, AllSelectedChecksPassingExitsZero) {
  const auto result = RunCli({"probe", "--once", "--host-root", FixturePath("p5-32efa"), "--check",
                              "removeipc", "--check", "pci-acs", "--check", "memlock-limit"});
  EXPECT_EQ(result.exit_code, 0) << result.out << result.err;
  EXPECT_NE(result.out.find("Pass  removeipc"), std::string::npos) << result.out;
  EXPECT_NE(result.out.find("summary: Pass"), std::string::npos);
}

TEST(ProbeCli, ProbeThatCannotRunExitsTwoWithTheReason) {
  for (const auto& args : std::vector<std::vector<std::string>>{
           {"probe", "-o", "json"},
           {"probe", "--once", "--host-root", "/nonexistent/root"},
           {"probe", "--once", "--check", "no-such-check"},
           {"probe", "--once", "--instance-type-file", "/nonexistent/type"},
           {"probe", "--once", "--instance-type", "P5 48XL"},
           {"probe", "--once", "--check-timeout", "0"}}) {
    const auto result = RunCli(args);
    EXPECT_EQ(result.exit_code, 2) << args.back() << ": " << result.out;
    EXPECT_TRUE(result.out.empty()) << args.back();
    EXPECT_NE(result.err.find("ncclguard probe: "), std::string::npos) << result.err;
  }
}

TEST(ProbeCli, WithoutAnNvidiaDriverGpuChecksSkipWithNoCudaDriver) {
  if (void* cuda = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL)) {
    dlclose(cuda);
    GTEST_SKIP() << "this machine has a CUDA driver; probes/gpu-check.sh covers it";
  }
  const auto result = RunCli({"probe", "--once", "-o", "json"});
  ASSERT_NE(result.exit_code, 2) << result.err;
  const Json report = Json::parse(result.out);
  for (const Json& check : report["checks"]) {
    const std::string id = check["id"];
    if (id == "gpu-p2p" || id == "gpu-ecc" || id == "driver-version" || id == "gpu-row-remap" ||
        id == "nvlink-status") {
      EXPECT_EQ(check["status"], "Skip") << id;
      EXPECT_NE(check["message"].get<std::string>().find("no CUDA driver"), std::string::npos)
          << id;
    }
    if (id == "memlock-limit") {
      EXPECT_NE(check["observed"].get<std::string>().find("soft "), std::string::npos);
    }
    if (id == "dev-shm-stale") {
      EXPECT_NE(check["observed"].get<std::string>().find(" /dev/shm, "), std::string::npos);
    }
  }
}

TEST(ProbeCli, PolicyCatalogAndInstanceTypeFileDecideTheExpectations) {
  const auto dir =
      std::filesystem::temp_directory_path() / ("ncclguard-probe-cli-" + std::to_string(getpid()));
  std::filesystem::create_directories(dir);
  std::ofstream(dir / "policy.yaml") << "instanceTypes:\n"
                                        "  - {name: p6-b200.48xlarge, efaDevices: 8, gpus: 8, "
                                        "gpudirectRdma: true}\n";
  std::ofstream(dir / "identity.json") << R"({"instanceType": "p6-b200.48xlarge"})";
  const auto result =
      RunCli({"probe", "--once", "-o", "json", "--host-root", FixturePath("p5-32efa"), "--check",
              "efa-device-count", "--policy", (dir / "policy.yaml").string(),
              "--instance-type-file", (dir / "identity.json").string()});
  std::filesystem::remove_all(dir);
  ASSERT_EQ(result.exit_code, 0) << result.out << result.err;
  const Json report = Json::parse(result.out);
  EXPECT_EQ(report["instanceType"], "p6-b200.48xlarge");
  EXPECT_EQ(report["checks"][0]["expected"], "8 (p6-b200.48xlarge)");
  EXPECT_EQ(report["checks"][0]["status"], "Warn");  // 32 devices in sysfs, the policy says 8
}

TEST(ProbeCli, HiddenProviderFlagDrivesTheRealLibfabric) {
  const auto result = RunCli({"probe", "--once", "-o", "json", "--fabric-provider", "sockets",
                              "--check", "efa-provider", "--host-root", FixturePath("stale-shm")});
  ASSERT_EQ(result.exit_code, 0) << result.out << result.err;
  const Json report = Json::parse(result.out);
  EXPECT_EQ(report["checks"][0]["status"], "Pass");
}

}  // namespace
}  // namespace ncclguard::test
