// The log diagnoses (controllers/log_scan.h, controllers/diagnoses/): every matcher against the
// lines each NCCL generation (2.18-2.23, with and without aws-ofi-nccl) and PyTorch print, the
// near misses that must stay silent, redaction and bounded state.
#include <gtest/gtest.h>

#include <set>

#include "controllers/diagnosis.h"
#include "controllers/log_scan.h"
#include "core/catalog.h"
#include "tests/unit/test_support.h"

namespace ncclguard::test {
namespace {

using controllers::LineSplitter;
using controllers::LogFinding;
using controllers::LogScan;
using controllers::NcclTransportKind;

struct Log {
  std::string name;
  std::string text;
  std::optional<bool> efa_requested = std::nullopt;
};

struct Result {
  std::vector<LogFinding> findings;
  std::vector<controllers::TransportVerdict> transports;
  std::vector<LogFinding> Of(std::string_view id) const {
    std::vector<LogFinding> of;
    for (const LogFinding& f : findings)
      if (f.id == id) of.push_back(f);
    return of;
  }
  std::set<std::string> Ids() const {
    std::set<std::string> ids;
    for (const LogFinding& f : findings) ids.insert(std::string(f.id));
    return ids;
  }
};

Result Scan(const std::vector<Log>& logs) {
  LogScan scan;
  for (const Log& log : logs) {
    const std::size_t source = scan.AddSource({log.name, log.efa_requested});
    LineSplitter splitter;
    const auto feed = [&](std::string_view line) { scan.Feed(source, line); };
    splitter.Push(log.text, feed);
    splitter.Finish(feed);
  }
  Result result{scan.Finish(), {}};
  for (std::size_t s = 0; s < logs.size(); ++s) result.transports.push_back(scan.Transport(s));
  return result;
}

Result ScanOne(const std::string& text, std::optional<bool> efa_requested = std::nullopt) {
  return Scan({{"rank0.log", text, efa_requested}});
}

// Everything a scan says, for checks that something never appears in it.
std::string AllText(const Result& r) {
  std::string all;
  for (const LogFinding& f : r.findings) {
    all += f.message + "\n";
    for (const auto& e : f.evidence) all += e.text + "\n";
  }
  for (const auto& t : r.transports) {
    all += t.why + t.plugin_version + t.provider + "\n";
    for (const auto& e : t.evidence) all += e.text + "\n";
  }
  return all;
}

TEST(LogMatchers, EachFindsARegisteredDiagnosisWithAGuideSection) {
  ASSERT_GE(controllers::LogMatcherRegistry::All().size(), 6u);
  std::set<std::string> ids;
  for (const controllers::LogMatcherEntry* entry : controllers::LogMatcherRegistry::All()) {
    const core::CatalogEntry* catalog = core::Catalog::Find(entry->id);
    ASSERT_NE(catalog, nullptr) << entry->id;
    EXPECT_EQ(catalog->kind, core::FindingKind::Diagnosis) << entry->id;
    EXPECT_NE(controllers::DiagnosisRegistry::Find(entry->id), nullptr) << entry->id;
    EXPECT_TRUE(ids.insert(std::string(entry->id)).second) << entry->id << " registered twice";
  }
  for (const char* id : {"efa-tcp-fallback", "memory-registration-failed", "gpu-oom",
                         "nccl-watchdog-timeout", "nccl-version-mismatch", "first-failed-rank"}) {
    EXPECT_TRUE(ids.contains(id)) << id;
  }
}

// --- transport -----------------------------------------------------------------------------

TEST(LogTransport, EfaWithPluginUpTo1_11OnNccl2_18IsEfaAndSilent) {
  // The log mentions sockets: c10d's store, NCCL's bootstrap, NCCL_SOCKET_IFNAME.
  const Result r = ScanOne(LogFixture("efa-nccl2.18-ofi1.7.log"));
  EXPECT_EQ(r.transports[0].kind, NcclTransportKind::Efa);
  EXPECT_EQ(r.transports[0].plugin_version, "aws-ofi-nccl 1.7.4-aws");
  EXPECT_EQ(r.transports[0].provider, "efa");
  EXPECT_TRUE(r.findings.empty()) << r.findings.front().message;
}

TEST(LogTransport, EfaWithPlugin1_13OnNccl2_23IsEfa) {
  const Result r = ScanOne(LogFixture("efa-nccl2.23-ofi1.13.log"));
  EXPECT_EQ(r.transports[0].kind, NcclTransportKind::Efa);
  EXPECT_EQ(r.transports[0].plugin_version, "aws-ofi-nccl 1.13.2");
  EXPECT_EQ(r.transports[0].provider, "efa");
  EXPECT_TRUE(r.findings.empty());
}

TEST(LogTransport, PluginNamedOfiByNcclNetIsEfa) {
  const Result r = ScanOne("h:1:2 [0] NCCL INFO Using network OFI\n");
  EXPECT_EQ(r.transports[0].kind, NcclTransportKind::Efa);
}

TEST(LogTransport, ChannelLinesAloneDecide) {
  EXPECT_EQ(ScanOne("h:1:2 [0] NCCL INFO Channel 00/0 : 0[0] -> 8[0] [send] via NET/Libfabric/0/"
                    "GDRDMA\n")
                .transports[0]
                .kind,
            NcclTransportKind::Efa);
  const Result socket =
      ScanOne("h:1:2 [0] NCCL INFO Channel 01/0 : 0[0] -> 8[0] [send] via NET/Socket/1\n");
  EXPECT_EQ(socket.transports[0].kind, NcclTransportKind::Socket);
  EXPECT_EQ(socket.Ids(), std::set<std::string>{"efa-tcp-fallback"});
}

TEST(LogTransport, SocketFallbackOnNccl2_18AndOn2_23IsFound) {
  for (const char* file : {"socket-nccl2.18.log", "socket-nccl2.23.log"}) {
    const Result r = ScanOne(LogFixture(file));
    EXPECT_EQ(r.transports[0].kind, NcclTransportKind::Socket) << file;
    const auto found = r.Of("efa-tcp-fallback");
    ASSERT_EQ(found.size(), 1u) << file;
    EXPECT_NE(found[0].message.find("TCP socket"), std::string::npos) << found[0].message;
    ASSERT_FALSE(found[0].evidence.empty());
    EXPECT_NE(found[0].evidence[0].text.find("Using network Socket"), std::string::npos);
    // The "no plugin" line of each generation is evidence too.
    bool no_plugin = false;
    for (const auto& e : found[0].evidence)
      no_plugin |= e.text.find("NET/Plugin") != 0 && e.text.find("NET/Plugin") != std::string::npos;
    EXPECT_TRUE(no_plugin) << file;
  }
}

TEST(LogTransport, PluginOnTheLibfabricTcpProviderIsSocket) {
  const Result r = ScanOne(LogFixture("ofi-tcp-provider.log"));
  EXPECT_EQ(r.transports[0].kind, NcclTransportKind::Socket);
  EXPECT_EQ(r.transports[0].provider, "tcp");
  ASSERT_EQ(r.Of("efa-tcp-fallback").size(), 1u);
  EXPECT_NE(r.Of("efa-tcp-fallback")[0].message.find("provider tcp"), std::string::npos);
}

TEST(LogTransport, SocketsInAPodThatRequestedNoEfaAreNoFinding) {
  const Result r = ScanOne(LogFixture("socket-nccl2.18.log"), false);
  EXPECT_EQ(r.transports[0].kind, NcclTransportKind::Socket);
  EXPECT_TRUE(r.Of("efa-tcp-fallback").empty());
  EXPECT_EQ(ScanOne(LogFixture("socket-nccl2.18.log"), true).Of("efa-tcp-fallback").size(), 1u);
}

TEST(LogTransport, BootstrapAndSocketIfnameLinesAreNotFallback) {
  const Result r = ScanOne(
      "h:1:1 [0] NCCL INFO Bootstrap : Using eth0:10.0.0.1<0>\n"
      "h:1:1 [0] NCCL INFO NCCL_SOCKET_IFNAME set by environment to eth0\n"
      "[I socket.cpp:480] [c10d] The server socket has started to listen on [::]:29500.\n"
      "h:1:9 [0] NCCL INFO NET/OFI Selected Provider is efa (found 32 nics)\n"
      "h:1:9 [0] NCCL INFO Using network AWS Libfabric\n");
  EXPECT_EQ(r.transports[0].kind, NcclTransportKind::Efa);
  EXPECT_TRUE(r.findings.empty());
}

TEST(LogTransport, NoNcclLinesIsUnknownAndSilent) {
  const Result r = ScanOne("epoch 1 step 10 loss 3.2\nepoch 1 step 20 loss 3.1\n");
  EXPECT_EQ(r.transports[0].kind, NcclTransportKind::Unknown);
  EXPECT_TRUE(r.findings.empty());
  EXPECT_EQ(ScanOne("").transports[0].kind, NcclTransportKind::Unknown);
}

TEST(LogTransport, InfinibandIsNeitherEfaNorSocket) {
  const Result r = ScanOne("h:1:1 [0] NCCL INFO Using network IB\n");
  EXPECT_EQ(r.transports[0].kind, NcclTransportKind::Unknown);
  EXPECT_NE(r.transports[0].why.find("IB"), std::string::npos);
  EXPECT_TRUE(r.findings.empty());
}

TEST(LogTransport, OneCommunicatorOnSocketsMakesTheProcessSocket) {
  const Result r = ScanOne(
      "h:1:1 [0] NCCL INFO Using network AWS Libfabric\n"
      "h:1:1 [0] NCCL INFO Using network Socket\n");
  EXPECT_EQ(r.transports[0].kind, NcclTransportKind::Socket);
}

// Issue 23: a NUL (a log file truncated while it was written) or another control byte after a
// name ends the name: it neither hides the fallback nor reaches a message or evidence raw.
TEST(LogTransport, ControlBytesAfterANameNeitherHideItNorReachMessages) {
  using namespace std::string_literals;
  const auto expect_printable = [](const Result& r) {
    std::vector<std::string> texts;
    for (const LogFinding& f : r.findings) {
      texts.push_back(f.message);
      for (const auto& e : f.evidence) texts.push_back(e.text);
    }
    for (const auto& t : r.transports) {
      texts.insert(texts.end(), {t.why, t.plugin_version, t.provider});
      for (const auto& e : t.evidence) texts.push_back(e.text);
    }
    for (const std::string& text : texts) {
      for (const char c : text) {
        EXPECT_FALSE(static_cast<unsigned char>(c) < 0x20 || c == 0x7f)
            << ::testing::PrintToString(text);
      }
    }
  };
  const Result socket = ScanOne("h:1:1 [0] NCCL INFO Using network Socket\0\0garbage\x1b[2J\n"s);
  EXPECT_EQ(socket.transports[0].kind, NcclTransportKind::Socket) << socket.transports[0].why;
  EXPECT_EQ(socket.Ids(), std::set<std::string>{"efa-tcp-fallback"});
  expect_printable(socket);

  const Result efa = ScanOne(
      "h:1:1 [0] NCCL INFO NET/OFI Selected Provider is efa\0\x01(found 4 nics)\n"
      "h:1:1 [0] NCCL INFO Using network Libfabric\r\x7f\n"s);
  EXPECT_EQ(efa.transports[0].kind, NcclTransportKind::Efa) << efa.transports[0].why;
  EXPECT_EQ(efa.transports[0].provider, "efa");
  EXPECT_TRUE(efa.findings.empty());
  expect_printable(efa);

  const Result other = ScanOne("h:1:1 [0] NCCL INFO Using network IB\x1b]0;title\x07\n"s);
  EXPECT_EQ(other.transports[0].why, "NCCL uses network IB, neither EFA nor sockets");
  expect_printable(other);
}

// --- memlock -------------------------------------------------------------------------------

TEST(LogMemoryRegistration, PluginLibfabricAndVerbsFailuresAreFound) {
  for (const std::string line :
       {"h:1:2 [0] NCCL WARN NET/OFI Unable to register memory (type = 2) for device 3. RC: -12, "
        "Error: Cannot allocate memory",
        "h:1:2 [0] misc/ibvwrap.cc:190 NCCL WARN Call to ibv_reg_mr failed with error Cannot "
        "allocate memory",
        "libfabric:41:1700000000::efa:mr:efa_mr_reg_impl():901<warn> Unable to register MR: Cannot "
        "allocate memory"}) {
    const Result r = ScanOne("before\n" + line + "\nafter\n");
    const auto found = r.Of("memory-registration-failed");
    ASSERT_EQ(found.size(), 1u) << line;
    EXPECT_EQ(found[0].evidence[0].line, 2u);
  }
}

// The guide's section 17 line, and rdma-core's errno wording (NCCL's ibvwrap and its verbs
// wrappers print "failed with error %s errno %d").
TEST(LogMemoryRegistration, ABareErrnoTwelveIsMemlockToo) {
  for (const std::string line :
       {"h:1:2 [0] NCCL WARN Call to ibv_reg_mr failed, got error (12)",
        "h:1:2 [0] misc/ibvwrap.cc:215 NCCL WARN Call to ibv_reg_mr_iova2 failed with error "
        "Cannot allocate memory errno 12"}) {
    const auto found = ScanOne(line + "\n").Of("memory-registration-failed");
    ASSERT_EQ(found.size(), 1u) << line;
  }
  // Another errno is not ENOMEM.
  EXPECT_TRUE(ScanOne("h:1:2 [0] NCCL WARN Call to ibv_reg_mr failed with error Bad address "
                      "errno 120\n")
                  .Of("memory-registration-failed")
                  .empty());
}

TEST(LogMemoryRegistration, InvalidArgumentAndOtherEnomemAreNot) {
  const Result r = ScanOne(
      "h:1:2 [0] NCCL WARN NET/OFI Unable to register memory (type = 2) for device 0. RC: -22, "
      "Error: Invalid argument\n"
      "OSError: [Errno 12] Cannot allocate memory\n"
      "h:1:2 [0] NCCL INFO NET/OFI Registering memory with the domain\n");
  EXPECT_TRUE(r.Of("memory-registration-failed").empty());
}

// --- an EFA peer that does not answer (security group) --------------------------------------

// Lines as aws-ofi-nccl prints them (its "Request %p completed with error. RC: %d. Error: %d (%s)"
// with libfabric's EFA error strings from efa_errno.h, and its fi_av_insert failures in the
// sendrecv and rdma protocols and the connection manager); addresses and ids made up.
TEST(LogEfaPeerUnreachable, TheProvidersAndThePluginsWordingsAreFound) {
  for (const std::string line :
       {"node-0:194:713 [0] NCCL WARN NET/OFI Request 0x7f456c224810 completed with error. RC: "
        "103. Error: 4126 (Unresponsive receiver (reachable by EFA device but handshake failed) My "
        "EFA addr: fi_addr_efa://[fe80::1]:0:142160333 My host id: i-0123456789abcdef0 Peer EFA "
        "addr: fi_addr_efa://[fe80::2]:0:1879318055 Peer host id: N/A)",
        "node-0:194:713 [0] NCCL WARN NET/OFI Request 0x7f456c224810 completed with error. RC: "
        "103. Error: 4124 (Unresponsive receiver (connection previously established))",
        "node-0:194:713 [0] NCCL WARN NET/OFI Request 0x7f2b completed with error. RC: 113. "
        "Error: 15 (Unreachable remote (never received a response))",
        "node-0:194:713 [0] NCCL WARN NET/OFI Unable to insert remote address into address "
        "vector for device 0. RC: Invalid argument",
        "node-0:194:713 [0] NCCL WARN NET/OFI CM: Unable to insert remote address into address "
        "vector for device."}) {
    const Result r = ScanOne("before\n" + line + "\nafter\n");
    const auto found = r.Of("efa-peer-unreachable");
    ASSERT_EQ(found.size(), 1u) << line;
    EXPECT_EQ(found[0].evidence[0].line, 2u);
    EXPECT_NE(found[0].message.find("self-referencing rule"), std::string::npos);
  }
  const core::CatalogEntry* entry = core::Catalog::Find("efa-peer-unreachable");
  ASSERT_NE(entry, nullptr);
  EXPECT_EQ(entry->slug, "security-group");
}

TEST(LogEfaPeerUnreachable, ConnectionSetupAndOtherRequestErrorsAreNot) {
  const Result r = ScanOne(
      "node-0:194:712 [0] NCCL INFO Channel 00/0 : 3[0] -> 0[0] [receive] via "
      "NET/Libfabric/0/GDRDMA\n"
      "node-0:194:713 [0] NCCL INFO NET/OFI Inserting remote address into address vector\n"
      "node-0:194:713 [0] NCCL WARN NET/OFI Request 0x7f2b completed with error. RC: 13. Error: "
      "13 (Remote error)\n");
  EXPECT_TRUE(r.Of("efa-peer-unreachable").empty());
}

// A rank that hung right after connecting over EFA, with no error line: NCCL 2.23 with
// aws-ofi-nccl 1.13 connects its channels at the first collective, prints their setup, then
// nothing until PyTorch's watchdog times the collective out (tests/fixtures/logs).
TEST(LogEfaPeerUnreachable, AHangRightAfterTheChannelSetupOverEfaIsFound) {
  const Result r = ScanOne(LogFixture("efa-hang-after-connect.log"));
  const auto found = r.Of("efa-peer-unreachable");
  ASSERT_EQ(found.size(), 1u) << AllText(r);
  EXPECT_NE(found[0].message.find("hung right after connecting over EFA"), std::string::npos)
      << found[0].message;
  EXPECT_NE(found[0].message.find("self-referencing rule"), std::string::npos);
  ASSERT_EQ(found[0].evidence.size(), 2u);
  EXPECT_EQ(found[0].evidence[0].line, 20u) << "the last channel line over the plugin";
  EXPECT_NE(found[0].evidence[0].text.find("[send] via NET/Libfabric/0/GDRDMA"), std::string::npos);
  EXPECT_EQ(found[0].evidence[1].line, 21u) << "the watchdog's timeout";
  // The watchdog's own diagnosis is there too; the security group ranks before it.
  EXPECT_EQ(r.Ids(), (std::set<std::string>{"efa-peer-unreachable", "nccl-watchdog-timeout"}));
  EXPECT_EQ(r.findings.front().id, "efa-peer-unreachable");
}

TEST(LogEfaPeerUnreachable, AnUnansweredHandshakeIsNamedOnceNotAlsoAsAHang) {
  const std::string channel =
      "worker-1:52:120 [0] NCCL INFO Channel 00/0 : 8[0] -> 0[0] [send] via "
      "NET/AWS Libfabric/0/GDRDMA\n";
  const Result r = ScanOne(
      channel +
      "worker-1:52:131 [0] NCCL WARN NET/OFI Request 0x7f3a completed with error. RC: 103. Error: "
      "4126 (Unresponsive receiver (reachable by EFA device but handshake failed))\n"
      "[Rank 8] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=1, "
      "OpType=ALLREDUCE, NumelIn=1, NumelOut=1, Timeout(ms)=600000) ran for 600012 milliseconds "
      "before timing out.\n");
  const auto found = r.Of("efa-peer-unreachable");
  ASSERT_EQ(found.size(), 1u);
  EXPECT_EQ(found[0].evidence[0].line, 2u);
  EXPECT_EQ(found[0].message.find("hung right after"), std::string::npos) << found[0].message;
}

// What a healthy run and other causes print around the same lines: no hang over EFA.
TEST(LogEfaPeerUnreachable, ConnectionsThatCompletedOrOtherCausesAreNoHang) {
  const std::string setup =
      "worker-0:41:112 [0] NCCL INFO NET/OFI Selected Provider is efa (found 4 nics)\n"
      "worker-0:41:112 [0] NCCL INFO Channel 00/0 : 15[7] -> 0[0] [receive] via NET/AWS "
      "Libfabric/0/GDRDMA\n"
      "worker-0:41:112 [0] NCCL INFO Channel 00/0 : 0[0] -> 8[0] [send] via NET/AWS "
      "Libfabric/0/GDRDMA\n";
  const std::string timeout =
      "[rank0]:[E1207 16:40:02.000 ProcessGroupNCCL.cpp:616] [Rank 0] Watchdog caught collective "
      "operation timeout: WorkNCCL(SeqNum=88412, OpType=ALLREDUCE, NumelIn=1, NumelOut=1, "
      "Timeout(ms)=600000) ran for 600012 milliseconds before timing out.\n";
  const std::vector<std::pair<std::string, std::string>> logs = {
      {"the rings connected (NCCL 2.18), a straggler hours later",
       setup + "worker-0:41:112 [0] NCCL INFO Connected all rings\n" + timeout},
      {"init completed after the setup (connections made at init)",
       setup +
           "worker-0:41:112 [0] NCCL INFO comm 0x55d0c8 rank 0 nranks 16 cudaDev 0 busId "
           "101c0 commId 0x5f1c1a - Init COMPLETE\n" +
           timeout},
      {"the program ran after the setup (NCCL 2.23: no 'Connected all rings' at INFO)",
       setup + "step 100 loss 2.314 throughput 2210 samples/s\n" + timeout},
      {"another NCCL error after the setup (its own diagnosis)",
       setup +
           "worker-0:41:112 [0] NCCL WARN NET/OFI Unable to register memory (type = 1) for "
           "device 0. RC: -12, Error: Cannot allocate memory\n" +
           timeout},
      {"a timeout before any channel over the plugin", timeout + setup},
      {"the tcp provider (a host firewall, section 16; efa-tcp-fallback)",
       "worker-0:41:112 [0] NCCL INFO NET/OFI Selected Provider is tcp (found 1 nics)\n"
       "worker-0:41:112 [0] NCCL INFO Channel 00/0 : 0[0] -> 8[0] [send] via NET/AWS "
       "Libfabric/0\n" +
           timeout},
      {"NCCL's socket network",
       "h:1:2 [0] NCCL INFO Channel 01/0 : 0[0] -> 8[0] [send] via "
       "NET/Socket/1\n" +
           timeout},
  };
  for (const auto& [why, text] : logs) {
    const Result r = ScanOne(text);
    EXPECT_TRUE(r.Of("efa-peer-unreachable").empty()) << why << "\n" << AllText(r);
    EXPECT_EQ(r.Of("nccl-watchdog-timeout").size(), 1u) << why;
  }
  // A pod that requested no EFA devices.
  EXPECT_TRUE(
      ScanOne(LogFixture("efa-hang-after-connect.log"), false).Of("efa-peer-unreachable").empty());
  // Healthy EFA logs of both generations have no finding at all.
  for (const char* file : {"efa-nccl2.18-ofi1.7.log", "efa-nccl2.23-ofi1.13.log"}) {
    EXPECT_TRUE(ScanOne(LogFixture(file)).findings.empty()) << file;
  }
}

// --- CUDA OOM ------------------------------------------------------------------------------

TEST(LogGpuOom, PyTorchAndNcclWordingsAreFound) {
  for (const std::string line :
       {"torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB.",
        "RuntimeError: CUDA out of memory. Tried to allocate 20.00 MiB (GPU 0; 79.11 GiB total)",
        "torch.cuda.OutOfMemoryError: CUDA out of memory.",
        "RuntimeError: CUDA error: out of memory", "cudaErrorMemoryAllocation: out of memory",
        "h:1:2 [0] enqueue.cc:100 NCCL WARN Cuda failure 'out of memory'",
        "h:1:2 [0] include/alloc.h:125 NCCL WARN Cuda failure 2 'out of memory'"}) {
    EXPECT_EQ(ScanOne(line + "\n").Of("gpu-oom").size(), 1u) << line;
  }
}

TEST(LogGpuOom, MemoryTalkThatIsNotAnOomIsSilent) {
  const Result r = ScanOne(
      "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True to avoid memory fragmentation\n"
      "max memory allocated: 61.2 GiB, reserved 70.1 GiB\n"
      "h:1:2 [0] NCCL INFO NVLS multicast support is available, memory granularity 2MiB\n");
  EXPECT_TRUE(r.findings.empty());
}

// --- watchdog ------------------------------------------------------------------------------

TEST(LogWatchdog, TimeoutsOfEachPyTorchGenerationAreFound) {
  for (const std::string line :
       {"[E ProcessGroupNCCL.cpp:475] [Rank 3] Watchdog caught collective operation timeout: "
        "WorkNCCL(SeqNum=41, OpType=ALLREDUCE, NumelIn=1, NumelOut=1, Timeout(ms)=600000) ran for "
        "600054 milliseconds before timing out.",
        "[rank3]:[E1002 12:00:01.000 ProcessGroupNCCL.cpp:607] [Rank 3] Watchdog caught collective "
        "operation timeout: WorkNCCL(SeqNum=41, OpType=ALLREDUCE) ran for 600054 milliseconds",
        "[PG ID 0 PG GUID 0(default_pg) Rank 3] ProcessGroupNCCL's watchdog got stuck for 480 "
        "seconds without making progress in monitoring enqueued collectives."}) {
    EXPECT_EQ(ScanOne(line + "\n").Of("nccl-watchdog-timeout").size(), 1u) << line;
  }
  EXPECT_TRUE(
      ScanOne("TORCH_NCCL_ENABLE_MONITORING=1 watchdog heartbeat 480 s\n").findings.empty());
}

// --- NCCL versions -------------------------------------------------------------------------

TEST(LogNcclVersion, DifferentVersionsAcrossRanksAreFound) {
  const Result r = Scan({{"rank0.log", LogFixture("efa-nccl2.18-ofi1.7.log")},
                         {"rank1.log", LogFixture("rank1-nccl2.20.log")}});
  const auto found = r.Of("nccl-version-mismatch");
  ASSERT_EQ(found.size(), 1u);
  EXPECT_NE(found[0].message.find("2.18.5 in rank0.log"), std::string::npos) << found[0].message;
  EXPECT_NE(found[0].message.find("2.20.5 in rank1.log"), std::string::npos) << found[0].message;
  EXPECT_EQ(found[0].evidence.size(), 2u);
}

TEST(LogNcclVersion, WithinOneSlurmLogTheProcessesAreNamed) {
  const Result r = ScanOne(
      "node-a:100:100 [0] NCCL INFO NCCL version 2.23.4+cuda12.6\n"
      "node-b:200:200 [0] NCCL INFO NCCL version 2.21.5+cuda12.4\n");
  const auto found = r.Of("nccl-version-mismatch");
  ASSERT_EQ(found.size(), 1u);
  EXPECT_NE(found[0].message.find("(node-b:200)"), std::string::npos) << found[0].message;
}

TEST(LogNcclVersion, NcclsOwnMismatchWarningIsFound) {
  const Result r = ScanOne(
      "h:1:2 [0] init.cc:775 NCCL WARN Mismatched NCCL version detected : rank 3 version 22304 "
      "rank 0 version 22005\n");
  EXPECT_EQ(r.Of("nccl-version-mismatch").size(), 1u);
}

TEST(LogNcclVersion, OneVersionEverywhereIsSilent) {
  const Result r = Scan({{"rank0.log", LogFixture("efa-nccl2.18-ofi1.7.log")},
                         {"rank1.log", LogFixture("rank0-peer-closed.log")},
                         {"rank2.log", "NCCL version 2.18.5+cuda12.2\n"}});
  EXPECT_TRUE(r.Of("nccl-version-mismatch").empty());
}

// --- the first rank to fail ----------------------------------------------------------------

TEST(LogFirstFailedRank, NamesTheRankThatFailedOnItsOwn) {
  const Result r = Scan({{"rank0.log", LogFixture("rank0-peer-closed.log")},
                         {"rank1.log", LogFixture("rank1-oom.log")}});
  const auto found = r.Of("first-failed-rank");
  ASSERT_EQ(found.size(), 1u);
  EXPECT_NE(found[0].message.find("the first to fail: rank1.log:5 (rank 1)"), std::string::npos)
      << found[0].message;
  EXPECT_EQ(found[0].source, 1u);
  // The OOM is also its own finding.
  EXPECT_EQ(r.Of("gpu-oom").size(), 1u);
}

TEST(LogFirstFailedRank, TorchrunsRootCauseWins) {
  const Result r = ScanOne(
      "[rank0]: torch.distributed.DistBackendError: NCCL error in: NCCLUtils.hpp:275, remote "
      "process exited or there was a network error, NCCL version 2.21.5\n"
      "torch.distributed.elastic.multiprocessing.errors.ChildFailedError:\n"
      "============================================================\n"
      "Root Cause (first observed failure):\n"
      "[0]:\n"
      "  time      : 2024-05-01_12:00:00\n"
      "  host      : worker-3\n"
      "  rank      : 27 (local_rank: 3)\n"
      "  exitcode  : -11 (pid: 4567)\n"
      "  error_file: <N/A>\n");
  const auto found = r.Of("first-failed-rank");
  ASSERT_EQ(found.size(), 1u);
  EXPECT_NE(found[0].message.find("rank 27 (local_rank: 3)"), std::string::npos)
      << found[0].message;
  EXPECT_NE(found[0].message.find("host worker-3"), std::string::npos) << found[0].message;
}

TEST(LogFirstFailedRank, WithoutTheFailedRanksLogThePeerIsNamed) {
  const Result r = ScanOne(LogFixture("rank0-peer-closed.log"));
  const auto found = r.Of("first-failed-rank");
  ASSERT_EQ(found.size(), 1u);
  EXPECT_NE(found[0].message.find("worker-1.trainer.default.svc.cluster.local"), std::string::npos);
}

TEST(LogFirstFailedRank, AnErrorAfterTheRemoteOneIsNotTheCause) {
  const Result r = Scan(
      {{"rank0.log",
        "h:1:2 [0] misc/socket.cc:50 NCCL WARN socketProgress: Connection closed by remote peer "
        "x<1>\nValueError: cleanup failed\n"}});
  const auto found = r.Of("first-failed-rank");
  ASSERT_EQ(found.size(), 1u);
  EXPECT_EQ(found[0].message.find("first to fail"), std::string::npos) << found[0].message;
}

TEST(LogFirstFailedRank, AFailureWithoutAChainIsNotOne) {
  EXPECT_TRUE(ScanOne(LogFixture("rank1-oom.log")).Of("first-failed-rank").empty());
}

// --- redaction, bounds, splitting ----------------------------------------------------------

TEST(LogRedaction, ASecretInANeighbouringLineNeverAppears) {
  const Result r = Scan({{"a.log", LogFixture("efa-nccl2.18-ofi1.7.log")},
                         {"b.log", LogFixture("socket-nccl2.18.log")},
                         {"c.log", LogFixture("memlock.log")}});
  EXPECT_FALSE(r.findings.empty());
  const std::string all = AllText(r);
  for (const char* secret :
       {"hf_AbCdEfGhIjKlMnOpQrStUvWxYz012345", "0123456789abcdef0123456789abcdef01234567",
        "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"}) {
    EXPECT_EQ(all.find(secret), std::string::npos) << secret;
  }
}

TEST(LogRedaction, SecretsInAMatchedLineAreRedacted) {
  EXPECT_EQ(controllers::RedactLine("CUDA out of memory HF_TOKEN=hf_abcdefghijklmnopqrstu x=1"),
            "CUDA out of memory HF_TOKEN=<redacted> x=1");
  EXPECT_EQ(controllers::RedactLine("Authorization: Bearer eyJhbGciOiJIUzI1NiJ9.abc"),
            "Authorization: <redacted>");
  EXPECT_EQ(controllers::RedactLine("curl -H 'x: Bearer abcdefghijklmnop' failed"),
            "curl -H 'x: Bearer <redacted>' failed");
  EXPECT_EQ(controllers::RedactLine("key AKIAABCDEFGHIJKLMNOP used"), "key <redacted> used");
  EXPECT_EQ(controllers::RedactLine("\"api_key\": \"s3cr3t\", \"rank\": 3"),
            "\"api_key\": \"<redacted>\", \"rank\": 3");
  EXPECT_EQ(controllers::RedactLine("NCCL INFO NET/OFI RC: -12, Error: Cannot allocate memory"),
            "NCCL INFO NET/OFI RC: -12, Error: Cannot allocate memory");
  const std::string huge(10000, 'x');
  EXPECT_LE(controllers::RedactLine(huge).size(), controllers::kMaxEvidenceBytes);
}

// Issue 23: what a message quotes of a log (a libfabric provider's name, "host:pid", the rest of a
// "Using network" line, a peer's address) is redacted as evidence is and cut, so that neither a
// secret nor 64 KiB of one line reaches an Event or a condition.
TEST(LogRedaction, ValuesQuotedInMessagesAreRedactedAndCut) {
  const std::string secret = "hf_AbCdEfGhIjKlMnOpQrStUvWx";
  const std::string word(60000, 'x');
  const Result r = Scan(
      {{"provider.log", "h:1:1 [0] NCCL INFO NET/OFI Selected Provider is tcp;HF_TOKEN=" + secret +
                            "\nh:1:1 [0] NCCL INFO Using network Libfabric\n"},
       {"network.log", "h:1:1 [0] NCCL INFO Using network IB password=" + secret + "\n"},
       {"host.log", secret + ":12:1 [0] NCCL INFO NCCL version 2.18.5+cuda12.2\n"},
       {"long-host.log", word + ":13:1 [0] NCCL INFO NCCL version 2.19.3+cuda12.2\n"},
       {"long-provider.log", "h:1:1 [0] NCCL INFO NET/OFI Selected Provider is " + word + "\n"},
       {"long-network.log", "h:1:1 [0] NCCL INFO Using network " + word + "\n"},
       {"peer.log", "h:1:1 [0] NCCL WARN Connection closed by remote peer " + secret + "<1>\n"}});
  EXPECT_EQ(AllText(r).find(secret), std::string::npos) << AllText(r);
  EXPECT_EQ(r.Ids(), (std::set<std::string>{"efa-tcp-fallback", "nccl-version-mismatch",
                                            "first-failed-rank"}));
  for (const LogFinding& f : r.findings) {
    EXPECT_LE(f.message.size(), 512u) << f.id << ": " << f.message;
    EXPECT_LE(controllers::LogFindingLine(f).size(), 1024u) << f.id;  // kube's cut of a note
  }
  for (const auto& t : r.transports) EXPECT_LE(t.why.size(), 256u) << t.why;
  EXPECT_NE(r.transports[5].why.find("xxx..."), std::string::npos) << r.transports[5].why;
}

TEST(LogRedaction, LogValueIsRedactedPrintableAndCut) {
  using namespace std::string_literals;
  EXPECT_EQ(controllers::LogValue("efa"), "efa");
  EXPECT_EQ(controllers::LogValue("tcp;api_key=s3cr3t"), "tcp;api_key=<redacted>");
  EXPECT_EQ(controllers::LogValue("a\0b\tc\x1b[2J\x7f"s), "a?b c?[2J?");
  const std::string cut = controllers::LogValue(std::string(1000, 'x'));
  EXPECT_EQ(cut.size(), controllers::kMaxLogValueBytes);
  EXPECT_TRUE(cut.ends_with("xx...")) << cut;
}

TEST(LogScanBounds, StateStaysBoundedWhateverTheLog) {
  LogScan scan;
  const std::size_t source = scan.AddSource({"big.log", std::nullopt});
  for (int i = 0; i < 100000; ++i) {
    scan.Feed(source, "torch.OutOfMemoryError: CUDA out of memory. step " + std::to_string(i));
    scan.Feed(source, "h:" + std::to_string(i) + ":1 [0] NCCL INFO NCCL version 2." +
                          std::to_string(i % 50) + ".1+cuda12.2");
  }
  const auto findings = scan.Finish();
  for (const LogFinding& f : findings) {
    EXPECT_LE(f.evidence.size(), 8u) << f.id;
    EXPECT_LE(f.message.size(), 2000u) << f.id;
  }
  EXPECT_EQ(scan.Lines(source), 200000u);
}

TEST(LineSplitterTest, SplitsAcrossChunksCutsLongLinesAndKeepsTheLastLine) {
  std::vector<std::string> lines;
  LineSplitter splitter;
  const auto collect = [&](std::string_view line) { lines.emplace_back(line); };
  splitter.Push("one\r\ntw", collect);
  splitter.Push("o\n", collect);
  splitter.Push(std::string(controllers::kMaxLogLineBytes + 10, 'x') + "\nthree", collect);
  splitter.Finish(collect);
  ASSERT_EQ(lines.size(), 4u);
  EXPECT_EQ(lines[0], "one");
  EXPECT_EQ(lines[1], "two");
  EXPECT_EQ(lines[2].size(), controllers::kMaxLogLineBytes);
  EXPECT_EQ(lines[3], "three");
}

TEST(LogDiagnoses, ACleanEfaRunSaysNothing) {
  const Result r = Scan({{"rank0.log", LogFixture("efa-nccl2.18-ofi1.7.log")},
                         {"rank1.log", LogFixture("efa-nccl2.23-ofi1.13.log")}});
  // 2.18.5 and 2.23.4 differ: only the version diagnosis speaks.
  EXPECT_EQ(r.Ids(), std::set<std::string>{"nccl-version-mismatch"});
  EXPECT_TRUE(ScanOne(LogFixture("efa-nccl2.23-ofi1.13.log")).findings.empty());
}

}  // namespace
}  // namespace ncclguard::test
