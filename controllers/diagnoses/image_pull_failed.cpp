#include "controllers/diagnoses/pod_status.h"
#include "controllers/diagnosis.h"
#include "controllers/json_fields.h"

namespace ncclguard::controllers::diagnoses {
namespace {

class ImagePullFailed final : public Diagnosis {
 public:
  ImagePullFailed()
      : Diagnosis({"image-pull-failed", "pod-lifecycle", 60,
                   "A container waits with ErrImagePull, ImagePullBackOff, InvalidImageName or "
                   "ErrImageNeverPull.",
                   "Check the image name and tag, the registry's reachability and the pull "
                   "secret."}) {}

  std::vector<std::string> Find(const DiagnosisContext& context) const override {
    std::vector<std::string> lines;
    ForEachWaiting(context.pods, [&](const Json& pod, const Json& status, const Json& waiting) {
      const std::string reason = StringField(waiting, "reason");
      if (reason != "ErrImagePull" && reason != "ImagePullBackOff" &&
          reason != "InvalidImageName" && reason != "ErrImageNeverPull") {
        return;
      }
      // The kubelet's message varies between retries; the image and reason do not.
      lines.push_back(Subject(pod, status) + " cannot pull image " +
                      StringField(status, "image", "?") + " (" +
                      (reason == "ImagePullBackOff" ? "ErrImagePull" : reason) + ")");
    });
    return Distinct(std::move(lines));
  }
};

NCCLGUARD_REGISTER(ImagePullFailed);

}  // namespace
}  // namespace ncclguard::controllers::diagnoses
