#include "webhook/digest_resolver.h"

#include <curl/curl.h>
#include <openssl/evp.h>

#include <algorithm>
#include <array>
#include <future>
#include <utility>

#include "core/base64.h"
#include "core/errors.h"
#include "core/json_reader.h"
#include "log/log.h"
#include "webhook/admission_review.h"

namespace ncclguard::webhook {
namespace {

using Clock = std::chrono::steady_clock;

constexpr std::size_t kMaxManifestBytes = 4 * 1024 * 1024;  // what the GET fallback hashes
constexpr std::size_t kMaxTokenAnswerBytes = 64 * 1024;
constexpr std::size_t kMaxHeaderBytes = 64 * 1024;  // all header lines of one answer
constexpr std::size_t kIdleHandles = 8;
// The four manifest types a tag may name; the index and list first, as a runtime asks, so that
// a multi-platform tag resolves to the digest of its index, the one a pod pinned to it pulls.
constexpr const char* kAccept =
    "Accept: application/vnd.oci.image.index.v1+json, "
    "application/vnd.oci.image.manifest.v1+json, "
    "application/vnd.docker.distribution.manifest.list.v2+json, "
    "application/vnd.docker.distribution.manifest.v2+json";

char LowerChar(char c) { return c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c; }

std::string Lower(std::string_view text) {
  std::string out(text);
  std::transform(out.begin(), out.end(), out.begin(), LowerChar);
  return out;
}

bool StartsWithNoCase(std::string_view text, std::string_view prefix) {
  return text.size() >= prefix.size() && Lower(text.substr(0, prefix.size())) == prefix;
}

// A name from the input, safe to put in a message: no control characters, at most 80 shown.
std::string Quoted(std::string_view text) {
  constexpr std::size_t kShown = 80;
  std::string out = "\"";
  for (const char c : text.substr(0, kShown)) {
    const auto byte = static_cast<unsigned char>(c);
    out += byte < 0x20 || byte == 0x7f || c == '"' ? '?' : c;
  }
  return out + (text.size() > kShown ? "...\"" : "\"");
}

// host, host:port or [v6]:port, as NormaliseRegistry leaves it.
bool IsHostPort(std::string_view text) {
  return !text.empty() && text.size() <= 255 && std::all_of(text.begin(), text.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '.' || c == '-' || c == ':' ||
           c == '[' || c == ']' || c == '_';
  });
}

std::string Sha256Hex(std::string_view bytes) {
  std::array<unsigned char, EVP_MAX_MD_SIZE> digest{};
  unsigned int length = 0;
  if (EVP_Digest(bytes.data(), bytes.size(), digest.data(), &length, EVP_sha256(), nullptr) != 1) {
    throw std::runtime_error("SHA-256 failed");
  }
  static constexpr char kHex[] = "0123456789abcdef";
  std::string hex;
  for (unsigned int i = 0; i < length; ++i) {
    hex += kHex[digest[i] >> 4];
    hex += kHex[digest[i] & 0xf];
  }
  return hex;
}

// RFC 7230's tchar: what a scheme or parameter name is made of.
bool IsTokenChar(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
         std::string_view("!#$%&'*+-.^_`|~").find(c) != std::string_view::npos;
}

bool IsToken68Char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
         std::string_view("-._~+/").find(c) != std::string_view::npos;
}

class ChallengeReader {
 public:
  explicit ChallengeReader(std::string_view text) : text_(text) {}

  std::optional<std::vector<AuthChallenge>> Read() {
    std::vector<AuthChallenge> challenges;
    while (true) {
      while (at_ < text_.size() && (IsSpace(text_[at_]) || text_[at_] == ',')) ++at_;
      if (at_ == text_.size()) return challenges;
      if (ParamAt(at_)) {
        if (challenges.empty() || !ReadParam(challenges.back())) return std::nullopt;
      } else {
        const std::size_t start = at_;
        while (at_ < text_.size() && IsTokenChar(text_[at_])) ++at_;
        if (at_ == start) return std::nullopt;
        challenges.push_back({Lower(text_.substr(start, at_ - start)), {}, {}});
        const std::size_t name_end = at_;
        SkipSpace();
        if (at_ == text_.size() || text_[at_] == ',') continue;
        if (at_ == name_end) return std::nullopt;  // no space after the scheme
        if (!ParamAt(at_) && !ReadToken68(challenges.back())) return std::nullopt;
      }
    }
  }

