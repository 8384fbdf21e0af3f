#include <algorithm>
#include <optional>

#include "controllers/diagnoses/log_lines.h"
#include "controllers/diagnosis.h"

namespace ncclguard::controllers::diagnoses {
namespace {

constexpr std::string_view kEfaPeerUnreachable = "efa-peer-unreachable";

// What libfabric's EFA provider and aws-ofi-nccl print when a peer's EFA device does not answer:
// the provider's error strings (efa_errno.h: 4126 UNESTABLISHED_RECV_UNRESP, 4124
// ESTABLISHED_RECV_UNRESP, and the device's UNREACH_REMOTE / UNRESP_REMOTE completions) quoted in
// the plugin's "NET/OFI Request ... completed with error" line, and the plugin's own failure to
// add a peer to its address vector. EFA is not IP: a security group that lets the TCP bootstrap
// through without a rule naming itself drops every EFA packet (guide section 2).
class EfaPeerUnreachable final : public Diagnosis {
 public:
  EfaPeerUnreachable()
      : Diagnosis({kEfaPeerUnreachable, "security-group", 25,
                   "aws-ofi-nccl or libfabric says an EFA peer did not answer: \"Unresponsive "
                   "receiver (reachable by EFA device but handshake failed)\" (EFA error 4126), "
                   "\"Unreachable remote\" or \"Unresponsive remote\", \"Unable to insert remote "
                   "address into address vector\"; or a peer that had answered stopped (4124). "
                   "Also a rank that hung right after connecting over EFA: its last NCCL lines set "
                   "up channels \"via NET/Libfabric\" and nothing followed (no \"Connected all "
                   "rings\", no error, no output) until PyTorch's watchdog timed the collective "
                   "out.",
                   "Allow all traffic to and from the EFA security group itself, inbound and "
                   "outbound (EFA is not IP: a 0.0.0.0/0 or port rule does not carry it), and "
                   "check with ncclguard peer --fabric efa or fi_pingpong -p efa between two "
                   "nodes; after 4124 read the peer's own log first, its process or node may "
                   "have died."}) {}

  std::vector<std::string> Find(const DiagnosisContext&) const override { return {}; }
};

NCCLGUARD_REGISTER(EfaPeerUnreachable);

// Two readings of each log. Lines that say a peer did not answer (above). And a hang with no such
// line: libfabric gives up on an unanswered handshake only after minutes, often after PyTorch's
// watchdog (10 minutes by default) has timed the collective out, so what such a rank prints is
// its channels' setup over aws-ofi-nccl ("Channel 00/0 : 0[0] -> 8[0] [send] via
// NET/Libfabric/0/GDRDMA"), then nothing, then "Watchdog caught collective operation timeout".
// NCCL prints the setup before it connects a channel (at init up to 2.21, at the first collective
// that needs it from 2.22) and "Connected all rings" / "Init COMPLETE" once the connections went
// through; aws-ofi-nccl logs no completions (its per-request traces go to LTTng and NVTX). So the
// hang is read conservatively: after the last channel line over the plugin, no line that says
// the connections completed, no NCCL WARN (another cause, its own diagnosis), no output of the
// program (it progressed), up to the watchdog's timeout; and not on a libfabric provider other
// than efa (the tcp provider hangs on a host firewall, section 16, and is efa-tcp-fallback).
class EfaPeerUnreachableLog final : public LogMatcher {
 public:
  static constexpr std::string_view kDiagnosis = kEfaPeerUnreachable;

