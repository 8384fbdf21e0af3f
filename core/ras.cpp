#include "core/ras.h"

#include <algorithm>
#include <array>
#include <charconv>
#include <limits>
#include <map>
#include <set>
#include <utility>

#include "core/json.h"
#include "core/json_reader.h"

namespace ncclguard::core {
namespace {

constexpr std::size_t kMaxRasJsonDepth = 16;     // NCCL's report nests 5 deep
constexpr std::size_t kMaxRasValueBytes = 64;    // an address, a GPU list, an error's name
constexpr std::size_t kMaxRasSummaryGroups = 4;  // count groups a summary names

bool StartsWith(std::string_view text, std::string_view prefix) {
  return text.substr(0, prefix.size()) == prefix;
}

std::string_view Trim(std::string_view text) {
  while (!text.empty() && (text.front() == ' ' || text.front() == '\t')) text.remove_prefix(1);
  while (!text.empty() && (text.back() == ' ' || text.back() == '\t' || text.back() == '\r')) {
    text.remove_suffix(1);
  }
  return text;
}

// A value quoted from a report: bounded, and printable ASCII only (it reaches conditions,
// Events and terminals).
std::string Value(std::string_view text) {
  std::string out(text.substr(0, kMaxRasValueBytes));
  for (char& c : out) {
    if (static_cast<unsigned char>(c) < 0x20 || static_cast<unsigned char>(c) >= 0x7f) c = '?';
  }
  return out;
}

// The integer at the front of `text` (after spaces), consumed; nullopt when there is none.
std::optional<std::int64_t> TakeInt(std::string_view& text) {
  text = Trim(text);
  std::int64_t value = 0;
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (error != std::errc() || end == text.data()) return std::nullopt;
  text.remove_prefix(static_cast<std::size_t>(end - text.data()));
  return value;
}

// Consumes `prefix` (after spaces) from the front of `text`.
bool Take(std::string_view& text, std::string_view prefix) {
  text = Trim(text);
  if (!StartsWith(text, prefix)) return false;
  text.remove_prefix(prefix.size());
  return true;
}

// The next space-separated word, consumed.
std::string_view TakeWord(std::string_view& text) {
  text = Trim(text);
  const std::size_t end = std::min(text.find(' '), text.size());
  const std::string_view word = text.substr(0, end);
  text.remove_prefix(end);
  return word;
}

// "GPU %s managed by process %d on node %s" (the tail of a rank line).
bool ParseManagedBy(std::string_view text, RasProcess& out) {
  if (!Take(text, "GPU ")) return false;
  const std::size_t managed = text.find(" managed by process ");
  if (managed == std::string_view::npos) return false;
  out.gpu = Value(Trim(text.substr(0, managed)));
  text.remove_prefix(managed + 20);
  const auto pid = TakeInt(text);
  if (!pid || !Take(text, "on node ")) return false;
  out.pid = *pid;
  out.node = Value(Trim(text));
  return true;
}

// "Rank %d[ <detail>] -- GPU %s managed by process %d on node %s", or "... -- [process
// information not found]". `detail` is what stands between the rank and " -- ".
std::optional<RasProcess> ParseRankLine(std::string_view text) {
  if (!Take(text, "Rank ")) return std::nullopt;
  const auto rank = TakeInt(text);
  if (!rank || *rank < 0 || *rank > std::numeric_limits<int>::max()) return std::nullopt;
  const std::size_t dash = text.find(" -- ");
  if (dash == std::string_view::npos) return std::nullopt;
  RasProcess p;
  p.rank = static_cast<int>(*rank);
  p.detail = Value(Trim(text.substr(0, dash)));
  const std::string_view tail = text.substr(dash + 4);
  if (!ParseManagedBy(tail, p) && Trim(tail) != "[process information not found]") {
    return std::nullopt;
  }
  return p;
}

// "Process %d on node %s managing GPU[s] %s".
std::optional<RasProcess> ParseProcessLine(std::string_view text) {
  if (!Take(text, "Process ")) return std::nullopt;
  const auto pid = TakeInt(text);
  if (!pid || !Take(text, "on node ")) return std::nullopt;
  const std::size_t managing = text.find(" managing GPU");
  if (managing == std::string_view::npos) return std::nullopt;
  RasProcess p;
  p.pid = *pid;
  p.node = Value(Trim(text.substr(0, managing)));
  text.remove_prefix(managing + 13);
  if (!text.empty() && text.front() == 's') text.remove_prefix(1);
  p.gpu = Value(Trim(text));
  return p;
}

// "#0-0 (27a079b828ff1a75) MISMATCH" -> the hash and the kind.
std::optional<std::pair<std::string, std::string_view>> ParseCommunicatorHeader(
    std::string_view text) {
  if (!StartsWith(text, "#")) return std::nullopt;
  const std::size_t open = text.find(" (");
  const std::size_t close = text.find(") ");
  if (open == std::string_view::npos || close == std::string_view::npos || close < open) {
    return std::nullopt;
  }
  return std::make_pair(Value(text.substr(open + 2, close - open - 2)),
                        Trim(text.substr(close + 2)));
}

void AddBounded(std::vector<RasProcess>& list, RasProcess p) {
  if (list.size() >= kMaxRasEntries) return;
  if (std::find(list.begin(), list.end(), p) != list.end()) return;
  list.push_back(std::move(p));
}

void SortGroups(RasMismatch& m) {
  std::sort(m.groups.begin(), m.groups.end(),
            [](const auto& a, const auto& b) { return a.second > b.second; });
}

}  // namespace

// The readers RasReader::State holds (not in the anonymous namespace: a member's type).
namespace ras_reading {

// One text report being read, section by section.
class TextReport {
 public:
  explicit TextReport(std::string version) { report_.nccl_version = std::move(version); }

