#include "probes/instance_type.h"

#include <regex>
#include <stdexcept>

#include "core/json.h"
#include "core/pod_spec.h"

namespace ncclguard::probes {

bool LooksLikeInstanceType(const std::string& text) {
  // EC2's "p5.48xlarge", or SageMaker HyperPod's "ml.p5.48xlarge".
  static const std::regex kPattern("(ml\\.)?[a-z][a-z0-9-]*\\.[a-z0-9-]+");
  return text.size() <= 64 && std::regex_match(text, kPattern);
}

ResolvedInstanceType ResolveInstanceType(const std::optional<std::string>& flag,
                                         const std::optional<std::string>& file,
                                         const HostFiles& files) {
  if (flag) {
    if (!LooksLikeInstanceType(*flag))
      throw std::runtime_error("--instance-type '" + *flag + "' is not an instance type name");
    return {*flag, "--instance-type"};
  }
  if (file) {
    const auto text = files.ReadPath(*file, 16 * 1024);
    if (!text.content) throw std::runtime_error("--instance-type-file: " + text.error);
    std::string name = Trim(*text.content);
    if (name.starts_with("{")) {
      const core::Json document = core::Json::parse(name, nullptr, false);
      if (document.is_discarded() || !document.is_object() || !document.contains("instanceType") ||
          !document["instanceType"].is_string())
        throw std::runtime_error("--instance-type-file " + *file +
                                 ": JSON without a string \"instanceType\"");
      name = document["instanceType"].get<std::string>();
    }
    if (!LooksLikeInstanceType(name))
      throw std::runtime_error("--instance-type-file " + *file +
                               ": content is not an instance type name");
    return {name, *file};
  }
  const auto vendor = files.Read("/sys/devices/virtual/dmi/id/sys_vendor", 256);
  const auto product = files.Read("/sys/devices/virtual/dmi/id/product_name", 256);
  if (vendor.content && Trim(*vendor.content) == "Amazon EC2" && product.content) {
    const std::string name = Trim(*product.content);
    if (LooksLikeInstanceType(name)) return {name, "DMI product name"};
  }
  return {std::nullopt, "not given, and no EC2 DMI product name under the host root"};
}

ResolvedInstanceType InstanceTypeFromNode(const core::Json& node) {
  const std::string label(core::kInstanceTypeLabel);
  const std::string source = "Node label " + label;
  if (!node.is_object() || !node.contains("metadata") || !node["metadata"].is_object())
    return {std::nullopt, source + ": not a Node object"};
  const core::Json& metadata = node["metadata"];
  if (!metadata.contains("labels") || !metadata["labels"].is_object() ||
      !metadata["labels"].contains(label))
    return {std::nullopt, source + ": not set"};
  const core::Json& value = metadata["labels"][label];
  if (!value.is_string() || !LooksLikeInstanceType(value.get<std::string>()))
    return {std::nullopt, source + ": '" +
                              (value.is_string() ? value.get<std::string>() : value.dump()) +
                              "' is not an instance type name"};
  return {value.get<std::string>(), source};
}

}  // namespace ncclguard::probes
