#include "controllers/labels.h"

namespace ncclguard::controllers {
namespace {

std::optional<std::string> MetadataMapEntry(const Json& object, std::string_view map,
                                            std::string_view key) {
  if (!object.is_object()) return std::nullopt;
  const auto metadata = object.find("metadata");
  if (metadata == object.end() || !metadata->is_object()) return std::nullopt;
  const auto entries = metadata->find(map);
  if (entries == metadata->end() || !entries->is_object()) return std::nullopt;
  const auto value = entries->find(key);
  if (value == entries->end() || !value->is_string()) return std::nullopt;
  return value->get<std::string>();
}

}  // namespace

std::optional<std::string> Label(const Json& object, std::string_view key) {
  return MetadataMapEntry(object, "labels", key);
}

std::optional<std::string> Annotation(const Json& object, std::string_view key) {
  return MetadataMapEntry(object, "annotations", key);
}

std::string Meta(const Json& object, std::string_view field) {
  if (!object.is_object()) return "";
  const auto metadata = object.find("metadata");
  if (metadata == object.end() || !metadata->is_object()) return "";
  const auto value = metadata->find(field);
  return value != metadata->end() && value->is_string() ? value->get<std::string>() : "";
}

}  // namespace ncclguard::controllers
