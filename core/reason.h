// Condition and Event reasons. Kubernetes wants them UpperCamelCase (metav1.Condition validates
// `^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$`, at most 1024 characters); ncclguard's ids are
// kebab-case. A diagnosis' reason is its id in UpperCamelCase; the id itself stays in the message
// and in the ncclguard.io/diagnosis annotation of its Event (core/contract.h).
#pragma once

#include <string>
#include <string_view>

namespace ncclguard::core {

// "container-oom-killed" -> "ContainerOOMKilled", "insufficient-validated-nodes" ->
// "InsufficientValidatedNodes". Each word is capitalised, or spelled as the acronym table says
// (OOM, EFA, GPU, NCCL, ...); every character outside [A-Za-z0-9] separates words. Total: any
// input yields a valid reason ("Unknown" when it has no letter or digit; "R" is prefixed to one
// that would start with a digit).
std::string ReasonFromId(std::string_view id);

// Whether `reason` is a valid metav1.Condition reason.
bool IsValidReason(std::string_view reason);

}  // namespace ncclguard::core
