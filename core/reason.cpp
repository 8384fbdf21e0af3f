#include "core/reason.h"

#include <array>
#include <utility>

namespace ncclguard::core {
namespace {

constexpr std::size_t kMaxReasonLength = 1024;

// Words of ids that are acronyms or brand spellings (the ids of docs/rules.md use them).
constexpr std::array<std::pair<std::string_view, std::string_view>, 15> kSpellings{{
    {"acs", "ACS"},
    {"dns", "DNS"},
    {"ecc", "ECC"},
    {"efa", "EFA"},
    {"gpu", "GPU"},
    {"gpudirect", "GPUDirect"},
    {"ipc", "IPC"},
    {"nccl", "NCCL"},
    {"nvlink", "NVLink"},
    {"oom", "OOM"},
    {"p2p", "P2P"},
    {"pci", "PCI"},
    {"rdma", "RDMA"},
    {"removeipc", "RemoveIPC"},
    {"shm", "SHM"},
}};

bool IsAsciiAlnum(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
}
bool IsAsciiAlpha(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); }
char Lower(char c) { return c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c; }
char Upper(char c) { return c >= 'a' && c <= 'z' ? static_cast<char>(c - 'a' + 'A') : c; }

void AppendWord(std::string_view word, std::string& out) {
  std::string lower;
  for (char c : word) lower += Lower(c);
  for (const auto& [from, to] : kSpellings) {
    if (lower == from) {
      out += to;
      return;
    }
  }
  out += Upper(word.front());
  out.append(word.substr(1));
}

}  // namespace

std::string ReasonFromId(std::string_view id) {
  std::string out;
  std::size_t i = 0;
  while (i < id.size()) {
    if (!IsAsciiAlnum(id[i])) {
      ++i;
      continue;
    }
    std::size_t end = i;
    while (end < id.size() && IsAsciiAlnum(id[end])) ++end;
    AppendWord(id.substr(i, end - i), out);
    i = end;
  }
  if (out.empty()) return "Unknown";
  if (!IsAsciiAlpha(out.front())) out = "R" + out;
  if (out.size() > kMaxReasonLength) out.resize(kMaxReasonLength);
  return out;
}

bool IsValidReason(std::string_view reason) {
  if (reason.empty() || reason.size() > kMaxReasonLength || !IsAsciiAlpha(reason.front())) {
    return false;
  }
  for (char c : reason) {
    if (!IsAsciiAlnum(c) && c != '_' && c != ',' && c != ':') return false;
  }
  const char last = reason.back();
  return IsAsciiAlnum(last) || last == '_';
}

}  // namespace ncclguard::core
