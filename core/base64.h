// Standard base64 decoding, the one decoder: kubeconfig data fields and Secrets' data (kube/),
// and the `auth` of a docker config (webhook/digest_resolver.h). Whitespace is ignored, padding
// optional and only at the end. Linear in the text. (Encoding needs OpenSSL:
// webhook::Base64Encode.)
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace ncclguard::core {

// The bytes `text` encodes; nullopt, with `problem` (when given) saying why ("unexpected '*'",
// "truncated"), for text that is not base64.
std::optional<std::string> DecodeBase64(std::string_view text, std::string* problem = nullptr);

}  // namespace ncclguard::core
