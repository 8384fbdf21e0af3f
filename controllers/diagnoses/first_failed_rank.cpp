#include <optional>
#include <set>

#include "controllers/diagnosis.h"
#include "controllers/log_scan.h"

namespace ncclguard::controllers::diagnoses {
namespace {

constexpr std::string_view kFirstFailedRank = "first-failed-rank";
constexpr std::size_t kMaxPeers = 3;
constexpr int kRootCauseLines = 10;  // torchrun's "Root Cause" block is ~8 lines

class FirstFailedRank final : public Diagnosis {
 public:
  FirstFailedRank()
      : Diagnosis(
            {kFirstFailedRank, "nccl-timeout", 38,
             "Ranks stopped with \"remote process exited or there was a network error\" or "
             "\"Connection closed by remote peer\": one rank's failure took the others down. "
             "Names the first to fail (torchrun's \"Root Cause (first observed failure)\", or "
             "the rank that failed on its own, or the peer that closed).",
             "Read the log of the rank that failed first, not of the ranks it took down: "
             "its own error (OOM, a crash, a Python exception, a sick node) is the cause."}) {}

  std::vector<std::string> Find(const DiagnosisContext&) const override { return {}; }
};

NCCLGUARD_REGISTER(FirstFailedRank);

// A rank that stopped because another one did.
bool RemoteFailure(std::string_view text) {
  return LogContains(text, "remote process exited or there was a network error") ||
         LogContains(text, "Connection closed by remote peer") ||
         LogContains(text, "ncclRemoteError") || LogContains(text, "Connection reset by peer");
}

bool Timeout(std::string_view text) {
  return LogContains(text, "Watchdog caught collective operation timeout");
}

// "ValueError: ...", "[rank3]: AssertionError: ..." (a Python exception's last line).
bool PythonException(std::string_view text) {
  std::size_t at = text.find("Error: ");
  if (at == std::string_view::npos) at = text.find("Exception: ");
  if (at == std::string_view::npos) return false;
  std::size_t begin = at;
  while (begin > 0 && (std::isalnum(static_cast<unsigned char>(text[begin - 1])) != 0 ||
                       text[begin - 1] == '.' || text[begin - 1] == '_')) {
    --begin;
  }
  if (begin == at) return false;  // just "Error: ", as in "Error: Cannot allocate memory"
  if (begin > 0 && text[begin - 1] != ' ' && text[begin - 1] != ':' && text[begin - 1] != ']') {
    return false;
  }
  const std::string_view name = text.substr(begin, at - begin);
  // The errors of ranks taken down by another one, or of the launcher.
  for (const std::string_view victim : {"DistBackendError", "DistNetworkError", "ChildFailedError",
                                        "DistStoreError", "SignalException"}) {
    if (LogContains(name, victim)) return false;
  }
  return !LogContains(text, "NCCL") && !LogContains(text, "remote process");
}

// A rank failing on its own.
bool OwnFailure(std::string_view text) {
  return LogContains(text, "CUDA out of memory") || LogContains(text, "OutOfMemoryError") ||
         LogContains(text, "illegal memory access") || LogContains(text, "Segmentation fault") ||
         LogContains(text, "SIGSEGV") || LogContains(text, "uncorrectable ECC") ||
         (LogContains(text, "Cuda failure") && !RemoteFailure(text)) || PythonException(text);
}

class FirstFailedRankLog final : public LogMatcher {
 public:
  static constexpr std::string_view kDiagnosis = kFirstFailedRank;
  void Feed(const LogLine& line) override {
    const std::string_view text = line.text;
    State& s = StateOf(line.source);
    if (s.root_cause_lines > 0) {
      --s.root_cause_lines;
      for (const std::string_view field : {"rank ", "host ", "exitcode "}) {
        const auto at = text.find(field);
        if (at != std::string_view::npos && text.find(':', at) != std::string_view::npos &&
            s.root_cause.size() < 4) {
          s.root_cause.push_back({line.source, line.number, RedactLine(text)});
        }
      }
    }
    if (LogContains(text, "Root Cause (first observed failure)")) {
      s.root_cause_lines = kRootCauseLines;
      if (s.root_cause.empty())
        s.root_cause.push_back({line.source, line.number, RedactLine(text)});
      return;
    }
    if (RemoteFailure(text)) {
      if (!s.remote) s.remote = LogEvidence{line.source, line.number, RedactLine(text)};
      if (const auto at = text.find("remote peer "); at != std::string_view::npos) {
        std::string_view peer = text.substr(at + 12);
        peer = peer.substr(0, peer.find_first_of("< \t"));
        if (!peer.empty() && peers_.size() < kMaxPeers) peers_.insert(LogValue(peer));
      }
      return;
    }
    if (Timeout(text)) {
      s.timed_out = true;
      return;
    }
    if (!s.own && !s.remote && !s.timed_out && OwnFailure(text)) {
      s.own = LogEvidence{line.source, line.number, RedactLine(text)};
    }
  }

