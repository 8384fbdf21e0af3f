#pragma once

#include <span>
#include <string>
#include <string_view>

namespace ncclguard::core {

struct GuideSection {
  int number;
  std::string_view slug;
  std::string_view title;
};

// The sections of docs/guide.md, in order (docs/contract.md: slugs are a public contract).
std::span<const GuideSection> GuideSections();

bool IsGuideSlug(std::string_view slug);

// `<base>#<slug>`; a trailing '#' or '/' on the base is tolerated.
std::string GuideLink(std::string_view base_url, std::string_view slug);

inline constexpr std::string_view kDefaultGuideBaseUrl =
    "https://github.com/ncclguard/ncclguard/blob/main/docs/guide.md";

}  // namespace ncclguard::core
