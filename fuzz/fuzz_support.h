// What every harness shares: a property violation is a finding (printed, then abort(), which
// libFuzzer reports and saves as a crash input like any other).
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <string>
#include <string_view>

#include "core/guide.h"
#include "core/json.h"

namespace ncclguard::fuzz {

// For readers fed in pieces (the informer's watch stream, the pod-log reader): the first byte
// picks a chunk size of 1 to 64, the rest is the input, which the harness runs whole and split
// into such chunks, and compares.
struct SplitInput {
  std::size_t chunk;
  std::string_view bytes;
};
inline std::optional<SplitInput> SplitInputOf(const std::uint8_t* data, std::size_t size) {
  if (size < 1) return std::nullopt;
  return SplitInput{1 + static_cast<std::size_t>(data[0] % 64),
                    std::string_view(reinterpret_cast<const char*>(data) + 1, size - 1)};
}

[[noreturn]] inline void Fail(const std::string& property, const std::string& detail = "") {
  std::fprintf(stderr, "\nPROPERTY VIOLATED: %s\n%s\n", property.c_str(), detail.c_str());
  std::abort();
}

inline void Require(bool holds, const std::string& property, const std::string& detail = "") {
  if (!holds) Fail(property, detail);
}

// What handling one input allocated at its peak grows at most linearly with the input: a JSON
// value costs ~64 bytes of tree for its 2 bytes of text (an empty list), a fix a few KiB per
// container, and the answer repeats the object once.
inline void RequireMemoryBoundedBySize(std::size_t peak, std::size_t input, std::string_view what) {
  constexpr std::size_t kPerInputByte = 256;
  constexpr std::size_t kFixed = std::size_t{8} << 20;
  Require(peak <= kPerInputByte * input + kFixed, "memory is bounded by the input's size",
          std::string(what) + ": " + std::to_string(peak) + " bytes at the peak for " +
              std::to_string(input) + " bytes of input");
}

// Equality where NaN equals NaN (YAML's .nan reads back as a NaN, which == never matches).
inline bool SameJson(const core::Json& a, const core::Json& b) {
  if (a.is_number_float() && b.is_number_float()) {
    const double x = a.get<double>();
    const double y = b.get<double>();
    return (std::isnan(x) && std::isnan(y)) || x == y;
  }
  if (a.type() != b.type()) return a == b;  // integer vs unsigned compare by value
  if (a.is_object()) {
    if (a.size() != b.size()) return false;
    auto ai = a.begin();
    for (auto bi = b.begin(); bi != b.end(); ++ai, ++bi) {
      if (ai.key() != bi.key() || !SameJson(*ai, *bi)) return false;
    }
    return true;
  }
  if (a.is_array()) {
    if (a.size() != b.size()) return false;
    for (std::size_t i = 0; i < a.size(); ++i) {
      if (!SameJson(a[i], b[i])) return false;
    }
    return true;
  }
  return a == b;
}

// "<base>#<slug>" naming a section docs/guide.md has.
inline bool GuideLinkExists(std::string_view link) {
  const std::size_t hash = link.rfind('#');
  return hash != std::string_view::npos && core::IsGuideSlug(link.substr(hash + 1));
}

// Every guide link ("...guide.md#slug") in `text` names an existing section. A link whose text
// also stands in `input` may be the user's own words quoted back (an env value, say): skipped.
inline void RequireGuideLinksExist(std::string_view text, const std::string& where,
                                   std::string_view input = {}) {
  constexpr std::string_view kMarker = "guide.md#";
  for (std::size_t at = text.find(kMarker); at != std::string_view::npos;
       at = text.find(kMarker, at + 1)) {
    std::size_t end = at + kMarker.size();
    while (end < text.size() && (std::isalnum(static_cast<unsigned char>(text[end])) ||
                                 text[end] == '-' || text[end] == '_')) {
      ++end;
    }
    const std::string_view slug = text.substr(at + kMarker.size(), end - at - kMarker.size());
    if (input.find(text.substr(at, end - at)) != std::string_view::npos) continue;
    Require(core::IsGuideSlug(slug), "every guide link names an existing section",
            where + ": " + std::string(slug));
  }
}

}  // namespace ncclguard::fuzz