 private:
  static bool IsSpace(char c) { return c == ' ' || c == '\t'; }
  void SkipSpace() {
    while (at_ < text_.size() && IsSpace(text_[at_])) ++at_;
  }

  // Whether text_[at] starts `name = value` (not a token68 such as "abc==").
  bool ParamAt(std::size_t at) const {
    const std::size_t start = at;
    while (at < text_.size() && IsTokenChar(text_[at])) ++at;
    if (at == start) return false;
    while (at < text_.size() && IsSpace(text_[at])) ++at;
    if (at == text_.size() || text_[at] != '=') return false;
    ++at;
    while (at < text_.size() && IsSpace(text_[at])) ++at;
    return at < text_.size() && (text_[at] == '"' || IsTokenChar(text_[at]));
  }

  // After it, only the end or a ',' may follow.
  bool AtEndOfElement() {
    SkipSpace();
    return at_ == text_.size() || text_[at_] == ',';
  }

  bool ReadParam(AuthChallenge& challenge) {
    const std::size_t start = at_;
    while (at_ < text_.size() && IsTokenChar(text_[at_])) ++at_;
    std::string name = Lower(text_.substr(start, at_ - start));
    SkipSpace();
    ++at_;  // '=', as ParamAt saw
    SkipSpace();
    std::string value;
    if (text_[at_] == '"') {
      ++at_;
      while (true) {
        if (at_ == text_.size()) return false;  // unterminated
        const char c = text_[at_++];
        if (c == '"') break;
        if (c == '\\') {
          if (at_ == text_.size()) return false;
          value += text_[at_++];
        } else {
          value += c;
        }
      }
    } else {
      const std::size_t value_start = at_;
      while (at_ < text_.size() && IsTokenChar(text_[at_])) ++at_;
      value = std::string(text_.substr(value_start, at_ - value_start));
    }
    challenge.params.emplace(std::move(name), std::move(value));  // the first of a name counts
    return AtEndOfElement();
  }

  bool ReadToken68(AuthChallenge& challenge) {
    const std::size_t start = at_;
    while (at_ < text_.size() && IsToken68Char(text_[at_])) ++at_;
    if (at_ == start) return false;
    while (at_ < text_.size() && text_[at_] == '=') ++at_;
    challenge.token68 = std::string(text_.substr(start, at_ - start));
    return AtEndOfElement();
  }

  std::string_view text_;
  std::size_t at_ = 0;
};

void InitCurlOnce() {
  static std::once_flag once;
  std::call_once(once, [] { curl_global_init(CURL_GLOBAL_DEFAULT); });
}

// One HTTP exchange's answer: only what resolution reads of it, each part bounded.
struct Answer {
  CURLcode code = CURLE_OK;
  long status = 0;
  std::string error;  // libcurl's error buffer
  std::string digest_header;
  std::string challenges;  // the WWW-Authenticate lines, joined with ", "
  std::string body;
  std::size_t max_body = 0;
  std::size_t header_bytes = 0;
  bool overflow = false;  // headers or body past their bound: the transfer was cut
  std::string overflow_what;
};

std::size_t OnHeader(char* data, std::size_t size, std::size_t count, void* raw) {
  auto* answer = static_cast<Answer*>(raw);
  const std::size_t bytes = size * count;
  answer->header_bytes += bytes;
  if (answer->header_bytes > kMaxHeaderBytes) {
    answer->overflow = true;
    answer->overflow_what = "headers past " + std::to_string(kMaxHeaderBytes) + " bytes";
    return 0;
  }
  std::string_view line(data, bytes);
  while (!line.empty() && (line.back() == '\n' || line.back() == '\r')) line.remove_suffix(1);
  if (line.starts_with("HTTP/")) {  // a new answer (after a 100 Continue): forget the last one's
    answer->digest_header.clear();
    answer->challenges.clear();
    return bytes;
  }
  const auto colon = line.find(':');
  if (colon == std::string_view::npos) return bytes;
  const std::string name = Lower(line.substr(0, colon));
  std::string_view value = line.substr(colon + 1);
  while (!value.empty() && (value.front() == ' ' || value.front() == '\t')) value.remove_prefix(1);
  while (!value.empty() && (value.back() == ' ' || value.back() == '\t')) value.remove_suffix(1);
  if (name == "docker-content-digest") {
    answer->digest_header = std::string(value);
  } else if (name == "www-authenticate") {
    if (!answer->challenges.empty()) answer->challenges += ", ";
    answer->challenges += value;
  }
  return bytes;
}