  std::vector<LogFinding> Finish(const LogScanView& scan) const override {
    std::size_t victims = 0;
    const State* first_victim = nullptr;
    const State* root = nullptr;
    std::vector<const State*> own;
    for (const State& s : states_) {
      if (s.remote) {
        ++victims;
        if (first_victim == nullptr) first_victim = &s;
      }
      if (root == nullptr && s.root_cause.size() > 1) root = &s;
      if (s.own) own.push_back(&s);
    }
    if (victims == 0) return {};
    const auto name = [&](std::size_t source) { return scan.Sources()[source].name; };
    std::string message = std::to_string(victims) + (victims == 1 ? " log stops" : " logs stop") +
                          " on a peer that exited or closed its connection";
    LogFinding finding{kFirstFailedRank, first_victim->remote->source, "", {}};
    if (root != nullptr) {
      message +=
          "; torchrun's first observed failure, in " + name(root->root_cause[0].source) + ":";
      for (std::size_t i = 1; i < root->root_cause.size(); ++i) {
        message += " " + LogValue(Field(root->root_cause[i].text));
      }
      finding.source = root->root_cause[0].source;
      finding.evidence = root->root_cause;
    } else if (!own.empty()) {
      message += own.size() == 1 ? "; the first to fail: " : "; failed on their own: ";
      for (std::size_t i = 0; i < own.size() && i < 3; ++i) {
        const LogEvidence& e = *own[i]->own;
        const auto rank = RankOf(e.text);
        message += (i == 0 ? "" : ", ") + name(e.source) + ":" + std::to_string(e.line) +
                   (rank ? " (rank " + std::to_string(*rank) + ")" : "");
        finding.evidence.push_back(e);
      }
      if (own.size() > 3) message += " and " + std::to_string(own.size() - 3) + " more";
      finding.source = own.front()->own->source;
    } else if (!peers_.empty()) {
      message += "; the peers that closed:";
      for (const std::string& peer : peers_) message += " " + peer;
    }
    finding.evidence.push_back(*first_victim->remote);
    finding.message = std::move(message);
    return {std::move(finding)};
  }

 private:
  struct State {
    std::optional<LogEvidence> remote;  // first remote-failure line
    std::optional<LogEvidence> own;     // first own failure, before any remote one
    bool timed_out = false;
    std::vector<LogEvidence> root_cause;  // the "Root Cause" line, then rank/host/exitcode
    int root_cause_lines = 0;
  };

  // "rank      : 3 (local_rank: 3)" -> "rank 3 (local_rank: 3)".
  static std::string Field(std::string_view text) {
    while (!text.empty() && (text.front() == ' ' || text.front() == '\t')) text.remove_prefix(1);
    std::string out;
    bool space = false;
    bool separator = false;
    for (char c : text) {
      if (c == ' ') {
        space = true;
        continue;
      }
      if (c == ':' && !separator) {
        separator = true;
        space = true;
        continue;
      }
      if (space && !out.empty()) out += ' ';
      space = false;
      out += c;
    }
    return out;
  }

  State& StateOf(std::size_t source) {
    if (states_.size() <= source) states_.resize(source + 1);
    return states_[source];
  }

  std::vector<State> states_;
  std::set<std::string> peers_;
};

NCCLGUARD_REGISTER(FirstFailedRankLog);

}  // namespace
}  // namespace ncclguard::controllers::diagnoses
