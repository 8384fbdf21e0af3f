// An NcclPolicy, as a file (--policy) or as the object the controller reads: core::ParsePolicy,
// whose callers catch core::PolicyError and name the file or object. Anything else escaping is
// a finding. Property: a policy that parses once parses again on top of itself unchanged in
// the fields the rules read (applying the same overrides twice is the same as once).
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "core/errors.h"
#include "core/policy.h"
#include "fuzz/fuzz_support.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace ncclguard;
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  core::Policy once;
  try {
    once = core::ParsePolicy(text);
  } catch (const core::PolicyError& e) {
    fuzz::Require(*e.what() != '\0', "a policy error says why");
    return 0;
  }
  const core::Policy twice = core::ParsePolicy(text, once);
  fuzz::Require(
      twice.guide_base_url == once.guide_base_url && twice.socket_ifname == once.socket_ifname &&
          twice.cluster_domain == once.cluster_domain &&
          twice.default_instance_type == once.default_instance_type &&
          twice.instance_types.size() == once.instance_types.size() &&
          twice.rules.size() == once.rules.size() && twice.gate.enabled == once.gate.enabled &&
          twice.rendezvous_port == once.rendezvous_port,
      "applying a policy twice is the same as once");
  fuzz::Require(!once.guide_base_url.empty(), "a policy keeps a guide base URL");
  return 0;
}
