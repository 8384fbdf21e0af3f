#include "controllers/actions.h"

#include "core/contract.h"

namespace ncclguard::controllers {

namespace {

// The resourceVersion a merge patch names as its precondition; "" for none.
std::string NamedVersion(const Json& patch) {
  const auto metadata = patch.find("metadata");
  if (metadata == patch.end() || !metadata->is_object()) return "";
  const auto version = metadata->find("resourceVersion");
  return version != metadata->end() && version->is_string() ? version->get<std::string>() : "";
}

}  // namespace

Json PatchVersions::Resolve(const MergePatch& patch) const {
  const std::string read = NamedVersion(patch.patch);
  const auto made = made_.find(RestPath(patch.target, false, false));
  if (read.empty() || made == made_.end() || made->second.first != read) return patch.patch;
  Json body = patch.patch;
  body["metadata"]["resourceVersion"] = made->second.second;
  return body;
}

void PatchVersions::Wrote(const MergePatch& patch, std::string version) {
  const std::string read = NamedVersion(patch.patch);
  if (read.empty() || version.empty()) return;
  made_[RestPath(patch.target, false, false)] = {read, std::move(version)};
}

std::string RestPath(const ObjectRef& target, bool collection, bool status) {
  // Core kinds ("v1") live under /api, the others under /apis/<group>/<version>.
  std::string path =
      target.api_version.find('/') == std::string::npos ? "/api/" : std::string("/apis/");
  path += target.api_version;
  if (!target.namespace_.empty()) path += "/namespaces/" + target.namespace_;
  path += "/" + target.resource;
  if (collection) return path;
  path += "/" + target.name;
  if (status) path += "/status";
  return path;
}

Json EventObject(const RecordEvent& event, std::string_view reporting_instance,
                 std::string_view now_rfc3339_micro) {
  const ObjectRef& r = event.regarding;
  Json regarding{{"apiVersion", r.api_version}, {"kind", r.kind}, {"name", r.name}};
  if (!r.namespace_.empty()) regarding["namespace"] = r.namespace_;
  if (!r.uid.empty()) regarding["uid"] = r.uid;
  Json object{
      {"apiVersion", "events.k8s.io/v1"},
      {"kind", "Event"},
      {"metadata", {{"generateName", r.name.substr(0, 200) + "-"}, {"namespace", r.namespace_}}},
      {"eventTime", now_rfc3339_micro},
      {"reportingController", core::kReportingController},
      {"reportingInstance", reporting_instance},
      {"action", event.action},
      {"reason", event.reason},
      {"note", event.note},
      {"type", event.type},
      {"regarding", regarding}};
  if (!event.annotations.empty()) object["metadata"]["annotations"] = Json(event.annotations);
  return object;
}

}  // namespace ncclguard::controllers