  void Feed(std::string_view line) {
    const std::string_view text = Trim(line);
    const bool indented = !line.empty() && (line.front() == ' ' || line.front() == '\t');
    if (text.empty()) {
      EndMismatch();
      block_ = Block::None;
      in_groups_ = false;
      return;
    }
    if (expect_summary_) {
      expect_summary_ = false;
      Summary(text);
      return;
    }
    if (StartsWith(text, "(total)")) {
      expect_summary_ = true;
      summary_header_ = std::string(text);
      return;
    }
    if (StartsWith(text, "Group ") && text.find("Comms") != std::string_view::npos) {
      comms_seen_ = true;
      in_groups_ = true;
      report_.communicators = 0;
      return;
    }
    if (text == "No communicator data collected!") {
      comms_seen_ = true;
      no_comms_ = true;
      return;
    }
    if (in_groups_) {
      GroupRow(text);
      return;
    }
    if (!indented) {
      Header(text);
      return;
    }
    Body(text);
  }

  RasReport Finish(bool cut) {
    EndMismatch();
    // Every report ends with its communicators' table (or says it has none).
    report_.truncated = cut || !comms_seen_ || (!warnings_seen_ && !no_comms_);
    report_.dead_count =
        std::max<std::int64_t>(report_.dead_count, static_cast<std::int64_t>(report_.dead.size()));
    report_.unresponsive_count = std::max<std::int64_t>(
        report_.unresponsive_count, static_cast<std::int64_t>(report_.unresponsive.size()));
    // A dead process is also missing from its communicators: its rank lines there say which
    // ranks it ran (2.26 and later).
    for (RasProcess& dead : report_.dead) {
      if (dead.rank) continue;
      for (const RasProcess& missing : report_.unresponsive) {
        if (missing.rank && missing.pid == dead.pid && missing.node == dead.node) {
          dead.rank = missing.rank;
          dead.communicator = missing.communicator;
          break;
        }
      }
    }
    std::erase_if(report_.unresponsive, [&](const RasProcess& p) {
      return std::any_of(report_.dead.begin(), report_.dead.end(), [&](const RasProcess& d) {
        return d.pid == p.pid && d.node == p.node && !p.node.empty();
      });
    });
    return std::move(report_);
  }

 private:
  enum class Block {
    None,
    JobIncomplete,
    Dead,
    MissingProcesses,
    CommIncomplete,
    CommError,
    CommMismatch,
    Timeout
  };

  void Summary(std::string_view text) {
    std::vector<std::int64_t> numbers;
    while (auto n = TakeInt(text)) numbers.push_back(*n);
    if (numbers.size() == 5) {
      report_.nodes = numbers[0];
      report_.processes = numbers[3];
      report_.gpus = numbers[4];
    } else if (numbers.size() == 3 && summary_header_.find("per node") == std::string::npos) {
      report_.nodes = numbers[0];
      report_.processes = numbers[1];
      report_.gpus = numbers[2];
    }
  }

  // "%5d  %8d  %8d  %8s  %8d  %8d  %8s  %6s": the second number is the group's communicators.
  void GroupRow(std::string_view text) {
    if (StartsWith(text, "#")) return;  // the header's second line
    std::string_view rest = text;
    const auto group = TakeInt(rest);
    const auto comms = TakeInt(rest);
    if (group && comms && *comms >= 0)
      report_.communicators += std::min<std::int64_t>(*comms, 1 << 30);
  }

