#include "core/finding.h"

namespace ncclguard::core {

std::string_view LevelName(Level level) {
  switch (level) {
    case Level::Fix:
      return "fix";
    case Level::Deny:
      return "deny";
    case Level::Warn:
      return "warn";
  }
  return "warn";
}

std::optional<Level> ParseLevel(std::string_view name) {
  if (name == "fix") return Level::Fix;
  if (name == "deny") return Level::Deny;
  if (name == "warn") return Level::Warn;
  return std::nullopt;
}

namespace {
std::string StringAt(const Json& object, const char* outer, const char* inner) {
  if (!object.is_object()) return {};
  auto it = object.find(outer);
  if (it == object.end()) return {};
  if (inner == nullptr) return it->is_string() ? it->get<std::string>() : std::string{};
  if (!it->is_object()) return {};
  auto in = it->find(inner);
  return in != it->end() && in->is_string() ? in->get<std::string>() : std::string{};
}
}  // namespace

ObjectRef ObjectRef::From(const Json& object) {
  ObjectRef ref;
  ref.api_version = StringAt(object, "apiVersion", nullptr);
  ref.kind = StringAt(object, "kind", nullptr);
  ref.namespace_ = StringAt(object, "metadata", "namespace");
  ref.name = StringAt(object, "metadata", "name");
  if (ref.name.empty()) ref.name = StringAt(object, "metadata", "generateName");
  ref.uid = StringAt(object, "metadata", "uid");
  return ref;
}

std::string ObjectRef::Describe() const {
  std::string out = kind.empty() ? std::string("object") : kind;
  out += ' ';
  if (!namespace_.empty()) out += namespace_ + "/";
  out += name.empty() ? std::string("<unnamed>") : name;
  return out;
}

Json ToJson(const Finding& finding) {
  return Json{{"rule", finding.rule},
              {"level", LevelName(finding.level)},
              {"guide", finding.guide},
              {"message", finding.message},
              {"object",
               {{"apiVersion", finding.object.api_version},
                {"kind", finding.object.kind},
                {"namespace", finding.object.namespace_},
                {"name", finding.object.name}}},
              {"path", finding.path}};
}

}  // namespace ncclguard::core
