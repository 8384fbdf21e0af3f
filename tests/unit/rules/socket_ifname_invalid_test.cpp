#include <gtest/gtest.h>

#include "tests/unit/rules/rule_test_util.h"

namespace ncclguard::test {
namespace {

constexpr const char* kSocketIfnameInvalidRule = "socket-ifname-invalid";
// Where the compliant pod sets NCCL_SOCKET_IFNAME (SetEnv keeps an entry where it is).
std::string IfnamePath() { return EnvPointer(CompliantPod(), "NCCL_SOCKET_IFNAME"); }

core::Evaluation CheckIfname(const std::string& value, bool host_network = false) {
  core::Json pod = CompliantPod();
  SetEnv(ContainerOf(pod), "NCCL_SOCKET_IFNAME", value);
  if (host_network) pod["spec"]["hostNetwork"] = true;
  return Check(pod);
}

// The one finding of the rule, or an empty finding after a test failure.
core::Finding DeniedFinding(const std::string& value, bool host_network = false) {
  const core::Evaluation result = CheckIfname(value, host_network);
  const auto findings = FindingsOf(result, kSocketIfnameInvalidRule);
  EXPECT_EQ(findings.size(), 1u) << "NCCL_SOCKET_IFNAME=\"" << value << "\"\n" << Dump(result);
  return findings.empty() ? core::Finding{} : findings.front();
}

TEST(SocketIfnameInvalid, DeniesAHostInterfaceNameThePodDoesNotHave) {
  const core::Finding f = DeniedFinding("ens5");
  EXPECT_EQ(f.level, core::Level::Deny);
  EXPECT_EQ(f.path, IfnamePath());
  EXPECT_TRUE(Mentions(
      f.message, "container \"pytorch\": NCCL_SOCKET_IFNAME=\"ens5\" leaves no usable interface"));
  EXPECT_TRUE(Mentions(f.message, "Use ^lo,docker,efa,veth or eth0."));
  EXPECT_TRUE(LinksTo(f, "socket-ifname"));
}

TEST(SocketIfnameInvalid, DeniesAnEmptyValue) {
  const core::Finding f = DeniedFinding("");
  EXPECT_EQ(f.path, IfnamePath());
  EXPECT_TRUE(Mentions(f.message, "NCCL_SOCKET_IFNAME=\"\" is empty"));
  EXPECT_TRUE(Mentions(f.message, "e.g. ^lo,docker,efa,veth"));
}

TEST(SocketIfnameInvalid, DeniesAnEmptyEntry) {
  EXPECT_TRUE(Mentions(DeniedFinding("^lo,,eth").message, "has an empty entry"));
}

TEST(SocketIfnameInvalid, DeniesAnInvalidCharacter) {
  EXPECT_TRUE(Mentions(DeniedFinding("eth*").message, "has an invalid character in \"eth*\""));
}

TEST(SocketIfnameInvalid, DeniesExcludingEveryEthInterface) {
  EXPECT_TRUE(Mentions(DeniedFinding("^eth").message, "leaves no usable interface"));
}

TEST(SocketIfnameInvalid, DeniesLoopbackOnly) { DeniedFinding("lo"); }

TEST(SocketIfnameInvalid, DeniesAnExactNameThatIsOnlyAPrefix) { DeniedFinding("=eth"); }

TEST(SocketIfnameInvalid, AcceptsValuesThatSelectEth0) {
  for (const char* value : {"eth0", "eth", "=eth0", "^lo,docker,efa,veth", "^lo", "lo,eth0"}) {
    const core::Evaluation result = CheckIfname(value);
    EXPECT_TRUE(FindingsOf(result, kSocketIfnameInvalidRule).empty()) << value << "\n"
                                                                      << Dump(result);
  }
}

TEST(SocketIfnameInvalid, AllowsHostInterfaceNamesWithHostNetwork) {
  const core::Evaluation result = CheckIfname("ens5", /*host_network=*/true);
  EXPECT_TRUE(FindingsOf(result, kSocketIfnameInvalidRule).empty()) << Dump(result);
}

TEST(SocketIfnameInvalid, StillDeniesAMalformedValueWithHostNetwork) {
  EXPECT_TRUE(Mentions(DeniedFinding("", /*host_network=*/true).message, "is empty"));
}

TEST(SocketIfnameInvalid, IgnoresAValueFromASecretOrConfigMap) {
  core::Json pod = CompliantPod();
  pod.at(core::JsonPointer(IfnamePath())) = Yaml(
      "var: {name: NCCL_SOCKET_IFNAME, valueFrom: {configMapKeyRef: {name: nccl, key: ifname}}}")
      ["var"];
  EXPECT_TRUE(FindingsOf(Check(pod), kSocketIfnameInvalidRule).empty());
}

// NCCL (findInterfaces) reads one '=' at the start of the list, after an optional '^', and
// applies it to every entry; an '=' further on is part of a literal prefix.
TEST(SocketIfnameInvalid, ReadsTheExactMarkOnceForTheWholeListAsNcclDoes) {
  // "=eth0x,eth": NCCL matches "eth" exactly as well, so eth0 is not selected.
  EXPECT_EQ(FindingsOf(CheckIfname("=eth0x,eth"), kSocketIfnameInvalidRule).size(), 1u);
  // "lo,=eth0": NCCL reads "=eth0" as a prefix no interface has, so only lo is left.
  EXPECT_EQ(FindingsOf(CheckIfname("lo,=eth0"), kSocketIfnameInvalidRule).size(), 1u);
}

TEST(SocketIfnameInvalid, DoesNotFireOnACompliantPod) {
  EXPECT_TRUE(FindingsOf(Check(CompliantPod()), kSocketIfnameInvalidRule).empty());
}

}  // namespace
}  // namespace ncclguard::test