std::size_t OnBody(char* data, std::size_t size, std::size_t count, void* raw) {
  auto* answer = static_cast<Answer*>(raw);
  const std::size_t bytes = size * count;
  if (answer->body.size() + bytes > answer->max_body) {
    answer->overflow = true;
    answer->overflow_what = "a body past " + std::to_string(answer->max_body) + " bytes";
    return 0;
  }
  answer->body.append(data, bytes);
  return bytes;
}

struct Request {
  bool head = true;
  std::string url;
  bool plain_http = false;  // the URL is http:// (and its host listed)
  std::string authorization;
  bool accept_manifests = false;
  std::size_t max_body = 0;
};

// How a request was authorized, for a message: the scheme, never the value.
std::string Authorized(const Request& request) {
  if (request.authorization.empty()) return "";
  return " (" + request.authorization.substr(0, request.authorization.find(' ')) + ")";
}

std::string Describe(const Request& request) {
  return std::string(request.head ? "HEAD " : "GET ") + request.url;
}

// A credential's identity for the cache key: the same user and password give the same key, and
// the key says nothing of either.
std::string CredentialKey(const RegistryCredential* credential) {
  if (credential == nullptr) return "anonymous";
  std::string material = credential->registry;
  material += '\0';
  material += credential->username;
  material += '\0';
  material += credential->password;
  return Sha256Hex(material).substr(0, 32);
}

Resolution Fail(ResolveStatus status, std::string why) {
  return Resolution{status, "", std::move(why), false};
}

// The status of a transfer that ended without an HTTP answer.
Resolution TransportFailure(const Request& request, const Answer& answer) {
  const std::string what = Describe(request) + ": ";
  if (answer.overflow) return Fail(ResolveStatus::BadAnswer, what + answer.overflow_what);
  const std::string detail = answer.error.empty() ? curl_easy_strerror(answer.code) : answer.error;
  switch (answer.code) {
    case CURLE_OPERATION_TIMEDOUT:
      return Fail(ResolveStatus::TimedOut, what + "no answer within the budget (" + detail + ")");
    case CURLE_GOT_NOTHING:
    case CURLE_WEIRD_SERVER_REPLY:
    case CURLE_HTTP2:
    case CURLE_HTTP2_STREAM:
    case CURLE_PARTIAL_FILE:
    case CURLE_BAD_CONTENT_ENCODING:
      return Fail(ResolveStatus::BadAnswer, what + detail);
    default:
      return Fail(ResolveStatus::Unreachable, what + detail);
  }
}

// The parts of an absolute URL that resolution checks: its scheme and host[:port].
struct UrlParts {
  bool https = false;
  std::string authority;
};
std::optional<UrlParts> ParseUrl(std::string_view url) {
  UrlParts parts;
  std::string_view rest;
  if (StartsWithNoCase(url, "https://")) {
    parts.https = true;
    rest = url.substr(8);
  } else if (StartsWithNoCase(url, "http://")) {
    rest = url.substr(7);
  } else {
    return std::nullopt;
  }
  if (!std::all_of(url.begin(), url.end(), [](char c) { return c > 0x20 && c < 0x7f; })) {
    return std::nullopt;
  }
  parts.authority = Lower(rest.substr(0, rest.find_first_of("/?#")));
  if (!IsHostPort(parts.authority)) return std::nullopt;  // userinfo ('@') included
  return parts;
}

// The tag's HTTP exchanges, within one deadline, on one libcurl handle.
class Exchange {
 public:
  Exchange(CURL* handle, const DigestResolverOptions& options, Clock::time_point deadline)
      : handle_(handle), options_(options), deadline_(deadline) {}

  bool IsPlainHttp(std::string_view authority) const {
    const std::string host = NormaliseRegistry(authority);
    return std::any_of(
        options_.plain_http_registries.begin(), options_.plain_http_registries.end(),
        [&host](const std::string& listed) { return NormaliseRegistry(listed) == host; });
  }

