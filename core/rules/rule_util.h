#pragma once

#include <algorithm>
#include <cctype>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/rule.h"

namespace ncclguard::core::rules {

// The JSON Pointer of env entry `index` of a container.
inline JsonPointer EnvPath(const Container& c, std::size_t index) { return c.at / "env" / index; }

// Calls fn(container, value, path) for each container whose env sets `name` to a literal value.
template <typename Fn>
void ForEachLiteralEnv(const TemplateFacts& facts, std::string_view name, Fn&& fn) {
  for (const Container& c : facts.containers) {
    const auto env = c.Env(name);
    if (env && env->value) fn(c, *env->value, EnvPath(c, env->index));
  }
}

// Splits on `separator`, keeping empty pieces (they are errors in NCCL lists).
std::vector<std::string> Split(std::string_view text, char separator);

bool EqualsIgnoreCase(std::string_view a, std::string_view b);

// NCCL_ALGO / NCCL_PROTO syntax: "[list][;collective:list]...", a list being an optional '^' then
// comma-separated names (compared case-insensitively; an empty name is malformed).
// Returns the first name that is not in `known`.
std::optional<std::string> FirstUnknownNcclName(std::string_view value,
                                                std::span<const std::string_view> known);

// `"name"` in messages; containers without a name are described by index.
std::string ContainerLabel(const Container& c);

// A GPU container whose env the rules may complete (no envFrom, which may set anything) that runs
// distributed training: in a multi-pod job, using EFA, or with MASTER_ADDR or WORLD_SIZE.
bool DistributedTrainingContainer(const TemplateContext& ctx, const Container& c);

}  // namespace ncclguard::core::rules
