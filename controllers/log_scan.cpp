#include "controllers/log_scan.h"

#include <algorithm>
#include <array>
#include <cctype>
#include <tuple>

#include "controllers/diagnosis.h"

namespace ncclguard::controllers {
namespace {

char Lower(char c) { return c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c; }

bool IsKeyChar(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) != 0 || c == '_' || c == '-' || c == '.';
}

bool IsValueEnd(char c) { return c == ' ' || c == '\t' || c == ',' || c == ';' || c == '"'; }

// A key that names a secret: ..._TOKEN, SECRET, PASSWORD, API_KEY, CREDENTIALS, ...
bool SecretKey(std::string_view key) {
  std::string lower;
  for (char c : key) lower += Lower(c);
  for (const std::string_view word :
       {"token", "secret", "passw", "credential", "apikey", "api_key", "access_key", "private_key",
        "auth", "session_key", "signature"}) {
    if (lower.find(word) != std::string::npos) return true;
  }
  return lower.size() >= 4 && lower.ends_with("_key");
}

// A run of `count` or more characters of `allowed` starting at `at`.
template <typename Allowed>
std::size_t RunLength(std::string_view text, std::size_t at, Allowed&& allowed) {
  std::size_t end = at;
  while (end < text.size() && allowed(text[end])) ++end;
  return end - at;
}

bool TokenChar(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) != 0 || c == '_' || c == '-';
}

}  // namespace

LogScan::LogScan() {
  for (const LogMatcherEntry* entry : LogMatcherRegistry::All()) {
    matchers_.push_back(entry->make());
  }
}

LogScan::~LogScan() = default;

std::size_t LogScan::AddSource(LogSourceInfo info) {
  sources_.push_back(std::move(info));
  lines_.push_back(0);
  transports_.emplace_back();
  return sources_.size() - 1;
}

void LogScan::Feed(std::size_t source, std::string_view text) {
  if (text.size() > kMaxLogLineBytes) text = text.substr(0, kMaxLogLineBytes);
  if (!text.empty() && text.back() == '\r') text.remove_suffix(1);
  const LogLine line{source, ++lines_[source], text};
  transports_[source].Feed(line.number, text);
  for (const auto& matcher : matchers_) matcher->Feed(line);
}

const TransportVerdict& LogScan::Transport(std::size_t source) const {
  return transports_[source].Verdict();
}

std::vector<LogFinding> LogScan::Finish() const {
  std::vector<LogFinding> findings;
  for (const auto& matcher : matchers_) {
    for (LogFinding& f : matcher->Finish(*this)) findings.push_back(std::move(f));
  }
  const auto rank = [](std::string_view id) {
    const Diagnosis* d = DiagnosisRegistry::Find(id);
    return d != nullptr ? d->Info().rank : 1000;
  };
  std::stable_sort(findings.begin(), findings.end(), [&](const LogFinding& a, const LogFinding& b) {
    return std::tuple(rank(a.id), a.id, a.source) < std::tuple(rank(b.id), b.id, b.source);
  });
  return findings;
}

void LineSplitter::Append(std::string_view part) {
  if (cut_) return;
  const std::size_t room = kMaxLogLineBytes - pending_.size();
  if (part.size() > room) {
    pending_.append(part.substr(0, room));
    cut_ = true;
    return;
  }
  pending_.append(part);
}

