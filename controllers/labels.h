#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "core/json.h"

namespace ncclguard::controllers {

using core::Json;

// The cluster contract (RULES.md "Labels, annotations, conditions and objects").
inline constexpr std::string_view kNamespaceEnabledLabel = "ncclguard.io/enabled";
inline constexpr std::string_view kManagedLabel = "ncclguard.io/managed";
inline constexpr std::string_view kGateAnnotation = "ncclguard.io/gate";
inline constexpr std::string_view kGatePending = "pending";
inline constexpr std::string_view kGateAdmitted = "admitted";
// Set by the controller on the Services it creates.
inline constexpr std::string_view kManagedByLabel = "app.kubernetes.io/managed-by";
inline constexpr std::string_view kManagedByValue = "ncclguard";
inline constexpr std::string_view kMasterAddrAnnotation = "ncclguard.io/master-addr";

std::optional<std::string> Label(const Json& object, std::string_view key);
std::optional<std::string> Annotation(const Json& object, std::string_view key);
// metadata.<field> as a string, "" when absent.
std::string Meta(const Json& object, std::string_view field);

}  // namespace ncclguard::controllers