  void Header(std::string_view text) {
    EndMismatch();
    block_ = Block::None;
    if (text == "Warnings") warnings_seen_ = true;
    if (text == "INCOMPLETE") {
      block_ = Block::JobIncomplete;
    } else if (text == "DEAD") {
      block_ = Block::Dead;
    } else if (text == "TIMEOUT") {
      block_ = Block::Timeout;
    } else if (auto header = ParseCommunicatorHeader(text)) {
      communicator_ = header->first;
      const std::string_view kind = header->second;
      if (kind == "INCOMPLETE") block_ = Block::CommIncomplete;
      if (kind == "ERROR") block_ = Block::CommError;
      if (kind == "MISMATCH") block_ = Block::CommMismatch;
    } else if (StartsWith(text, "Warning: missing data from")) {
      block_ = Block::MissingProcesses;  // the RAS network's gathering (before 2.26: indented)
    }
  }

  void Body(std::string_view text) {
    if (StartsWith(text, "Warning: missing data from")) {
      block_ = Block::MissingProcesses;
      return;
    }
    switch (block_) {
      case Block::JobIncomplete:
      case Block::MissingProcesses:
        if (auto p = ParseProcessLine(text)) {
          AddBounded(report_.unresponsive, std::move(*p));
        } else if (std::string_view rest = text; Take(rest, "Missing communicator data from ")) {
          if (auto n = TakeInt(rest)) {
            report_.unresponsive_count = std::max(report_.unresponsive_count, *n);
          }
        }
        return;
      case Block::Dead:
        if (std::string_view rest = text; !StartsWith(text, "Process ")) {
          if (auto n = TakeInt(rest); n && rest.find("considered dead") != std::string_view::npos) {
            report_.dead_count = std::max(report_.dead_count, *n);
          }
        }
        if (auto p = ParseProcessLine(text)) {
          p->detail = "considered dead";
          AddBounded(report_.dead, std::move(*p));
        }
        return;
      case Block::CommIncomplete:
        CommIncomplete(text);
        return;
      case Block::CommError:
        CommError(text);
        return;
      case Block::CommMismatch:
        CommMismatch(text);
        return;
      case Block::Timeout: {
        std::string_view rest = text;
        if (Take(rest, "Encountered ")) {
          if (auto n = TakeInt(rest)) report_.timeouts = *n;
        }
        return;
      }
      case Block::None:
        return;
    }
  }

  void CommIncomplete(std::string_view text) {
    std::string_view rest = text;
    if (Take(rest, "Missing communicator data from ")) {
      if (auto n = TakeInt(rest)) {
        report_.unresponsive_count = std::max(report_.unresponsive_count, *n);
      }
      return;
    }
    if (Take(rest, "The missing rank")) {  // 2.24, 2.25: "The missing ranks: 3,5"
      rest.remove_prefix(std::min(rest.find(':') + 1, rest.size()));
      for (std::size_t n = 0; n < kMaxRasEntries; ++n) {
        const auto rank = TakeInt(rest);
        if (!rank || *rank < 0 || *rank > std::numeric_limits<int>::max()) break;
        RasProcess p;
        p.rank = static_cast<int>(*rank);
        p.communicator = communicator_;
        p.detail = "sent no data";
        AddBounded(report_.unresponsive, std::move(p));
        if (!Take(rest, ",")) break;
      }
      return;
    }
    if (auto p = ParseRankLine(text)) {
      p->communicator = communicator_;
      p->detail = "sent no data";
      AddBounded(report_.unresponsive, std::move(*p));
    }
  }

  void CommError(std::string_view text) {
    std::string_view rest = text;
    if (const auto count = TakeInt(rest); count && Take(rest, "ranks reported ")) {
      error_ = Value(Trim(rest));  // the error of the ranks listed after it
      return;
    }
    if (StartsWith(text, "Initialization error") || StartsWith(text, "Asynchronous error")) {
      error_.clear();
      return;
    }
    if (auto p = ParseRankLine(text)) {
      p->communicator = communicator_;
      if (p->detail.empty())
        p->detail = error_.empty() ? "reported an error" : "reported " + error_;
      AddBounded(report_.errors, std::move(*p));
    }
  }