  void Feed(const LogLine& line) override {
    if (Unanswered(line.text)) unanswered_.Add(line);
    if (line.source >= hangs_.size()) hangs_.resize(line.source + 1);
    HangReading& hang = hangs_[line.source];
    if (IsPluginChannel(line.text)) {
      hang.channel = LogEvidence{line.source, line.number, RedactLine(line.text)};
      hang.quiet = true;
    } else if (hang.channel && hang.quiet) {
      if (LogContains(line.text, "Watchdog caught collective operation timeout")) {
        if (!hang.found) {
          hang.found = true;
          hang.evidence = {*hang.channel, {line.source, line.number, RedactLine(line.text)}};
        }
        hang.quiet = false;  // one timeout a setup: the watchdog prints one a collective
      } else if (!Quiet(line.text)) {
        hang.quiet = false;
      }
    }
  }

  std::vector<LogFinding> Finish(const LogScanView& scan) const override {
    std::vector<LogFinding> findings = unanswered_.Findings(
        kDiagnosis, scan,
        "an EFA peer did not answer (libfabric: unresponsive receiver or unreachable remote; a "
        "security group without its self-referencing rule)");
    for (std::size_t s = 0; s < hangs_.size(); ++s) {
      if (!hangs_[s].found) continue;
      if (std::any_of(findings.begin(), findings.end(),
                      [&](const LogFinding& f) { return f.source == s; })) {
        continue;  // the peer's silence is named already
      }
      if (scan.Sources()[s].efa_requested == false) continue;
      const TransportVerdict& transport = scan.Transport(s);
      if (transport.kind == NcclTransportKind::Socket) continue;
      if (!transport.provider.empty() && transport.provider != "efa") continue;
      findings.push_back(
          {kDiagnosis, s,
           scan.Sources()[s].name +
               ": hung right after connecting over EFA (its last NCCL lines set up channels via "
               "NET/Libfabric, then nothing was received until the watchdog's timeout); a security "
               "group without its self-referencing rule is the usual cause",
           hangs_[s].evidence});
    }
    std::stable_sort(findings.begin(), findings.end(),
                     [](const LogFinding& a, const LogFinding& b) { return a.source < b.source; });
    return findings;
  }

 private:
  struct HangReading {
    std::optional<LogEvidence> channel;  // the last channel line over the plugin
    bool quiet = false;                  // nothing since it but setup lines
    bool found = false;
    std::vector<LogEvidence> evidence;  // that channel line and the watchdog's
  };

  static bool Unanswered(std::string_view text) {
    return LogContains(text, "Unresponsive receiver") || LogContains(text, "Error: 4126") ||
           LogContains(text, "Error: 4124") || LogContains(text, "Unreachable remote") ||
           LogContains(text, "Unresponsive remote") ||
           LogContains(text, "insert remote address into address vector");
  }

  // "via NET/<network>/<dev>" with aws-ofi-nccl's network ("AWS Libfabric" up to 1.11,
  // "Libfabric" after, "OFI" when NCCL_NET says so).
  static bool IsPluginChannel(std::string_view text) {
    return LogContains(text, " via NET/Libfabric/") ||
           LogContains(text, " via NET/AWS Libfabric/") || LogContains(text, " via NET/OFI/");
  }

  // A line that leaves the rank where it was: more of NCCL's setup, PyTorch's distributed
  // logging, libfabric's, a blank line. Not: NCCL saying the connections completed, an NCCL
  // warning, or anything the program printed.
  static bool Quiet(std::string_view text) {
    if (text.find_first_not_of(" \t") == std::string_view::npos) return true;
    if (!NcclProcess(text).empty()) {
      return !LogContains(text, " NCCL WARN ") && !LogContains(text, "Connected all ") &&
             !LogContains(text, "Connected NVLS") && !LogContains(text, "Connected binomial") &&
             !LogContains(text, "Connected collnet") && !LogContains(text, "Init COMPLETE");
    }
    return LogContains(text, "ProcessGroupNCCL") || LogContains(text, "[c10d]") ||
           text.starts_with("libfabric:");
  }

  MatchedLines unanswered_;
  std::vector<HangReading> hangs_;  // by source
};

NCCLGUARD_REGISTER(EfaPeerUnreachableLog);

}  // namespace
}  // namespace ncclguard::controllers::diagnoses