  // Sends the request; false (and `answer` says why) when no HTTP answer came back.
  bool Perform(const Request& request, Answer& answer) {
    answer.max_body = request.max_body;
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline_ - Clock::now()).count();
    if (left <= 0) {
      answer.code = CURLE_OPERATION_TIMEDOUT;
      answer.error = "the budget was spent before this request";
      return false;
    }
    curl_easy_reset(handle_);
    std::array<char, CURL_ERROR_SIZE> error{};
    curl_slist* headers = nullptr;
    if (request.accept_manifests) headers = curl_slist_append(headers, kAccept);
    if (!request.authorization.empty()) {
      headers = curl_slist_append(headers, ("Authorization: " + request.authorization).c_str());
    }
    curl_easy_setopt(handle_, CURLOPT_URL, request.url.c_str());
    curl_easy_setopt(handle_, CURLOPT_PROTOCOLS_STR, request.plain_http ? "http" : "https");
    curl_easy_setopt(handle_, CURLOPT_FOLLOWLOCATION, 0L);
    curl_easy_setopt(handle_, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(handle_, CURLOPT_TIMEOUT_MS, static_cast<long>(left));
    curl_easy_setopt(handle_, CURLOPT_CONNECTTIMEOUT_MS, static_cast<long>(left));
    curl_easy_setopt(handle_, CURLOPT_SSLVERSION, static_cast<long>(CURL_SSLVERSION_TLSv1_2));
    curl_easy_setopt(handle_, CURLOPT_SSL_VERIFYPEER, 1L);
    curl_easy_setopt(handle_, CURLOPT_SSL_VERIFYHOST, 2L);
    if (!options_.ca_file.empty())
      curl_easy_setopt(handle_, CURLOPT_CAINFO, options_.ca_file.c_str());
    curl_easy_setopt(handle_, CURLOPT_USERAGENT, "ncclguard");
    curl_easy_setopt(handle_, CURLOPT_HTTPHEADER, headers);
    curl_easy_setopt(handle_, CURLOPT_ERRORBUFFER, error.data());
    curl_easy_setopt(handle_, CURLOPT_HEADERFUNCTION, OnHeader);
    curl_easy_setopt(handle_, CURLOPT_HEADERDATA, &answer);
    curl_easy_setopt(handle_, CURLOPT_WRITEFUNCTION, OnBody);
    curl_easy_setopt(handle_, CURLOPT_WRITEDATA, &answer);
    if (request.head) {
      curl_easy_setopt(handle_, CURLOPT_NOBODY, 1L);
    } else {
      curl_easy_setopt(handle_, CURLOPT_HTTPGET, 1L);
    }
    answer.code = curl_easy_perform(handle_);
    curl_easy_getinfo(handle_, CURLINFO_RESPONSE_CODE, &answer.status);
    // The header list holds the Authorization line: forget it on this handle before freeing it.
    curl_easy_setopt(handle_, CURLOPT_HTTPHEADER, nullptr);
    curl_easy_setopt(handle_, CURLOPT_ERRORBUFFER, nullptr);
    curl_slist_free_all(headers);
    answer.error = error.data();
    return answer.code == CURLE_OK && !answer.overflow;
  }

  Resolution Resolve(const std::string& registry, const std::string& repository,
                     const std::string& tag, const RegistryCredential* credential) {
    const std::string host = registry == "docker.io" ? "registry-1.docker.io" : registry;
    Request manifest;
    manifest.plain_http = IsPlainHttp(registry);
    manifest.url = std::string(manifest.plain_http ? "http://" : "https://") + host + "/v2/" +
                   repository + "/manifests/" + tag;
    manifest.accept_manifests = true;
    Answer answer;
    if (!Perform(manifest, answer)) return TransportFailure(manifest, answer);
    if (answer.status == 401) {
      if (auto refused = Authorize(answer.challenges, manifest, repository, credential)) {
        return *refused;
      }
      answer = Answer{};
      if (!Perform(manifest, answer)) return TransportFailure(manifest, answer);
      if (answer.status == 401) {
        return Fail(ResolveStatus::Unauthorized,
                    Describe(manifest) + ": 401 with " +
                        (credential ? "the credential for " + registry : "an anonymous token"));
      }
    }
    return ReadManifestAnswer(manifest, answer);
  }