  void CommMismatch(std::string_view text) {
    std::string_view rest = text;
    if (Take(rest, "Communicator ranks have different ")) {
      EndMismatch();
      if (rest.ends_with("operation counts")) {
        std::string_view collective = Trim(rest.substr(0, rest.size() - 16));
        if (collective == "collective") collective = {};  // before 2.26: one count for all
        mismatch_ = RasMismatch{communicator_, Value(collective), {}, {}};
      }
      return;  // "different status": communicators starting or ending, not a count
    }
    if (!mismatch_) return;
    if (const auto count = TakeInt(rest)) {
      if (Take(rest, "ranks have launched up to operation ")) {
        if (auto op = TakeInt(rest)) AddGroup(*count, *op);
      } else if (Take(rest, "ranks have not launched any operations")) {
        AddGroup(*count, 0);
      }
      return;
    }
    auto p = ParseRankLine(text);
    if (!p) return;
    std::string_view detail = p->detail;
    std::int64_t op = group_op_;
    if (Take(detail, "has launched up to operation ")) {  // a group of one
      if (auto n = TakeInt(detail)) op = *n;
      AddGroup(1, op);
    } else if (Take(detail, "has not launched any operations")) {
      op = 0;
      AddGroup(1, 0);
    }
    p->communicator = communicator_;
    p->detail = "launched up to operation " + std::to_string(op) +
                (mismatch_->collective.empty() ? "" : " of " + mismatch_->collective);
    if (ranks_.size() < kMaxRasEntries) ranks_.emplace_back(op, std::move(*p));
  }

  void AddGroup(std::int64_t count, std::int64_t op) {
    group_op_ = op;
    if (mismatch_->groups.size() < kMaxRasEntries) mismatch_->groups.emplace_back(count, op);
  }

  void EndMismatch() {
    if (!mismatch_) return;
    SortGroups(*mismatch_);
    const std::int64_t top = mismatch_->groups.empty() ? 0 : mismatch_->groups.front().second;
    for (auto& [op, p] : ranks_) {
      if (op < top && mismatch_->behind.size() < kMaxRasEntries) {
        mismatch_->behind.push_back(std::move(p));
      }
    }
    if (report_.mismatches.size() < kMaxRasEntries && !mismatch_->groups.empty()) {
      report_.mismatches.push_back(std::move(*mismatch_));
    }
    mismatch_.reset();
    ranks_.clear();
    group_op_ = 0;
  }

