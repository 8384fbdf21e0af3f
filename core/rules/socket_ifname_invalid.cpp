#include <array>

#include "core/rules/rule_util.h"

namespace ncclguard::core::rules {
namespace {

// NCCL_SOCKET_IFNAME: a comma list of interface prefixes. A leading '^' excludes the listed
// interfaces, and a '=' after it (read once, for the whole list) asks for exact names.
struct IfnameSpec {
  bool exclude = false;
  bool exact = false;
  std::vector<std::string> names;
};

std::optional<std::string> Parse(std::string_view value, IfnameSpec& spec) {
  if (value.empty()) return "is empty";
  if (value.front() == '^') {
    spec.exclude = true;
    value.remove_prefix(1);
  }
  if (!value.empty() && value.front() == '=') {
    spec.exact = true;
    value.remove_prefix(1);
  }
  for (std::string& entry : Split(value, ',')) {
    if (entry.empty()) return "has an empty entry";
    for (char ch : entry) {
      const bool ok = std::isalnum(static_cast<unsigned char>(ch)) != 0 || ch == '_' || ch == '-' ||
                      ch == '.' || ch == ':' || ch == '@';
      if (!ok) return "has an invalid character in \"" + entry + "\"";
    }
    spec.names.push_back(std::move(entry));
  }
  return std::nullopt;
}

bool Matches(const IfnameSpec& spec, std::string_view interface) {
  for (const std::string& name : spec.names) {
    if (spec.exact ? interface == name : interface.starts_with(name)) return true;
  }
  return false;
}

class SocketIfnameInvalid final : public Rule {
 public:
  SocketIfnameInvalid()
      : Rule({"socket-ifname-invalid", "socket-ifname", Level::Deny, RuleScope::Pod,
              "NCCL_SOCKET_IFNAME is empty or malformed, or selects no non-loopback interface of a "
              "pod (a pod has lo and eth0; host interface names such as ens5 do not exist in it).",
              "Use an exclusion list such as ^lo,docker,efa,veth (the policy default), or eth0; or "
              "remove the variable and let the mutating webhook set it."}) {}

  void CheckTemplate(const TemplateContext& ctx, RuleReport& report) const override {
    ForEachLiteralEnv(
        ctx.facts, "NCCL_SOCKET_IFNAME",
        [&](const Container& c, const std::string& value, const JsonPointer& path) {
          IfnameSpec spec;
          if (auto problem = Parse(value, spec)) {
            report.Add(path,
                       ContainerLabel(c) + ": NCCL_SOCKET_IFNAME=\"" + value + "\" " + *problem +
                           ". Use a comma list of interface prefixes, e.g. ^lo,docker,efa,veth.");
            return;
          }
          // With hostNetwork the pod sees the node's interfaces, which we cannot list here.
          if (ctx.facts.host_network) return;
          constexpr std::array<std::string_view, 1> kPodInterfaces{"eth0"};
          bool usable = false;
          for (std::string_view interface : kPodInterfaces) {
            usable = usable || (spec.exclude != Matches(spec, interface));
          }
          if (usable) return;
          report.Add(path,
                     ContainerLabel(c) + ": NCCL_SOCKET_IFNAME=\"" + value +
                         "\" leaves no usable interface in the pod (it has lo and eth0), so NCCL's "
                         "bootstrap cannot connect. Use ^lo,docker,efa,veth or eth0.");
        });
  }
};

NCCLGUARD_REGISTER(SocketIfnameInvalid);

}  // namespace
}  // namespace ncclguard::core::rules
