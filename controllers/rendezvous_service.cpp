#include "controllers/rendezvous_service.h"

#include "controllers/json_fields.h"
#include "controllers/labels.h"
#include "core/contract.h"
#include "core/rendezvous.h"

namespace ncclguard::controllers {
namespace {

bool OwnedBy(const Json& object, const std::string& uid) {
  const auto metadata = object.find("metadata");
  if (metadata == object.end() || !metadata->is_object()) return false;
  const auto owners = metadata->find("ownerReferences");
  if (owners == metadata->end() || !owners->is_array()) return false;
  for (const Json& owner : *owners) {
    if (owner.is_object() && StringField(owner, "uid") == uid && BoolField(owner, "controller")) {
      return true;
    }
  }
  return false;
}

Json SpecField(const Json& service, const char* key) {
  const auto spec = service.find("spec");
  if (spec == service.end() || !spec->is_object()) return nullptr;
  const auto value = spec->find(key);
  return value == spec->end() ? Json(nullptr) : *value;
}

// The server defaults protocol and targetPort; compare only what we set.
bool SamePorts(const Json& existing, const Json& desired) {
  if (!existing.is_array() || existing.size() != desired.size()) return false;
  for (std::size_t i = 0; i < desired.size(); ++i) {
    if (!existing[i].is_object() || StringField(existing[i], "name") != desired[i]["name"] ||
        IntField(existing[i], "port", -1) != desired[i]["port"].get<std::int64_t>()) {
      return false;
    }
  }
  return true;
}

}  // namespace

Json DesiredService(const Json& job, core::WorkloadKind kind, const core::Policy& policy,
                    const std::optional<std::string>& master_addr) {
  const core::KindInfo& info = core::KindInfoOf(kind);
  const std::string job_name = Meta(job, "name");
  Json metadata{
      {"name", core::RendezvousServiceName(job)},
      {"namespace", Meta(job, "namespace")},
      {"labels",
       {{std::string(kManagedByLabel), kManagedByValue},
        {std::string(info.pod_job_label), job_name}}},
  };
  if (master_addr)
    metadata["annotations"] = {{std::string(core::kMasterAddrAnnotation), *master_addr}};
  metadata["ownerReferences"] = Json::array({Json{{"apiVersion", StringField(job, "apiVersion")},
                                                  {"kind", info.kind_name},
                                                  {"name", job_name},
                                                  {"uid", Meta(job, "uid")},
                                                  {"controller", true},
                                                  {"blockOwnerDeletion", true}}});
  return Json{{"apiVersion", "v1"},
              {"kind", "Service"},
              {"metadata", std::move(metadata)},
              {"spec",
               {{"clusterIP", "None"},
                {"publishNotReadyAddresses", true},
                {"selector", {{std::string(info.pod_job_label), job_name}}},
                {"ports", Json::array({Json{{"name", "rendezvous"},
                                            {"port", policy.rendezvous_port},
                                            {"protocol", "TCP"}}})}}}};
}

ServiceStanding CompareService(const std::optional<Json>& existing, const Json& desired,
                               const Json& job) {
  if (!existing) return ServiceStanding::Missing;
  const std::string uid = Meta(job, "uid");
  if (uid.empty() || !OwnedBy(*existing, uid)) return ServiceStanding::NotOwned;
  // A Service the job's own operator made (JobSet names its headless Service like ours) serves the
  // same purpose; it is that operator's to manage.
  if (Label(*existing, kManagedByLabel) != std::string(kManagedByValue)) {
    return ServiceStanding::Serving;
  }
  const Json& spec = desired["spec"];
  // clusterIP is immutable and ours was created headless; it is not compared.
  if (SpecField(*existing, "publishNotReadyAddresses") != spec["publishNotReadyAddresses"] ||
      SpecField(*existing, "selector") != spec["selector"] ||
      !SamePorts(SpecField(*existing, "ports"), spec["ports"])) {
    return ServiceStanding::Drifted;
  }
  const auto want_addr = Annotation(desired, core::kMasterAddrAnnotation);
  if (want_addr && Annotation(*existing, core::kMasterAddrAnnotation) != want_addr) {
    return ServiceStanding::Drifted;
  }
  return ServiceStanding::Serving;
}

Json ServicePatch(const Json& existing, const Json& desired) {
  Json selector = desired["spec"]["selector"];
  // A merge patch merges maps: selector keys we did not set are removed explicitly.
  const Json current = SpecField(existing, "selector");
  if (current.is_object()) {
    for (const auto& [key, value] : current.items()) {
      if (!selector.contains(key)) selector[key] = nullptr;
    }
  }
  Json patch{{"spec",
              {{"publishNotReadyAddresses", true},
               {"selector", std::move(selector)},
               {"ports", desired["spec"]["ports"]}}}};
  if (desired["metadata"].contains("annotations")) {
    patch["metadata"]["annotations"] = desired["metadata"]["annotations"];
  }
  return patch;
}

}  // namespace ncclguard::controllers