  RasReport report_;
  Block block_ = Block::None;
  std::string communicator_;
  std::string error_;
  std::string summary_header_;
  bool expect_summary_ = false;
  bool in_groups_ = false;
  bool comms_seen_ = false;
  bool no_comms_ = false;
  bool warnings_seen_ = false;  // NCCL prints the Warnings header last, always
  std::optional<RasMismatch> mismatch_;
  std::vector<std::pair<std::int64_t, RasProcess>> ranks_;  // the mismatch's named ranks
  std::int64_t group_op_ = 0;
};

}  // namespace ras_reading

namespace {

// "NCCL version 2.26.5+cuda12.8 compiled with CUDA 12.8" -> "2.26.5".
std::optional<std::string> TextVersion(std::string_view line) {
  std::string_view rest = Trim(line);
  if (!Take(rest, "NCCL version ") || rest.find(" compiled with CUDA") == std::string_view::npos) {
    return std::nullopt;
  }
  std::string_view version = TakeWord(rest);
  version = version.substr(0, version.find_first_of("+-"));
  return Value(version);
}

std::string HashOf(const Json& comm) {
  const auto hash = comm.find("hash");
  if (hash == comm.end() || !hash->is_string()) return "";
  std::string_view text = hash->get_ref<const std::string&>();
  if (StartsWith(text, "0x")) text.remove_prefix(2);
  std::string out = Value(text);
  if (out.size() < 16) out.insert(0, 16 - out.size(), '0');
  return out;
}

std::int64_t IntAt(const Json& object, std::string_view key, std::int64_t fallback = 0) {
  const auto it = object.find(key);
  if (it == object.end() || !it->is_number_integer()) return fallback;
  return it->get<std::int64_t>();
}

bool BoolAt(const Json& object, std::string_view key) {
  const auto it = object.find(key);
  return it != object.end() && it->is_boolean() && it->get<bool>();
}

RasProcess JsonRank(const Json& rank, const std::string& communicator) {
  RasProcess p;
  const std::int64_t r = IntAt(rank, "rank", -1);
  if (r >= 0 && r <= std::numeric_limits<int>::max()) p.rank = static_cast<int>(r);
  p.gpu = std::to_string(IntAt(rank, "cuda_dev", -1));
  p.pid = IntAt(rank, "pid");
  const auto host = rank.find("host");
  if (host != rank.end() && host->is_string()) p.node = Value(host->get_ref<const std::string&>());
  p.communicator = communicator;
  return p;
}

// ncclResult_t's names (nccl.h), as RAS's text prints them.
std::string ResultName(std::int64_t result) {
  static constexpr std::array<std::string_view, 8> kNames{
      "ncclSuccess",         "ncclUnhandledCudaError", "ncclSystemError", "ncclInternalError",
      "ncclInvalidArgument", "ncclInvalidUsage",       "ncclRemoteError", "ncclInProgress"};
  if (result >= 0 && static_cast<std::size_t>(result) < kNames.size()) {
    return std::string(kNames[static_cast<std::size_t>(result)]);
  }
  return "error " + std::to_string(result);
}

RasReport FromJson(const Json& root) {
  RasReport report;
  report.format = RasFormat::JSON;
  if (const auto v = root.find("nccl_version"); v != root.end() && v->is_string()) {
    report.nccl_version = Value(v->get_ref<const std::string&>());
  }
  if (const auto ras = root.find("ras"); ras != root.end() && ras->is_object()) {
    report.timeouts = IntAt(*ras, "timeouts_count");
  }
  std::set<std::pair<std::string, std::int64_t>> processes;
  std::set<std::string> nodes;
  std::int64_t gpus = 0;
  report.communicators = 0;
  const auto comms = root.find("communicators");
  if (comms == root.end() || !comms->is_array()) {
    report.truncated = true;
    return report;
  }
  for (const Json& comm : *comms) {
    if (!comm.is_object()) continue;
    ++report.communicators;
    const std::string hash = HashOf(comm);
    // Each collective's counts over the communicator's ranks: op -> ranks at it.
    std::map<std::string, std::map<std::int64_t, std::vector<RasProcess>>, std::less<>> counts;
    if (const auto ranks = comm.find("ranks"); ranks != comm.end() && ranks->is_array()) {
      for (const Json& rank : *ranks) {
        if (!rank.is_object()) continue;
        RasProcess p = JsonRank(rank, hash);
        if (processes.emplace(p.node, p.pid).second) ++gpus;
        nodes.insert(p.node);
        if (const auto status = rank.find("status"); status != rank.end() && status->is_object()) {
          const std::int64_t init = IntAt(*status, "init_state");
          const std::int64_t async = IntAt(*status, "async_error");
          if (async != 0 || (init != 0 && init != 7)) {
            RasProcess e = p;
            e.detail = "reported " + ResultName(async != 0 ? async : init);
            AddBounded(report.errors, std::move(e));
          }
        }
        if (const auto cc = rank.find("collective_counts"); cc != rank.end() && cc->is_object()) {
          for (const auto& [name, value] : cc->items()) {
            if (!value.is_number() || counts.size() > 16) continue;
            auto& ranks_at =
                counts[Value(name)][value.is_number_integer()
                                        ? value.get<std::int64_t>()
                                        : static_cast<std::int64_t>(value.get<std::uint64_t>())];
            if (ranks_at.size() < kMaxRasEntries) ranks_at.push_back(p);
          }
        }
      }
    }
    if (const auto missing = comm.find("missing_ranks");
        missing != comm.end() && missing->is_array()) {
      for (const Json& rank : *missing) {
        if (!rank.is_object()) continue;
        RasProcess p = JsonRank(rank, hash);
        processes.emplace(p.node, p.pid);
        nodes.insert(p.node);
        const auto status = rank.find("status");
        const bool dead =
            status != rank.end() && status->is_object() && BoolAt(*status, "considered_dead");
        p.detail = dead ? "considered dead" : "sent no data";
        AddBounded(dead ? report.dead : report.unresponsive, std::move(p));
      }
    }
    for (auto& [collective, by_op] : counts) {
      if (by_op.size() < 2) continue;
      RasMismatch m{hash, collective, {}, {}};
      const std::int64_t top = by_op.rbegin()->first;
      for (auto& [op, ranks] : by_op) {
        m.groups.emplace_back(static_cast<std::int64_t>(ranks.size()), op);
        if (op == top) continue;
        for (RasProcess& p : ranks) {
          if (m.behind.size() >= kMaxRasEntries) break;
          p.detail = "launched up to operation " + std::to_string(op) + " of " + collective;
          m.behind.push_back(std::move(p));
        }
      }
      SortGroups(m);
      if (m.groups.size() > kMaxRasEntries) m.groups.resize(kMaxRasEntries);
      if (report.mismatches.size() < kMaxRasEntries) report.mismatches.push_back(std::move(m));
    }
  }
  report.processes = static_cast<std::int64_t>(processes.size());
  report.nodes = static_cast<std::int64_t>(nodes.size());
  report.gpus = gpus;
  return report;
}

}  // namespace

namespace ras_reading {

// Brackets and braces opened and not closed in `line`, outside JSON strings.
class JsonDepth {
 public:
  void Scan(std::string_view line) {
    for (const char c : line) {
      if (in_string_) {
        if (escaped_) {
          escaped_ = false;
        } else if (c == '\\') {
          escaped_ = true;
        } else if (c == '"') {
          in_string_ = false;
        }
        continue;
      }
      if (c == '"') in_string_ = true;
      if (c == '{' || c == '[') ++depth_;
      if ((c == '}' || c == ']') && depth_ > 0) --depth_;
    }
  }
  std::size_t depth() const { return depth_; }