 private:
  // Answers a 401's challenge: sets manifest.authorization for the retry, or returns why it
  // cannot.
  std::optional<Resolution> Authorize(const std::string& challenge_text, Request& manifest,
                                      const std::string& repository,
                                      const RegistryCredential* credential) {
    const auto challenges = ParseChallenge(challenge_text);
    if (!challenges || challenges->empty()) {
      return Fail(
          ResolveStatus::BadAnswer,
          Describe(manifest) + ": 401 without a WWW-Authenticate challenge ncclguard reads");
    }
    const auto find = [&](std::string_view scheme) {
      return std::find_if(challenges->begin(), challenges->end(),
                          [scheme](const AuthChallenge& c) { return c.scheme == scheme; });
    };
    if (const auto bearer = find("bearer"); bearer != challenges->end()) {
      return FetchToken(*bearer, manifest, repository, credential);
    }
    if (find("basic") != challenges->end()) {
      if (credential == nullptr) {
        return Fail(ResolveStatus::Unauthorized,
                    Describe(manifest) + ": 401, Basic credentials asked and none given for it");
      }
      manifest.authorization =
          "Basic " + Base64Encode(credential->username + ":" + credential->password);
      return std::nullopt;
    }
    return Fail(ResolveStatus::Unauthorized, Describe(manifest) + ": 401 asking for " +
                                                 Quoted(challenges->front().scheme) +
                                                 ", which ncclguard does not answer");
  }

  // The Docker token protocol: GET realm?service=...&scope=repository:<path>:pull, with the
  // credential as Basic when there is one, for {"token"} or {"access_token"}.
  std::optional<Resolution> FetchToken(const AuthChallenge& bearer, Request& manifest,
                                       const std::string& repository,
                                       const RegistryCredential* credential) {
    const auto realm_at = bearer.params.find("realm");
    const std::string realm = realm_at == bearer.params.end() ? "" : realm_at->second;
    const auto realm_url = ParseUrl(realm);
    if (!realm_url) {
      return Fail(ResolveStatus::BadAnswer, Describe(manifest) + ": Bearer challenge's realm " +
                                                Quoted(realm) + " is not an http(s) URL");
    }
    Request token;
    token.head = false;
    token.plain_http = !realm_url->https;
    token.max_body = kMaxTokenAnswerBytes;
    if (token.plain_http && !IsPlainHttp(realm_url->authority)) {
      return Fail(ResolveStatus::BadAnswer,
                  Describe(manifest) + ": the token realm " + Quoted(realm) +
                      " is plain http and its host is not one of plain_http_registries: not "
                      "asked");
    }
    const auto escape = [this](const std::string& text) {
      char* escaped = curl_easy_escape(handle_, text.c_str(), static_cast<int>(text.size()));
      std::string out = escaped == nullptr ? "" : escaped;
      curl_free(escaped);
      return out;
    };
    token.url = realm + (realm.find('?') == std::string::npos ? "?" : "&");
    if (const auto service = bearer.params.find("service"); service != bearer.params.end()) {
      token.url += "service=" + escape(service->second) + "&";
    }
    token.url += "scope=" + escape("repository:" + repository + ":pull");
    if (credential != nullptr) {
      token.authorization =
          "Basic " + Base64Encode(credential->username + ":" + credential->password);
    }
    Answer answer;
    if (!Perform(token, answer)) return TransportFailure(token, answer);
    const std::string who =
        credential ? "the credential for " + credential->registry : std::string("anonymous access");
    if (answer.status == 401 || answer.status == 403) {
      return Fail(ResolveStatus::Unauthorized,
                  Describe(token) + ": " + std::to_string(answer.status) + ", refusing " + who);
    }
    if (answer.status != 200) {
      return Fail(ResolveStatus::BadAnswer,
                  Describe(token) + ": HTTP " + std::to_string(answer.status));
    }
    std::string value;
    try {
      const core::Json body = core::ReadJson(answer.body, {.max_depth = 8});
      for (const char* name : {"token", "access_token"}) {
        if (const auto it = body.find(name);
            body.is_object() && it != body.end() && it->is_string() && value.empty()) {
          value = it->get<std::string>();
        }
      }
    } catch (const core::InputError& e) {
      return Fail(ResolveStatus::BadAnswer, Describe(token) + ": the answer is " + e.what());
    }
    // It goes into a header line: printable ASCII only, no spaces.
    if (value.empty() ||
        !std::all_of(value.begin(), value.end(), [](char c) { return c > 0x20 && c < 0x7f; })) {
      return Fail(ResolveStatus::BadAnswer,
                  Describe(token) + ": no token or access_token of printable characters");
    }
    manifest.authorization = "Bearer " + value;
    return std::nullopt;
  }