namespace {

// RedactLine and LogValue: `line` redacted, control bytes replaced, cut to `max_bytes` (> 3).
std::string Redacted(std::string_view line, std::size_t max_bytes) {
  std::string out;
  out.reserve(std::min(line.size(), max_bytes));
  std::size_t i = 0;
  while (i < line.size()) {
    const char c = line[i];
    // KEY=VALUE / KEY: VALUE / "KEY": "VALUE" with a secret-looking KEY.
    if (c == '=' || c == ':') {
      std::size_t key_end = out.size();
      if (key_end > 0 && out[key_end - 1] == '"') --key_end;
      std::size_t key_begin = key_end;
      while (key_begin > 0 && IsKeyChar(out[key_begin - 1])) --key_begin;
      const std::string_view key(out.data() + key_begin, key_end - key_begin);
      if (!key.empty() && SecretKey(key)) {
        out += c;
        std::size_t v = i + 1;
        while (v < line.size() && (line[v] == ' ' || line[v] == '"' || line[v] == '\'')) {
          out += line[v++];
        }
        // "Authorization: Bearer <token>": the scheme goes with the credential.
        for (const std::string_view scheme : {"Bearer ", "bearer ", "Basic "}) {
          if (line.substr(v, scheme.size()) == scheme) v += scheme.size();
        }
        std::size_t end = v;
        while (end < line.size() && !IsValueEnd(line[end]) && line[end] != '\'') ++end;
        if (end > v) out += "<redacted>";
        i = end;
        continue;
      }
    }
    // "Bearer xyz", "Basic xyz".
    for (const std::string_view scheme : {"Bearer ", "bearer ", "Basic "}) {
      if (line.substr(i, scheme.size()) == scheme) {
        const std::size_t n = RunLength(line, i + scheme.size(), [](char ch) {
          return TokenChar(ch) || ch == '.' || ch == '/' || ch == '+' || ch == '=';
        });
        if (n >= 8) {
          out.append(scheme);
          out += "<redacted>";
          i += scheme.size() + n;
          goto next;
        }
      }
    }
    // AWS access key ids, GitHub and Hugging Face tokens, at a word start.
    if (i == 0 || !TokenChar(line[i - 1])) {
      for (const std::string_view prefix : {"AKIA", "ASIA", "ghp_", "gho_", "ghs_", "hf_"}) {
        if (line.substr(i, prefix.size()) != prefix) continue;
        const std::size_t n = RunLength(line, i, TokenChar);
        if (n >= prefix.size() + 12) {
          out += "<redacted>";
          i += n;
          goto next;
        }
      }
    }
    out += !IsControlByte(c) ? c : c == '\t' ? ' ' : '?';
    ++i;
  next:
    if (out.size() >= max_bytes) break;
  }
  if (out.size() > max_bytes || i < line.size()) {
    // Cut on a UTF-8 boundary.
    std::size_t cut = std::min(out.size(), max_bytes - 3);
    while (cut > 0 && (static_cast<unsigned char>(out[cut]) & 0xC0) == 0x80) --cut;
    out.resize(cut);
    out += "...";
  }
  return out;
}

}  // namespace

std::string RedactLine(std::string_view line) { return Redacted(line, kMaxEvidenceBytes); }

std::string LogValue(std::string_view value) { return Redacted(value, kMaxLogValueBytes); }

bool LogContains(std::string_view text, std::string_view needle) {
  return text.find(needle) != std::string_view::npos;
}

bool LogContainsNoCase(std::string_view text, std::string_view needle) {
  return std::search(text.begin(), text.end(), needle.begin(), needle.end(),
                     [](char a, char b) { return Lower(a) == Lower(b); }) != text.end();
}

std::string_view NcclProcess(std::string_view text) {
  // host:pid:tid [dev] NCCL INFO ... (a WARN line has "file.cc:123 NCCL WARN" after [dev]).
  const auto nccl = text.find(" NCCL ");
  if (nccl == std::string_view::npos) return {};
  const auto bracket = text.rfind(" [", nccl);
  if (bracket == std::string_view::npos) return {};
  std::string_view head = text.substr(0, bracket);
  // Anything before the host (a torchrun "[rank3]:" or a timestamp) ends with a space or ':'.
  const auto space = head.rfind(' ');
  if (space != std::string_view::npos) head.remove_prefix(space + 1);
  const auto last = head.rfind(':');  // before tid
  if (last == std::string_view::npos || last == 0) return {};
  const std::string_view host_pid = head.substr(0, last);
  const auto colon = host_pid.rfind(':');
  if (colon == std::string_view::npos || colon == 0 || colon + 1 >= host_pid.size()) return {};
  for (char c : host_pid.substr(colon + 1)) {
    if (c < '0' || c > '9') return {};
  }
  std::string_view host = host_pid.substr(0, colon);
  // "[rank3]:host:pid": keep what follows the prefix.
  if (const auto close = host.rfind("]:"); close != std::string_view::npos) {
    return host_pid.substr(close + 2);
  }
  return host_pid;
}

std::optional<int> RankOf(std::string_view text) {
  const auto number_at = [&](std::size_t at) -> std::optional<int> {
    std::size_t end = at;
    while (end < text.size() && end - at < 7 && text[end] >= '0' && text[end] <= '9') ++end;
    if (end == at) return std::nullopt;
    int value = 0;
    for (std::size_t k = at; k < end; ++k) value = value * 10 + (text[k] - '0');
    return value;
  };
  for (const std::string_view marker : {"[rank", "[Rank ", "[default", "Rank ", "rank: "}) {
    std::size_t from = 0;
    while (true) {
      const auto at = text.find(marker, from);
      if (at == std::string_view::npos) break;
      if (auto n = number_at(at + marker.size())) return n;
      from = at + 1;
    }
  }
  return std::nullopt;
}

}  // namespace ncclguard::controllers
