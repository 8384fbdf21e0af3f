#include "core/json_access.h"
#include "core/rules/rule_util.h"

namespace ncclguard::core::rules {
namespace {

constexpr std::string_view kVolumeName = "ncclguard-dshm";

bool MountsDevShm(const Json& object, const Container& c) {
  const JsonPointer mounts_at = c.at / "volumeMounts";
  const Json* mounts = OptionalArray(object, mounts_at);
  if (mounts == nullptr) return false;
  for (std::size_t i = 0; i < mounts->size(); ++i) {
    auto path = OptionalString(object, mounts_at / i / "mountPath").value_or("");
    while (path.size() > 1 && path.back() == '/') path.pop_back();
    if (path == "/dev/shm") return true;
  }
  return false;
}

bool HasVolume(const Json& object, const JsonPointer& volumes_at, std::string_view name) {
  const Json* volumes = OptionalArray(object, volumes_at);
  if (volumes == nullptr) return false;
  for (std::size_t i = 0; i < volumes->size(); ++i) {
    if (OptionalString(object, volumes_at / i / "name").value_or("") == name) return true;
  }
  return false;
}

class DevShmMissing final : public Rule {
 public:
  DevShmMissing()
      : Rule({"dev-shm-missing", "stale-shm", Level::Fix, RuleScope::Pod,
              "A GPU container has no volume at /dev/shm, so it gets the container runtime's 64 MB "
              "default; NCCL's shared-memory transport and data loaders then fail with bus errors.",
              "Mount an emptyDir with medium: Memory at /dev/shm; the mutating webhook adds one "
              "named ncclguard-dshm."}) {}

  void CheckTemplate(const TemplateContext& ctx, RuleReport& report) const override {
    const JsonPointer volumes_at = ctx.facts.pod_spec / "volumes";
    // Every GPU container of the pod shares one volume.
    bool has_volume = HasVolume(ctx.object, volumes_at, kVolumeName);
    for (const Container& c : ctx.facts.containers) {
      if (!c.IsGpu() || MountsDevShm(ctx.object, c)) continue;
      report.Add(c.at / "volumeMounts",
                 ContainerLabel(c) +
                     " has no volume at /dev/shm and gets the runtime's 64 MB "
                     "default. Mount an emptyDir with medium: Memory at /dev/shm.");
      if (!has_volume) {
        report.plan().Append(volumes_at,
                             Json{{"name", kVolumeName}, {"emptyDir", {{"medium", "Memory"}}}});
        has_volume = true;
      }
      report.plan().Append(c.at / "volumeMounts",
                           Json{{"name", kVolumeName}, {"mountPath", "/dev/shm"}});
    }
  }
};

NCCLGUARD_REGISTER(DevShmMissing);

}  // namespace
}  // namespace ncclguard::core::rules