  Resolution ReadManifestAnswer(Request& manifest, Answer& answer) {
    switch (answer.status) {
      case 200:
        break;
      case 404:
        return Fail(ResolveStatus::NotFound,
                    Describe(manifest) + ": 404 (no such tag, or no such repository)");
      case 401:
      case 403:
        return Fail(ResolveStatus::Unauthorized,
                    Describe(manifest) + ": " + std::to_string(answer.status));
      default:
        return Fail(ResolveStatus::BadAnswer,
                    Describe(manifest) + ": HTTP " + std::to_string(answer.status));
    }
    if (!answer.digest_header.empty()) {
      if (!core::IsSha256Digest(answer.digest_header)) {
        return Fail(ResolveStatus::BadAnswer, Describe(manifest) + ": Docker-Content-Digest " +
                                                  Quoted(answer.digest_header) +
                                                  " is not sha256:<64 hex>");
      }
      return Resolution{ResolveStatus::Resolved, answer.digest_header,
                        Describe(manifest) + ": 200" + Authorized(manifest), false};
    }
    // No digest header: the digest is the hash of the manifest's bytes, as the registry stores
    // them.
    manifest.head = false;
    manifest.max_body = kMaxManifestBytes;
    answer = Answer{};
    if (!Perform(manifest, answer)) return TransportFailure(manifest, answer);
    if (answer.status != 200) {
      return Fail(ResolveStatus::BadAnswer, Describe(manifest) + ": HTTP " +
                                                std::to_string(answer.status) +
                                                " after a HEAD without Docker-Content-Digest");
    }
    const std::string digest = "sha256:" + Sha256Hex(answer.body);
    if (!answer.digest_header.empty() && answer.digest_header != digest) {
      return Fail(ResolveStatus::BadAnswer,
                  Describe(manifest) + ": Docker-Content-Digest " + Quoted(answer.digest_header) +
                      " is not the SHA-256 of the manifest (" + digest + ")");
    }
    return Resolution{ResolveStatus::Resolved, digest,
                      Describe(manifest) + ": 200" + Authorized(manifest) +
                          ", the manifest hashed (no Docker-Content-Digest)",
                      false};
  }

  CURL* handle_;
  const DigestResolverOptions& options_;
  Clock::time_point deadline_;
};

}  // namespace

std::string NormaliseRegistry(std::string_view key) {
  while (!key.empty() && (key.front() == ' ' || key.front() == '\t')) key.remove_prefix(1);
  while (!key.empty() && (key.back() == ' ' || key.back() == '\t')) key.remove_suffix(1);
  if (StartsWithNoCase(key, "https://")) {
    key.remove_prefix(8);
  } else if (StartsWithNoCase(key, "http://")) {
    key.remove_prefix(7);
  }
  std::string host = Lower(key.substr(0, key.find('/')));
  if (host == "index.docker.io" || host == "registry-1.docker.io") host = "docker.io";
  return host;
}

