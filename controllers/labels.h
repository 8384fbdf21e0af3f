#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "core/json.h"
#include "core/placement.h"

namespace ncclguard::controllers {

using core::Json;

// The ncclguard.io names are core/contract.h's. Set by the controller on the Services it creates:
inline constexpr std::string_view kManagedByLabel = "app.kubernetes.io/managed-by";
inline constexpr std::string_view kManagedByValue = "ncclguard";
// Set by Kubeflow's training and MPI operators on a job's pods: the pod's replica type, lower-cased
// ("master", "worker", "launcher").
inline constexpr std::string_view kReplicaTypeLabel = core::kReplicaTypeLabel;

std::optional<std::string> Label(const Json& object, std::string_view key);
std::optional<std::string> Annotation(const Json& object, std::string_view key);
// metadata.<field> as a string, "" when absent.
std::string Meta(const Json& object, std::string_view field);

}  // namespace ncclguard::controllers
