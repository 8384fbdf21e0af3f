#pragma once

#include <optional>
#include <string>

#include "core/json.h"
#include "probes/host_files.h"

namespace ncclguard::probes {

struct ResolvedInstanceType {
  std::optional<std::string> name;
  std::string source;  // where it came from, or why there is none
};

// The node's EC2 instance type, first found of:
//   1. `flag` (--instance-type),
//   2. `file` (--instance-type-file): a file holding the type, or the EC2 instance identity
//      document (JSON with "instanceType"), e.g. written by an init container from IMDS,
//   3. the DMI product name under the host root, on EC2 (sys_vendor "Amazon EC2"): Nitro
//      instances report their type there.
// Throws std::runtime_error when the flag or the file is given but unusable: the admin asked
// for that source, silently ignoring it would hide the mistake.
ResolvedInstanceType ResolveInstanceType(const std::optional<std::string>& flag,
                                         const std::optional<std::string>& file,
                                         const HostFiles& files);

bool LooksLikeInstanceType(const std::string& text);

// The instance type from a Node object's node.kubernetes.io/instance-type label (set by the
// cloud provider, or by the admin on nodes without one): the source when none of the above
// answers, e.g. no DMI product name because the node is not an EC2 Nitro instance.
ResolvedInstanceType InstanceTypeFromNode(const core::Json& node);

}  // namespace ncclguard::probes