std::vector<RegistryCredential> ReadDockerConfig(std::string_view bytes) {
  if (bytes.size() > kMaxDockerConfigBytes) {
    throw core::InputError("docker config: " + std::to_string(bytes.size()) +
                           " bytes, more than the " + std::to_string(kMaxDockerConfigBytes) +
                           " ncclguard reads");
  }
  core::Json document;
  try {
    document = core::ReadJson(bytes, {.max_depth = 8});
  } catch (const core::JsonReadError& e) {
    throw core::InputError(std::string("docker config: ") + e.what());
  }
  if (!document.is_object()) throw core::InputError("docker config: not a JSON object");
  // .dockerconfigjson keeps the registries under "auths"; the older .dockercfg at the top.
  const core::Json* registries = &document;
  std::string where = "docker config: ";
  if (const auto auths = document.find("auths"); auths != document.end()) {
    if (!auths->is_object()) throw core::InputError("docker config: auths is not an object");
    registries = &*auths;
    where += "auths.";
  }
  if (registries->size() > kMaxDockerConfigRegistries) {
    throw core::InputError(std::string("docker config: ") + std::to_string(registries->size()) +
                           " registries, more than the " +
                           std::to_string(kMaxDockerConfigRegistries) + " ncclguard reads");
  }
  std::vector<RegistryCredential> credentials;
  for (const auto& [key, entry] : registries->items()) {
    const std::string name = where + Quoted(key);
    RegistryCredential credential;
    credential.registry = NormaliseRegistry(key);
    if (!IsHostPort(credential.registry)) {
      throw core::InputError(name + ": not a registry host[:port]");
    }
    if (!entry.is_object()) throw core::InputError(name + ": not an object");
    const auto auth = entry.find("auth");
    if (auth != entry.end() &&
        !(auth->is_string() && auth->get_ref<const std::string&>().empty())) {
      if (!auth->is_string()) throw core::InputError(name + ": auth is not a string");
      const auto decoded = core::DecodeBase64(auth->get_ref<const std::string&>());
      if (!decoded) throw core::InputError(name + ": auth is not base64");
      const auto colon = decoded->find(':');
      if (colon == std::string::npos) {
        throw core::InputError(name + ": auth is not base64 of user:password (no ':')");
      }
      credential.username = decoded->substr(0, colon);
      credential.password = decoded->substr(colon + 1);
    } else {
      const auto username = entry.find("username");
      const auto password = entry.find("password");
      if (username == entry.end() || password == entry.end()) {
        throw core::InputError(
            name + (entry.contains("identitytoken")
                        ? ": only an identitytoken (an OAuth refresh token), which ncclguard "
                          "does not use; give auth, or username and password"
                        : ": neither auth nor username and password"));
      }
      if (!username->is_string() || !password->is_string()) {
        throw core::InputError(name + ": username and password are not both strings");
      }
      credential.username = username->get<std::string>();
      credential.password = password->get<std::string>();
    }
    if (credential.username.empty()) throw core::InputError(name + ": the user name is empty");
    const bool seen =
        std::any_of(credentials.begin(), credentials.end(),
                    [&](const RegistryCredential& c) { return c.registry == credential.registry; });
    if (!seen) credentials.push_back(std::move(credential));
  }
  return credentials;
}

std::optional<std::vector<AuthChallenge>> ParseChallenge(std::string_view header,
                                                         std::size_t max_bytes) {
  if (header.size() > max_bytes) return std::nullopt;
  return ChallengeReader(header).Read();
}

std::string_view ResolveStatusName(ResolveStatus status) {
  switch (status) {
    case ResolveStatus::Resolved:
      return "Resolved";
    case ResolveStatus::NotFound:
      return "NotFound";
    case ResolveStatus::Unauthorized:
      return "Unauthorized";
    case ResolveStatus::Unreachable:
      return "Unreachable";
    case ResolveStatus::TimedOut:
      return "TimedOut";
    case ResolveStatus::BadAnswer:
      return "BadAnswer";
  }
  return "BadAnswer";
}

// A resolution in progress: later callers for the same key wait for it instead of asking too.
struct DigestResolver::Flight {
  std::promise<Resolution> promise;
  std::shared_future<Resolution> result = promise.get_future().share();
};

DigestResolver::DigestResolver(DigestResolverOptions options) : options_(std::move(options)) {
  InitCurlOnce();
}

DigestResolver::~DigestResolver() {
  for (void* handle : idle_handles_) curl_easy_cleanup(static_cast<CURL*>(handle));
}

void DigestResolver::Store(const std::string& key, const Resolution& resolution) {
  const auto ttl =
      resolution.status == ResolveStatus::Resolved ? options_.ttl : options_.failure_ttl;
  if (ttl.count() <= 0 || options_.max_entries == 0) return;
  if (const auto found = cache_.find(key); found != cache_.end()) {
    oldest_.erase(found->second.age);
    cache_.erase(found);
  }
  while (cache_.size() >= options_.max_entries) {
    cache_.erase(oldest_.front());
    oldest_.pop_front();
  }
  oldest_.push_back(key);
  cache_.emplace(key, Entry{resolution, Clock::now() + ttl, std::prev(oldest_.end())});
}

