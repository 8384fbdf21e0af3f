// The probe's real CUDA driver API, NVML and NCCL path (dlopen, dlsym, the calls, the checks
// over their answers) against stand-in libcuda.so.1 / libnvidia-ml.so.1 / libnccl.so.2 from
// tests/fake_driver, on
// machines without a GPU. probes/gpu-check.sh covers a real driver.
#include <gtest/gtest.h>

#include <cstdlib>
#include <map>

#include "core/json.h"
#include "tests/unit/test_support.h"

namespace ncclguard::test {
namespace {

using core::Json;

// Environment for the child ncclguard process; restored afterwards so that other tests in this
// process see no fake driver.
class FakeDriverTest : public ::testing::Test {
 protected:
  void SetEnv(const std::string& name, const std::string& value) {
    if (!saved_.contains(name)) {
      const char* old = std::getenv(name.c_str());
      saved_[name] = old != nullptr ? std::optional<std::string>(old) : std::nullopt;
    }
    setenv(name.c_str(), value.c_str(), 1);
  }
  void SetUp() override { SetEnv("LD_LIBRARY_PATH", NCCLGUARD_FAKE_DRIVER_DIR); }
  void TearDown() override {
    for (const auto& [name, value] : saved_) {
      if (value) {
        setenv(name.c_str(), value->c_str(), 1);
      } else {
        unsetenv(name.c_str());
      }
    }
  }

  // expected_exit < 0: any report (0 or 1).
  Json Probe(std::vector<std::string> extra, int expected_exit) {
    std::vector<std::string> args{"probe",       "--once",
                                  "-o",          "json",
                                  "--host-root", SourcePath("tests/fixtures/probe/p5-32efa"),
                                  "--node-name", "gpu-node-1"};
    for (const char* id : {"gpu-count", "gpu-p2p", "gpu-row-remap", "gpu-ecc", "nvlink-status",
                           "driver-version", "nccl-version"}) {
      args.push_back("--check");
      args.push_back(id);
    }
    args.insert(args.end(), extra.begin(), extra.end());
    const auto result = RunCli(args);
    if (expected_exit >= 0) {
      EXPECT_EQ(result.exit_code, expected_exit) << result.out << result.err;
    }
    return Json::parse(result.out);
  }

  static const Json& Check(const Json& report, const std::string& id) {
    for (const Json& check : report["checks"])
      if (check["id"] == id) return check;
    throw std::out_of_range(id);
  }

 private:
  std::map<std::string, std::optional<std::string>> saved_;
};

bool Contains(const Json& value, const std::string& part) {
  return value.get<std::string>().find(part) != std::string::npos;
}

TEST_F(FakeDriverTest, HealthyEightGpuNodePasses) {
  const Json report = Probe({}, 0);
  EXPECT_EQ(report["instanceType"], "p5.48xlarge");
  for (const Json& check : report["checks"]) EXPECT_EQ(check["status"], "Pass") << check.dump();
  EXPECT_EQ(Check(report, "gpu-count")["observed"], "8 (CUDA), 8 (NVML)");
  EXPECT_TRUE(
      Contains(Check(report, "gpu-p2p")["observed"], "56 of 56 GPU pairs have peer access"));
  EXPECT_EQ(Check(report, "driver-version")["observed"], "driver 550.90.07, CUDA 12.4");
  EXPECT_EQ(Check(report, "nccl-version")["observed"], "NCCL 2.21.5 (libnccl.so.2)");
  EXPECT_TRUE(Contains(Check(report, "nvlink-status")["observed"],
                       "8 GPUs checked; each: 18 links active"));
}

TEST_F(FakeDriverTest, BandwidthTestCopiesBetweenEveryPair) {
  const Json report = Probe({"--bandwidth"}, -1);
  const Json& p2p = Check(report, "gpu-p2p");
  EXPECT_TRUE(Contains(p2p["observed"], "56 of 56 GPU pairs have peer access; copy bandwidth min "))
      << p2p.dump();
  // The fake's copy times are noise: outliers may warn, but peer access never fails.
  EXPECT_NE(p2p["status"], "Fail");
}

TEST_F(FakeDriverTest, BlockedPeerPendingRemapAndDownLinkFail) {
  SetEnv("NCCLGUARD_FAKE_NO_PEER", "0-3");
  SetEnv("NCCLGUARD_FAKE_REMAP_PENDING", "2");
  SetEnv("NCCLGUARD_FAKE_LINK_DOWN", "6");
  const Json report = Probe({}, 1);
  EXPECT_EQ(report["summary"], "Fail");
  EXPECT_EQ(Check(report, "gpu-p2p")["status"], "Fail");
  EXPECT_TRUE(Contains(Check(report, "gpu-p2p")["observed"], "none: 0->3, 3->0"));
  EXPECT_EQ(Check(report, "gpu-row-remap")["status"], "Fail");
  EXPECT_TRUE(Contains(Check(report, "gpu-row-remap")["observed"], "GPU 2: remap pending"));
  EXPECT_EQ(Check(report, "gpu-row-remap")["suggestedCommand"],
            "kubectl cordon gpu-node-1\n"
            "kubectl drain gpu-node-1 --ignore-daemonsets --delete-emptydir-data");
  EXPECT_EQ(Check(report, "nvlink-status")["status"], "Fail");
  EXPECT_TRUE(
      Contains(Check(report, "nvlink-status")["observed"], "GPU 6: 17 active, inactive links 5"));
  EXPECT_EQ(Check(report, "gpu-ecc")["status"], "Pass");
}

TEST_F(FakeDriverTest, MissingGpuFailsGpuCount) {
  SetEnv("NCCLGUARD_FAKE_GPUS", "7");
  const Json report = Probe({}, 1);
  EXPECT_EQ(Check(report, "gpu-count")["status"], "Fail");
  EXPECT_EQ(Check(report, "gpu-count")["observed"], "7 (CUDA), 7 (NVML)");
}

TEST_F(FakeDriverTest, DriverWithoutGpusIsZeroGpusNotNoDriver) {
  SetEnv("NCCLGUARD_FAKE_GPUS", "0");
  const Json report = Probe({}, 1);
  EXPECT_EQ(Check(report, "gpu-count")["status"], "Fail");
  EXPECT_EQ(Check(report, "gpu-count")["observed"], "0 (CUDA), 0 (NVML)");
  EXPECT_EQ(Check(report, "gpu-p2p")["status"], "Skip");
  EXPECT_EQ(Check(report, "gpu-ecc")["message"], "no GPUs on this node");
}

}  // namespace
}  // namespace ncclguard::test