 private:
  std::size_t depth_ = 0;
  bool in_string_ = false;
  bool escaped_ = false;
};

}  // namespace ras_reading

struct RasReader::State {
  enum class Mode { Idle, Text, JsonObject, Skip };
  Mode mode = Mode::Idle;
  std::uint64_t line = 0;
  std::size_t bytes = 0;  // of the report being read
  std::optional<ras_reading::TextReport> text;
  std::string json;
  ras_reading::JsonDepth depth;
  bool json_cut = false;
  std::uint64_t start = 0;
  bool started = false;  // the line just fed started a report
  std::vector<RasReport> reports;
  std::vector<std::uint64_t> starts;

  void Keep(RasReport report) {
    if (reports.size() >= kMaxRasReports) {
      reports.erase(reports.begin());
      starts.erase(starts.begin());
    }
    reports.push_back(std::move(report));
    starts.push_back(start);
  }

  void End(bool cut) {
    if (mode == Mode::Text) {
      Keep(text->Finish(cut));
      text.reset();
    } else if (mode == Mode::JsonObject) {
      EndJson(true);
    }
    mode = Mode::Idle;
  }

  void EndJson(bool cut) {
    RasReport report;
    report.format = RasFormat::JSON;
    bool ours = true;
    if (!json_cut && !cut) {
      try {
        const Json root = ReadJson(json, JsonReadOptions{.max_depth = kMaxRasJsonDepth});
        ours =
            root.is_object() && (root.contains("nccl_version") || root.contains("communicators"));
        if (ours) report = FromJson(root);
      } catch (const JsonReadError&) {
        report.truncated = true;
      }
    } else {
      // Cut: ours when its first lines say so.
      ours = json.find("\"nccl_version\"") != std::string::npos ||
             json.find("\"communicators\"") != std::string::npos;
      report.truncated = true;
    }
    if (ours) Keep(std::move(report));
    json.clear();
    json.shrink_to_fit();
    json_cut = false;
    depth = {};
    mode = Mode::Idle;
  }

  void Feed(std::string_view line_text) {
    ++line;
    if (auto version = TextVersion(line_text)) {
      End(false);
      Begin(Mode::Text);
      text.emplace(std::move(*version));
      return;
    }
    const std::string_view trimmed = Trim(line_text);
    if (mode != Mode::Text && mode != Mode::JsonObject && trimmed == "Job summary") {
      End(false);
      Begin(Mode::Text);
      text.emplace("");
      return;
    }
    // NCCL prints its JSON report's braces alone on their lines; compact JSON starts with its
    // first member.
    if (mode != Mode::JsonObject && (trimmed == "{" || StartsWith(trimmed, "{\"nccl_version\""))) {
      End(false);
      Begin(Mode::JsonObject);
    }
    if (mode == Mode::Idle || mode == Mode::Skip) return;
    bytes += line_text.size() + 1;
    if (mode == Mode::Text) {
      if (bytes > kMaxRasReportBytes) {
        Keep(text->Finish(true));
        text.reset();
        mode = Mode::Skip;
        return;
      }
      text->Feed(line_text);
      return;
    }
    // JSON: kept until its braces close, scanned once.
    depth.Scan(line_text);
    if (!json_cut) {
      if (json.size() + line_text.size() + 1 > kMaxRasReportBytes) {
        // Cut: kept as a truncated report; what follows is skipped up to the next report.
        json_cut = true;
        EndJson(true);
        mode = Mode::Skip;
        return;
      } else {
        // NCCL 2.28.7 to 2.28.9 print a missing rank's "nvml_dev" without the comma before its
        // "status": a member that starts a line after a value gets its comma back (in valid JSON
        // a line that starts with a string follows a comma, a brace, a bracket or a colon).
        const std::string_view trimmed_line = Trim(line_text);
        if (!trimmed_line.empty() && trimmed_line.front() == '"') {
          const std::size_t last = json.find_last_not_of(" \t\r\n");
          if (last != std::string::npos && json[last] != ',' && json[last] != '{' &&
              json[last] != '[' && json[last] != ':') {
            json.insert(last + 1, ",");
          }
        }
        json.append(line_text);
        json.push_back('\n');
      }
    }
    if (depth.depth() == 0) EndJson(false);
  }

