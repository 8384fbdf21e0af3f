#include "controllers/diagnosis.h"
#include "core/image_pin.h"

namespace ncclguard::controllers::diagnoses {
namespace {

// Running pods of one job whose container of one name runs one image by tag yet reports
// different digests (status.containerStatuses[].imageID): the tag was pushed again while the job
// ran and a replacement pod pulled the other build (guide section 10).
class ImageDrift final : public Diagnosis {
 public:
  ImageDrift()
      : Diagnosis({"image-drift", "nccl-version", 45,
                   "Running pods of one job report different image digests for the same "
                   "container and tag: a tag pushed again while the job ran gave a replacement "
                   "pod another NCCL/CUDA build.",
                   "Run every rank on one digest: restart the job with its image pinned "
                   "(name:tag@digest), or leave the image pin on (NcclPolicy spec.imagePin: pin) "
                   "so later pods get the first pods' digest."}) {}

  std::vector<std::string> Find(const DiagnosisContext& context) const override {
    return core::ImageDrift(context.pods);
  }
};

NCCLGUARD_REGISTER(ImageDrift);

}  // namespace
}  // namespace ncclguard::controllers::diagnoses