Resolution DigestResolver::Fetch(const std::string& registry, const std::string& repository,
                                 const std::string& tag, const RegistryCredential* credential,
                                 std::chrono::steady_clock::time_point deadline) noexcept {
  try {
    CURL* handle = nullptr;
    {
      std::lock_guard lock(handles_mutex_);
      if (!idle_handles_.empty()) {
        handle = static_cast<CURL*>(idle_handles_.back());
        idle_handles_.pop_back();
      }
    }
    if (handle == nullptr) handle = curl_easy_init();
    if (handle == nullptr) return Fail(ResolveStatus::Unreachable, "libcurl made no handle");
    Resolution result;
    try {
      result = Exchange(handle, options_, deadline).Resolve(registry, repository, tag, credential);
    } catch (const std::exception& e) {
      result = Fail(ResolveStatus::BadAnswer, std::string("resolving: ") + e.what());
    }
    std::lock_guard lock(handles_mutex_);
    if (idle_handles_.size() < kIdleHandles) {
      idle_handles_.push_back(handle);
    } else {
      curl_easy_cleanup(handle);
    }
    return result;
  } catch (const std::exception& e) {
    return Fail(ResolveStatus::BadAnswer, std::string("resolving: ") + e.what());
  }
}

Resolution DigestResolver::Resolve(const core::ImageReference& ref,
                                   std::span<const RegistryCredential> credentials) {
  const auto deadline = Clock::now() + options_.budget;
  try {
    if (ref.tag.empty() || !ref.digest.empty()) {
      return Fail(ResolveStatus::BadAnswer,
                  ref.WithoutDigest() +
                      (ref.tag.empty() ? ": no tag to resolve" : ": already has a digest"));
    }
    // The path and tag go into a URL: only what the reference grammar allows.
    const auto checked = core::TryParseImageReference(ref.WithoutDigest());
    if (!checked || checked->path != ref.path || checked->tag != ref.tag ||
        checked->domain != ref.domain) {
      return Fail(ResolveStatus::BadAnswer,
                  Quoted(ref.WithoutDigest()) + ": not an image reference");
    }
    const std::string registry = NormaliseRegistry(ref.Registry());
    // Docker Hub's official images live under library/.
    const std::string repository =
        registry == "docker.io" && ref.path.find('/') == std::string::npos ? "library/" + ref.path
                                                                           : ref.path;
    const RegistryCredential* credential = nullptr;
    for (const RegistryCredential& candidate : credentials) {
      if (NormaliseRegistry(candidate.registry) == registry) {
        credential = &candidate;
        break;
      }
    }
    const std::string key =
        registry + "/" + repository + ":" + ref.tag + "#" + CredentialKey(credential);

    std::shared_ptr<Flight> flight;
    bool mine = false;
    {
      std::lock_guard lock(mutex_);
      if (const auto hit = cache_.find(key); hit != cache_.end()) {
        if (hit->second.expires > Clock::now()) {
          Resolution cached = hit->second.resolution;
          cached.cached = true;
          return cached;
        }
        oldest_.erase(hit->second.age);
        cache_.erase(hit);
      }
      auto& slot = flights_[key];
      if (!slot) {
        slot = std::make_shared<Flight>();
        mine = true;
      }
      flight = slot;
    }
    if (!mine) {
      if (flight->result.wait_until(deadline) != std::future_status::ready) {
        return Fail(ResolveStatus::TimedOut,
                    registry + "/" + repository + ":" + ref.tag +
                        ": the resolution another request started did not end within the budget");
      }
      Resolution shared = flight->result.get();
      shared.cached = true;
      return shared;
    }

    Resolution result = Fetch(registry, repository, ref.tag, credential, deadline);
    // Whatever happens below, the flight ends: its waiters and later callers must not wait on it.
    try {
      std::lock_guard lock(mutex_);
      Store(key, result);
    } catch (const std::exception&) {
      // Not cached: the next caller asks the registry again.
    }
    {
      std::lock_guard lock(mutex_);
      flights_.erase(key);
    }
    flight->promise.set_value(result);
    try {
      log::Debug("image tag resolution",
                 {{"registry", registry},
                  {"repository", repository},
                  {"status", std::string(ResolveStatusName(result.status))}});
    } catch (const std::exception&) {
      // A line not written is no reason to fail the resolution.
    }
    return result;
  } catch (const std::exception& e) {
    return Fail(ResolveStatus::BadAnswer, std::string("resolving: ") + e.what());
  }
}

}  // namespace ncclguard::webhook
