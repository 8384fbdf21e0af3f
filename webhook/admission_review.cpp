#include "webhook/admission_review.h"

#include "core/json_reader.h"
#include "core/json_writer.h"

#include <openssl/evp.h>

#include <algorithm>
#include <limits>
#include <string>
#include <string_view>

namespace ncclguard::webhook {
namespace {

constexpr std::string_view kApiVersion = "admission.k8s.io/v1";
// Kubernetes objects nest a few dozen levels; copying or printing a deeper document recurses.
constexpr std::size_t kMaxNesting = 128;

const core::Json& Member(const core::Json& object, const char* name, std::string_view where) {
  auto it = object.find(name);
  if (it == object.end() || it->is_null()) {
    throw ReviewError(std::string(where) + "." + name + " is missing");
  }
  return *it;
}

std::string StringMember(const core::Json& object, const char* name, std::string_view where,
                         bool required) {
  auto it = object.find(name);
  if (it == object.end() || it->is_null()) {
    if (required) throw ReviewError(std::string(where) + "." + name + " is missing");
    return {};
  }
  if (!it->is_string()) {
    throw ReviewError(std::string(where) + "." + name + " must be a string, not " +
                      it->type_name());
  }
  return it->get<std::string>();
}

GroupVersionKind ParseKind(const core::Json& request) {
  const core::Json& kind = Member(request, "kind", "request");
  if (!kind.is_object()) throw ReviewError("request.kind must be an object");
  GroupVersionKind gvk;
  gvk.group = StringMember(kind, "group", "request.kind", false);
  gvk.version = StringMember(kind, "version", "request.kind", true);
  gvk.kind = StringMember(kind, "kind", "request.kind", true);
  return gvk;
}

// The object must be what request.kind says, or rules would read the wrong schema.
void CheckObjectKind(const core::Json& object, const GroupVersionKind& claimed) {
  if (!object.is_object()) {
    throw ReviewError(std::string("request.object must be an object, not ") + object.type_name());
  }
  const std::string api_version = StringMember(object, "apiVersion", "request.object", true);
  const std::string kind = StringMember(object, "kind", "request.object", true);
  if (api_version != claimed.ApiVersion() || kind != claimed.kind) {
    throw ReviewError("request.object is a " + api_version + " " + kind + " but request.kind is " +
                      claimed.ApiVersion() + " " + claimed.kind);
  }
}

}  // namespace

AdmissionRequest ParseAdmissionReview(std::string_view body) {
  core::Json review;
  const core::FreeJsonAtExit free_review(review);
  try {
    review = core::ReadJson(body, {.max_depth = kMaxNesting});
  } catch (const core::JsonReadError& e) {
    if (e.kind() == core::JsonReadError::Kind::TooDeep) {
      throw ReviewError("body nests deeper than " + std::to_string(kMaxNesting) + " levels");
    }
    throw ReviewError("body is not JSON");
  }
  if (!review.is_object()) throw ReviewError("body is not a JSON object");
  const std::string api_version = StringMember(review, "apiVersion", "review", true);
  const std::string kind = StringMember(review, "kind", "review", true);
  if (api_version != kApiVersion || kind != "AdmissionReview") {
    throw ReviewError("expected " + std::string(kApiVersion) + " AdmissionReview, got " +
                      api_version + " " + kind);
  }
  auto request_it = review.find("request");
  if (request_it == review.end() || !request_it->is_object()) {
    throw ReviewError("review.request is missing or not an object");
  }
  core::Json& request = *request_it;

  AdmissionRequest parsed;
  parsed.uid = StringMember(request, "uid", "request", true);
  if (parsed.uid.empty()) throw ReviewError("request.uid is empty");
  parsed.kind = ParseKind(request);
  parsed.operation = StringMember(request, "operation", "request", true);
  if (parsed.operation != "CREATE" && parsed.operation != "UPDATE" &&
      parsed.operation != "DELETE" && parsed.operation != "CONNECT") {
    throw ReviewError("request.operation " + parsed.operation + " is not one of CREATE, UPDATE, " +
                      "DELETE, CONNECT");
  }
  parsed.namespace_ = StringMember(request, "namespace", "request", false);
  parsed.name = StringMember(request, "name", "request", false);
  parsed.sub_resource = StringMember(request, "subResource", "request", false);
  if (auto it = request.find("dryRun"); it != request.end() && !it->is_null()) {
    if (!it->is_boolean()) throw ReviewError("request.dryRun must be a boolean");
    parsed.dry_run = it->get<bool>();
  }
  if (parsed.operation == "CREATE" || parsed.operation == "UPDATE") {
    auto object = request.find("object");
    if (object == request.end() || object->is_null()) {
      throw ReviewError("request.object is missing for " + parsed.operation);
    }
    CheckObjectKind(*object, parsed.kind);
    parsed.object = std::move(*object);  // the review is discarded; no copy of a large object
  }
  if (parsed.operation == "UPDATE") {
    auto old_object = request.find("oldObject");
    if (old_object != request.end() && !old_object->is_null()) {
      if (!old_object->is_object()) throw ReviewError("request.oldObject must be an object");
      parsed.old_object = std::move(*old_object);
    }
  }
  return parsed;
}

std::string Base64Encode(std::string_view bytes) {
  if (bytes.size() > static_cast<size_t>(std::numeric_limits<int>::max() / 4 * 3)) {
    throw std::length_error("base64: input too large");
  }
  std::string out(4 * ((bytes.size() + 2) / 3), '\0');
  const int written = EVP_EncodeBlock(reinterpret_cast<unsigned char*>(out.data()),
                                      reinterpret_cast<const unsigned char*>(bytes.data()),
                                      static_cast<int>(bytes.size()));
  out.resize(static_cast<size_t>(written));
  return out;
}

namespace {

// `text` as a JSON string, escaped as Json::dump escapes it; invalid UTF-8 is replaced (messages
// quote user input) rather than thrown over while answering.
void AppendJsonString(std::string& out, std::string_view text) {
  core::AppendJsonString(out, text, core::InvalidUtf8::Replace);
}

}  // namespace

// Written field by field in the order the answer has always had, the strings escaped by Json: the
// bytes a Json tree of the answer would dump, without building one and copying the patch into it.
std::string EncodeAdmissionReview(const AdmissionResponse& response) {
  std::string patch;
  if (response.allowed && response.patch.is_array() && !response.patch.empty()) {
    patch = Base64Encode(core::WriteJson(response.patch));  // strict: a patch must be valid UTF-8
  }
  std::string out;
  out.reserve(192 + response.uid.size() + patch.size() + response.message.size());
  out += R"({"apiVersion":")";
  out += kApiVersion;
  out += R"(","kind":"AdmissionReview","response":{"uid":)";
  AppendJsonString(out, response.uid);
  out += response.allowed ? R"(,"allowed":true)" : R"(,"allowed":false)";
  if (!patch.empty()) {
    out += R"(,"patchType":"JSONPatch","patch":")";  // base64 needs no escaping
    out += patch;
    out += '"';
  }
  if (!response.warnings.empty()) {
    out += R"(,"warnings":[)";
    for (std::size_t i = 0; i < response.warnings.size(); ++i) {
      if (i > 0) out += ',';
      AppendJsonString(out, response.warnings[i]);
    }
    out += ']';
  }
  if (!response.allowed || response.status_code != 0) {
    out += R"(,"status":{"code":)";
    out += std::to_string(response.status_code != 0 ? response.status_code : 403);
    if (!response.status_reason.empty()) {
      out += R"(,"reason":)";
      AppendJsonString(out, response.status_reason);
    }
    if (!response.message.empty()) {
      out += R"(,"message":)";
      AppendJsonString(out, response.message);
    }
    out += '}';
  }
  out += "}}";
  return out;
}

}  // namespace ncclguard::webhook
