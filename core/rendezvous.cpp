#include "core/rendezvous.h"

#include <cstdint>
#include <cstdio>

#include "core/json_access.h"
#include "core/workload.h"

namespace ncclguard::core {
namespace {

constexpr std::size_t kMaxLabel = 63;

std::string Name(const Json& job) {
  const JsonPointer at("/metadata/name");
  return job.is_object() && job.contains(at) && job.at(at).is_string()
             ? job.at(at).get<std::string>()
             : "";
}

// FNV-1a: stable across processes and versions, unlike std::hash.
std::uint32_t Fnv1a(std::string_view text) {
  std::uint32_t hash = 2166136261u;
  for (char c : text) {
    hash ^= static_cast<unsigned char>(c);
    hash *= 16777619u;
  }
  return hash;
}

std::string LowerCase(std::string_view text) {
  std::string lower(text);
  for (char& c : lower) {
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  }
  return lower;
}

std::string AsLabel(std::string_view name) {
  if (IsDns1035Label(name)) return std::string(name);
  std::string label;
  for (char c : name) {
    const bool alnum = (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9');
    if (c >= 'A' && c <= 'Z') {
      label += static_cast<char>(c - 'A' + 'a');
    } else {
      label += alnum ? c : '-';
    }
  }
  if (label.empty() || label.front() < 'a' || label.front() > 'z') label.insert(0, "j-");
  char suffix[8];
  std::snprintf(suffix, sizeof suffix, "-%05x", Fnv1a(name) & 0xfffffu);
  const std::size_t keep = kMaxLabel - 6;
  if (label.size() > keep) label.resize(keep);
  while (!label.empty() && label.back() == '-') label.pop_back();
  return label + suffix;
}

}  // namespace

bool IsDns1035Label(std::string_view name) {
  if (name.empty() || name.size() > kMaxLabel) return false;
  if (name.front() < 'a' || name.front() > 'z' || name.back() == '-') return false;
  for (char c : name) {
    if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-')) return false;
  }
  return true;
}

std::string RendezvousServiceName(const Json& job) {
  const std::string name = Name(job);
  if (name.empty()) return "";
  const auto kind = ManagedKindOf(job);
  const std::string_view field = kind ? KindInfoOf(*kind).service_name_field : "";
  if (!field.empty()) {
    // Read leniently: a malformed subdomain is reported by the rules, not here.
    const JsonPointer at{std::string(field)};
    if (job.contains(at) && job.at(at).is_string() &&
        !job.at(at).get_ref<const std::string&>().empty()) {
      return AsLabel(job.at(at).get_ref<const std::string&>());
    }
  }
  return AsLabel(name);
}

std::optional<std::string> RankZeroHostname(const Json& job) {
  const auto workload = ParseWorkload(job);
  const std::string name = Name(job);
  if (!workload || name.empty()) return std::nullopt;
  const KindInfo& info = KindInfoOf(workload->kind);
  if (!info.job) return std::nullopt;
  const RankZeroPod& pod = info.rank_zero;
  // A kind whose operator does the rendezvous itself names no rank-0 pod (HyperPodPyTorchJob).
  if (pod.index.empty() && pod.role_at.empty() && pod.roles.front().empty()) return std::nullopt;
  std::string role;
  if (!pod.role_at.empty()) {
    const auto named = OptionalString(job, JsonPointer(std::string(pod.role_at)));
    if (!named) return std::nullopt;
    role = *named;
  }
  const JsonPointer templates{std::string(info.templates)};
  for (std::string_view candidate : pod.roles) {
    if (candidate.empty()) continue;
    role = LowerCase(candidate);  // the last one when the job declares none
    if (OptionalObject(job, templates / std::string(candidate)) != nullptr) break;
  }
  return name + (role.empty() ? "" : "-" + role) + std::string(pod.index);
}

std::optional<std::string> MasterAddress(const Json& job, std::string_view cluster_domain) {
  const auto host = RankZeroHostname(job);
  const auto ns = OptionalString(job, JsonPointer("/metadata/namespace"));
  if (!host || !ns || ns->empty()) return std::nullopt;
  return *host + "." + RendezvousServiceName(job) + "." + *ns + ".svc." +
         std::string(cluster_domain);
}

}  // namespace ncclguard::core