  void Begin(Mode next) {
    started = true;
    mode = next;
    bytes = 0;
    start = line;
  }
};

RasReader::RasReader() : state_(new State) {}
RasReader::~RasReader() { delete state_; }
RasReader::RasReader(RasReader&& other) noexcept : state_(std::exchange(other.state_, nullptr)) {}
RasReader& RasReader::operator=(RasReader&& other) noexcept {
  std::swap(state_, other.state_);
  return *this;
}

bool RasReader::Feed(std::string_view line) {
  state_->started = false;
  state_->Feed(line);
  return state_->started;
}

std::vector<RasReport> RasReader::Finish() {
  state_->End(false);
  return std::move(state_->reports);
}

const std::vector<std::uint64_t>& RasReader::StartLines() const { return state_->starts; }

std::vector<RasReport> ReadRasReports(std::string_view bytes) {
  RasReader reader;
  while (!bytes.empty()) {
    const std::size_t end = std::min(bytes.find('\n'), bytes.size());
    std::string_view line = bytes.substr(0, end);
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    reader.Feed(line);
    bytes.remove_prefix(std::min(end + 1, bytes.size()));
  }
  return reader.Finish();
}

std::string_view RasHealthName(RasHealth health) {
  switch (health) {
    case RasHealth::Healthy:
      return "Healthy";
    case RasHealth::ProcessDead:
      return "ProcessDead";
    case RasHealth::RankError:
      return "RankError";
    case RasHealth::CollectiveStuck:
      return "CollectiveStuck";
    case RasHealth::RankUnresponsive:
      return "RankUnresponsive";
  }
  return "Healthy";
}

std::optional<RasHealth> RasHealthFromName(std::string_view name) {
  for (const RasHealth h : {RasHealth::Healthy, RasHealth::ProcessDead, RasHealth::RankError,
                            RasHealth::CollectiveStuck, RasHealth::RankUnresponsive}) {
    if (RasHealthName(h) == name) return h;
  }
  return std::nullopt;
}

namespace {

// "rank 21 (GPU 5, PID 3487984, 172.16.64.213)", "process 3487984 (GPU 5, 172.16.64.213)".
std::string Describe(const RasProcess& p) {
  std::string out = p.rank ? "rank " + std::to_string(*p.rank) : "process " + std::to_string(p.pid);
  std::string details;
  const auto add = [&details](const std::string& part) {
    details += (details.empty() ? "" : ", ") + part;
  };
  if (!p.gpu.empty()) add("GPU " + p.gpu);
  if (p.rank && p.pid != 0) add("PID " + std::to_string(p.pid));
  if (!p.node.empty()) add(p.node);
  return details.empty() ? out : out + " (" + details + ")";
}

std::string DescribeAll(const std::vector<RasProcess>& list) {
  std::string out;
  for (std::size_t i = 0; i < list.size() && i < kMaxRasVerdictRanks; ++i) {
    out += (i == 0 ? "" : ", ") + Describe(list[i]);
  }
  if (list.size() > kMaxRasVerdictRanks) {
    out += " and " + std::to_string(list.size() - kMaxRasVerdictRanks) + " more";
  }
  return out;
}

std::string Plural(std::size_t n, std::string_view one, std::string_view many) {
  return std::to_string(n) + " " + std::string(n == 1 ? one : many);
}

std::vector<RasProcess> Head(const std::vector<RasProcess>& list) {
  return {list.begin(),
          list.begin() + static_cast<std::ptrdiff_t>(std::min(list.size(), kMaxRasVerdictRanks))};
}

// The groups by count, the highest first; past kMaxRasSummaryGroups, how many more (a summary
// goes into status.ras and a condition: it stays short whatever the report).
std::string Groups(const RasMismatch& m) {
  std::string out;
  for (std::size_t i = 0; i < m.groups.size() && i < kMaxRasSummaryGroups; ++i) {
    const auto& [count, op] = m.groups[i];
    out += (out.empty() ? "" : ", ") + Plural(static_cast<std::size_t>(count), "rank", "ranks") +
           " at operation " + std::to_string(op);
  }
  if (m.groups.size() > kMaxRasSummaryGroups) {
    out += " and " + Plural(m.groups.size() - kMaxRasSummaryGroups, "other count", "other counts");
  }
  return out;
}

}  // namespace

RasVerdict JudgeRas(const RasReport& report, const RasReport* previous) {
  RasVerdict verdict;
  const std::size_t dead = std::max(
      report.dead.size(), static_cast<std::size_t>(std::max<std::int64_t>(report.dead_count, 0)));
  if (dead > 0) {
    verdict.health = RasHealth::ProcessDead;
    verdict.ranks = Head(report.dead);
    verdict.summary = "NCCL's RAS considers " + Plural(dead, "process", "processes") +
                      " dead (unreachable over the RAS network)" +
                      (report.dead.empty() ? std::string(" (not named: ask VERBOSE STATUS)")
                                           : ": " + DescribeAll(report.dead));
    return verdict;
  }
  if (!report.errors.empty()) {
    verdict.health = RasHealth::RankError;
    verdict.ranks = Head(report.errors);
    verdict.summary = "NCCL's RAS says " + Plural(report.errors.size(), "rank", "ranks") + " " +
                      (report.errors.size() == 1 ? "reports" : "report") +
                      " an error: " + DescribeAll(report.errors) + " " +
                      report.errors.front().detail;
    return verdict;
  }
  for (const RasMismatch& m : report.mismatches) {
    if (previous == nullptr) break;
    const bool same = std::any_of(previous->mismatches.begin(), previous->mismatches.end(),
                                  [&m](const RasMismatch& p) {
                                    return p.communicator == m.communicator &&
                                           p.collective == m.collective && p.groups == m.groups;
                                  });
    if (!same) continue;
    verdict.health = RasHealth::CollectiveStuck;
    verdict.ranks = Head(m.behind);
    verdict.summary =
        (m.collective.empty() ? std::string("the collectives") : std::string(m.collective)) +
        " of communicator " + m.communicator + " did not move between two RAS reports (" +
        Groups(m) + ")";
    if (!m.behind.empty()) verdict.summary += "; behind: " + DescribeAll(m.behind);
    return verdict;
  }
  const std::size_t unresponsive =
      std::max(report.unresponsive.size(),
               static_cast<std::size_t>(std::max<std::int64_t>(report.unresponsive_count, 0)));
  if (unresponsive > 0) {
    verdict.health = RasHealth::RankUnresponsive;
    verdict.ranks = Head(report.unresponsive);
    verdict.summary = "NCCL's RAS got no data from " +
                      Plural(unresponsive, "process or rank", "processes or ranks") +
                      " (unresponsive, not yet considered dead)" +
                      (report.unresponsive.empty() ? std::string(" (not named: ask VERBOSE STATUS)")
                                                   : ": " + DescribeAll(report.unresponsive));
    return verdict;
  }
  verdict.straggler = !report.mismatches.empty();
  // Whether a mismatch of the same collective was there before (with other counts: it moved).
  const bool moved =
      previous != nullptr &&
      std::any_of(report.mismatches.begin(), report.mismatches.end(), [&](const RasMismatch& m) {
        return std::any_of(
            previous->mismatches.begin(), previous->mismatches.end(), [&m](const RasMismatch& p) {
              return p.communicator == m.communicator && p.collective == m.collective;
            });
      });
  verdict.summary =
      "NCCL's RAS reports " +
      (report.processes >= 0
           ? Plural(static_cast<std::size_t>(report.processes), "process", "processes")
           : std::string("every process")) +
      " answering" +
      (report.communicators >= 0 ? " in " + Plural(static_cast<std::size_t>(report.communicators),
                                                   "communicator", "communicators")
                                 : std::string()) +
      ", no error" +
      (!verdict.straggler ? std::string()
       : moved ? std::string("; collective counts differ but moved since the previous report "
                             "(a straggler, not a hang)")
               : std::string("; collective counts differ (stuck only if the next report shows "
                             "the same counts)"));
  return verdict;
}

}  // namespace ncclguard::core
