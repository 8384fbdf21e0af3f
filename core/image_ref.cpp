#include "core/image_ref.h"

#include <algorithm>

#include "core/errors.h"

namespace ncclguard::core {
namespace {

// The grammar's bounds (distribution/reference): a name of at most 255 characters, a tag of at
// most 128. A reference past them is refused before it is looked at further.
constexpr std::size_t kMaxName = 255;
constexpr std::size_t kMaxTag = 128;
constexpr std::size_t kMaxReference = kMaxName + 1 + kMaxTag + 1 + 7 + 64;
constexpr std::string_view kSha256 = "sha256:";

bool Lower(char c) { return c >= 'a' && c <= 'z'; }
bool Digit(char c) { return c >= '0' && c <= '9'; }
bool LowerAlnum(char c) { return Lower(c) || Digit(c); }
bool Word(char c) { return LowerAlnum(c) || (c >= 'A' && c <= 'Z') || c == '_'; }
bool Hex(char c) { return Digit(c) || (c >= 'a' && c <= 'f'); }

// [a-z0-9]+ ((\.|_|__|-+) [a-z0-9]+)*
bool PathComponent(std::string_view c) {
  if (c.empty() || !LowerAlnum(c.front()) || !LowerAlnum(c.back())) return false;
  for (std::size_t i = 0; i < c.size();) {
    if (LowerAlnum(c[i])) {
      ++i;
      continue;
    }
    std::size_t run = i;
    while (run < c.size() && !LowerAlnum(c[run])) ++run;
    const std::string_view separator = c.substr(i, run - i);
    const bool dashes = separator.find_first_not_of('-') == std::string_view::npos;
    if (separator != "." && separator != "_" && separator != "__" && !dashes) return false;
    i = run;
  }
  return true;
}

// A host name or [IPv6], then an optional :port.
bool Domain(std::string_view d) {
  std::string_view host = d;
  if (const auto colon = d.rfind(':'); colon != std::string_view::npos && d.back() != ']') {
    const std::string_view port = d.substr(colon + 1);
    if (port.empty() || port.size() > 5 || !std::all_of(port.begin(), port.end(), Digit))
      return false;
    host = d.substr(0, colon);
  }
  if (host.empty()) return false;
  if (host.front() == '[') {
    return host.size() > 2 && host.back() == ']' &&
           std::all_of(host.begin() + 1, host.end() - 1,
                       [](char c) { return Hex(c) || (c >= 'A' && c <= 'F') || c == ':'; });
  }
  return std::all_of(host.begin(), host.end(),
                     [](char c) {
                       return LowerAlnum(c) || (c >= 'A' && c <= 'Z') || c == '-' || c == '.';
                     }) &&
         host.front() != '-' && host.front() != '.' && host.back() != '-' && host.back() != '.';
}

// Whether the first component of a name is a registry: it has a '.' or a ':', is "localhost",
// or has an upper-case letter (which no path component may have), as the grammar decides.
bool LooksLikeDomain(std::string_view first) {
  return first.find_first_of(".:") != std::string_view::npos || first == "localhost" ||
         std::any_of(first.begin(), first.end(), [](char c) { return c >= 'A' && c <= 'Z'; });
}

std::string Quoted(std::string_view text) {
  constexpr std::size_t kShown = 80;
  std::string out = "\"";
  for (const char c : text.substr(0, kShown)) {
    out += static_cast<unsigned char>(c) < 0x20 || c == '"' ? '?' : c;
  }
  return out + (text.size() > kShown ? "...\"" : "\"");
}

std::string LowerCased(std::string_view text) {
  std::string out(text);
  for (char& c : out) {
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  }
  return out;
}

void CheckDigest(std::string_view image, std::string_view digest) {
  if (IsSha256Digest(digest)) return;
  const auto colon = digest.find(':');
  const std::string_view algorithm = colon == std::string_view::npos ? "" : digest.substr(0, colon);
  if (!algorithm.empty() && algorithm != "sha256") {
    throw InputError("image " + Quoted(image) + ": digest algorithm " + Quoted(algorithm) +
                     " is not sha256, the one ncclguard pins with");
  }
  throw InputError("image " + Quoted(image) +
                   ": the digest is not sha256: followed by 64 lower-case hex digits");
}

}  // namespace

bool IsSha256Digest(std::string_view digest) {
  if (digest.size() != kSha256.size() + 64 || digest.substr(0, kSha256.size()) != kSha256) {
    return false;
  }
  return std::all_of(digest.begin() + static_cast<std::ptrdiff_t>(kSha256.size()), digest.end(),
                     Hex);
}

ImageReference ParseImageReference(std::string_view image) {
  if (image.empty()) throw InputError("image reference is empty");
  if (image.size() > kMaxReference) {
    throw InputError("image " + Quoted(image) + ": longer than " + std::to_string(kMaxReference) +
                     " characters");
  }
  ImageReference ref;
  std::string_view rest = image;
  if (const auto at = rest.find('@'); at != std::string_view::npos) {
    const std::string_view digest = rest.substr(at + 1);
    CheckDigest(image, digest);
    ref.digest = std::string(digest);
    rest = rest.substr(0, at);
  }
  const auto last_slash = rest.rfind('/');
  if (const auto colon = rest.rfind(':');
      colon != std::string_view::npos &&
      (last_slash == std::string_view::npos || colon > last_slash)) {
    const std::string_view tag = rest.substr(colon + 1);
    if (tag.empty() || tag.size() > kMaxTag || !Word(tag.front()) ||
        !std::all_of(tag.begin(), tag.end(),
                     [](char c) { return Word(c) || c == '.' || c == '-'; })) {
      throw InputError("image " + Quoted(image) + ": tag " + Quoted(tag) +
                       " is not 1-128 letters, digits, '_', '.' or '-' (not starting with '.' "
                       "or '-')");
    }
    ref.tag = std::string(tag);
    rest = rest.substr(0, colon);
  }
  if (rest.empty()) throw InputError("image " + Quoted(image) + ": no repository name");
  if (rest.size() > kMaxName) {
    throw InputError("image " + Quoted(image) + ": the name is longer than " +
                     std::to_string(kMaxName) + " characters");
  }
  std::string_view path = rest;
  if (const auto slash = rest.find('/');
      slash != std::string_view::npos && LooksLikeDomain(rest.substr(0, slash))) {
    const std::string_view domain = rest.substr(0, slash);
    if (!Domain(domain)) {
      throw InputError("image " + Quoted(image) + ": registry " + Quoted(domain) +
                       " is not a host name with an optional :port");
    }
    ref.domain = std::string(domain);
    path = rest.substr(slash + 1);
  }
  std::size_t start = 0;
  while (true) {
    const auto end = path.find('/', start);
    const std::string_view component =
        path.substr(start, end == std::string_view::npos ? std::string_view::npos : end - start);
    if (!PathComponent(component)) {
      throw InputError("image " + Quoted(image) + ": path component " + Quoted(component) +
                       " is not lower-case letters and digits joined by '.', '_', '__' or '-'");
    }
    if (end == std::string_view::npos) break;
    start = end + 1;
  }
  ref.path = std::string(path);
  return ref;
}

std::optional<ImageReference> TryParseImageReference(std::string_view image) noexcept {
  try {
    return ParseImageReference(image);
  } catch (const std::exception&) {
    return std::nullopt;
  }
}

std::string ImageReference::Name() const { return domain.empty() ? path : domain + "/" + path; }

std::string ImageReference::Registry() const {
  const std::string lower = LowerCased(domain);
  return lower.empty() || lower == "index.docker.io" ? std::string("docker.io") : lower;
}

std::string ImageReference::Repository() const {
  const std::string registry = Registry();
  if (registry == "docker.io" && path.find('/') == std::string::npos) {
    return registry + "/library/" + path;
  }
  return registry + "/" + path;
}

std::string ImageReference::WithoutDigest() const {
  return tag.empty() ? Name() : Name() + ":" + tag;
}

std::string ImageReference::PinnedTo(std::string_view sha256_digest) const {
  return WithoutDigest() + "@" + std::string(sha256_digest);
}

std::optional<ImageId> ParseImageId(std::string_view image_id) noexcept {
  constexpr std::string_view kPullable = "docker-pullable://";
  if (image_id.substr(0, kPullable.size()) == kPullable) image_id.remove_prefix(kPullable.size());
  const auto at = image_id.find('@');
  if (at == std::string_view::npos || at == 0) return std::nullopt;
  const auto ref = TryParseImageReference(image_id);
  if (!ref || ref->digest.empty() || !ref->tag.empty()) return std::nullopt;
  try {
    return ImageId{ref->Repository(), ref->digest};
  } catch (const std::exception&) {
    return std::nullopt;
  }
}

}  // namespace ncclguard::core
