// Malformed host files get a reason, never a crash: the parsers behind removeipc, memlock-limit
// and pci-acs.
#include <gtest/gtest.h>

#include <string>

#include "probes/host_parsers.h"

namespace ncclguard::test {
namespace {

using probes::ParseRemoveIpc;

TEST(LogindConfig, ReadsRemoveIpcInTheLoginSectionOnly) {
  EXPECT_EQ(ParseRemoveIpc("[Login]\nRemoveIPC=no\n").value, false);
  EXPECT_EQ(ParseRemoveIpc("[Login]\n  RemoveIPC = yes  \n").value, true);
  EXPECT_EQ(ParseRemoveIpc("[Login]\n#RemoveIPC=no\n").value, std::nullopt);
  EXPECT_EQ(ParseRemoveIpc("[Login]\nRemoveIPC=no\nRemoveIPC=on\n").value, true);  // last wins
  const auto outside = ParseRemoveIpc("RemoveIPC=no\n[Login]\n");
  EXPECT_EQ(outside.value, std::nullopt);
  ASSERT_EQ(outside.problems.size(), 1u);
  EXPECT_NE(outside.problems[0].find("outside the [Login] section"), std::string::npos);
}

TEST(LogindConfig, GarbageIsReportedAndIgnoredLikeLogindDoes) {
  using namespace std::string_literals;
  const auto setting = ParseRemoveIpc("\0\x01\xff junk\n[Login]\nRemoveIPC\nRemoveIPC=maybe\n=\n"s);
  EXPECT_EQ(setting.value, std::nullopt);
  ASSERT_EQ(setting.problems.size(), 1u);
  EXPECT_NE(setting.problems[0].find("RemoveIPC='maybe' is not a boolean"), std::string::npos);
  EXPECT_EQ(ParseRemoveIpc("").value, std::nullopt);
}

TEST(LogindConfig, SystemdBooleanSpellings) {
  for (const char* yes : {"1", "yes", "TRUE", "on", "y", "t"})
    EXPECT_EQ(probes::ParseSystemdBoolean(yes), true) << yes;
  for (const char* no : {"0", "No", "false", "off", "n", "f"})
    EXPECT_EQ(probes::ParseSystemdBoolean(no), false) << no;
  EXPECT_EQ(probes::ParseSystemdBoolean("2"), std::nullopt);
  EXPECT_EQ(probes::ParseSystemdBoolean(""), std::nullopt);
}

TEST(MemlockLimit, ReadsSoftAndHardFromProcLimits) {
  const auto limit = probes::ParseMemlockLimit(
      "Limit                     Soft Limit           Hard Limit           Units\n"
      "Max locked memory         8388608              unlimited            bytes\n");
  EXPECT_EQ(limit.soft, 8388608u);
  EXPECT_EQ(limit.hard, std::nullopt);
}

TEST(MemlockLimit, MalformedFilesThrowWithTheReason) {
  EXPECT_THROW(probes::ParseMemlockLimit(""), std::runtime_error);
  EXPECT_THROW(probes::ParseMemlockLimit("Max locked memory lots\n"), std::runtime_error);
  try {
    probes::ParseMemlockLimit("Max locked memory  12x  unlimited bytes\n");
    FAIL();
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("'12x' is not a number"), std::string::npos);
  }
}

std::string ConfigWithAcs(std::uint16_t control) {
  std::string config(4096, '\0');
  // AER at 0x100 pointing to ACS at 0x148.
  const std::uint32_t aer = 0x0001 | 1u << 16 | 0x148u << 20;
  const std::uint32_t acs = 0x000d | 1u << 16;
  for (int i = 0; i < 4; ++i) {
    config[0x100 + i] = static_cast<char>(aer >> (8 * i));
    config[0x148 + i] = static_cast<char>(acs >> (8 * i));
  }
  config[0x14e] = static_cast<char>(control & 0xff);
  config[0x14f] = static_cast<char>(control >> 8);
  return config;
}

TEST(PciAcs, FindsTheAcsControlRegister) {
  const auto acs = probes::ParseAcs(ConfigWithAcs(0x001d));
  EXPECT_TRUE(acs.error.empty()) << acs.error;
  EXPECT_TRUE(acs.present);
  EXPECT_EQ(acs.control, 0x001d);
  EXPECT_NE(acs.control & probes::kAcsRedirectBits, 0);
  EXPECT_EQ(probes::DescribeAcsControl(0x001d),
            "SrcValid+ TransBlk- ReqRedir+ CmpltRedir+ UpstreamFwd+ EgressCtrl- DirectTrans-");
  EXPECT_EQ(probes::ParseAcs(ConfigWithAcs(0x0011)).control & probes::kAcsRedirectBits, 0);
}

TEST(PciAcs, NoExtendedCapabilitiesMeansNoAcs) {
  const auto acs = probes::ParseAcs(std::string(4096, '\0'));
  EXPECT_FALSE(acs.present);
  EXPECT_TRUE(acs.error.empty());
}

TEST(PciAcs, TruncatedAndLoopingConfigSpacesAreErrors) {
  EXPECT_NE(probes::ParseAcs(std::string(64, '\0')).error.find("config space has 64 bytes"),
            std::string::npos);
  std::string looping(4096, '\0');
  const std::uint32_t self = 0x0001 | 1u << 16 | 0x100u << 20;  // points at itself
  for (int i = 0; i < 4; ++i) looping[0x100 + i] = static_cast<char>(self >> (8 * i));
  EXPECT_EQ(probes::ParseAcs(looping).error, "extended capability list loops");
  std::string past = ConfigWithAcs(0).substr(0, 0x14a);  // ends inside the ACS header
  EXPECT_NE(probes::ParseAcs(past).error.find("runs past the config space"), std::string::npos);
}

TEST(FormatBytes, UsesBinaryUnits) {
  EXPECT_EQ(probes::FormatBytes(512), "512 B");
  EXPECT_EQ(probes::FormatBytes(8u << 20), "8.0 MiB");
  EXPECT_EQ(probes::FormatBytes(24ull << 30), "24.0 GiB");
}

}  // namespace
}  // namespace ncclguard::test
