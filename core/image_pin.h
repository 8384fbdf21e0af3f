// The image pin (docs/operator.md, "Image pin"; guide section 10): every pod of a managed job runs
// the image digest its first pods ran, restarts and replacements included. The controller records
// that digest on the job (core/contract.h kImageDigestsAnnotation) from what the kubelet reports
// (status.containerStatuses[].imageID); the in-process webhook pins each later pod's container to
// name:tag@digest (rule image-pin); diagnosis image-drift names the pods of one job that run
// different digests of one image. Pure: no I/O.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/json.h"

namespace ncclguard::core {

// What the webhook does with a recorded digest: pin later pods (the default), warn that they run
// by tag (rule image-unpinned), or nothing. The NcclPolicy's spec.imagePin; a namespace's
// ncclguard.io/image-pin label overrides it.
enum class PinMode { Pin, Warn, Off };
std::string_view PinModeName(PinMode mode);  // "pin", "warn", "off"
std::optional<PinMode> ParsePinMode(std::string_view name);
// The mode in force in a namespace whose labels are `namespace_labels` (null or not an object:
// none): its ncclguard.io/image-pin label when that names a mode, else `policy_mode`.
PinMode PinModeIn(PinMode policy_mode, const Json* namespace_labels);

// One container's recorded digest: the image as the pod spec wrote it (a tag, no digest), the
// manifest digest the kubelet said it runs, and the pod that ran it ("" for a digest the webhook
// resolved through the registry at admission, never recorded).
struct ImagePin {
  std::string container;
  std::string image;
  std::string digest;
  std::string pod;

  bool operator==(const ImagePin&) const = default;
};

// The annotation's bounds: a job's containers are few, and the webhook reads the value on every
// pod it admits.
inline constexpr std::size_t kMaxImagePins = 64;
inline constexpr std::size_t kMaxImagePinsAnnotation = 64 * 1024;

// The annotation's value: a JSON object by container name,
// {"pytorch": {"image": "...:2.4", "digest": "sha256:...", "pod": "job-master-0"}}, sorted by
// container name. ReadImagePins throws InputError for anything else (a value past the bounds, an
// entry with a digest that is not sha256 or an image that already has one).
std::string WriteImagePins(const std::vector<ImagePin>& pins);
std::vector<ImagePin> ReadImagePins(std::string_view annotation);

// What the webhook knows of a pod's job when it admits the pod (the controller's caches).
struct JobImagePins {
  PinMode mode = PinMode::Pin;
  std::string job;  // "PyTorchJob pin", for messages
  std::vector<ImagePin> pins;

  // The pin of `container` running `image` as written, or null.
  const ImagePin* Find(std::string_view container, std::string_view image) const;
};
// The pins of the job a pod (the admission request's object, created in `namespace_`) belongs
// to (none yet: an empty list), nullopt when it belongs to no job the caches hold, or the mode in
// force there (`policy_mode` unless the namespace's label says otherwise) is off. Never throws.
using ImagePinLookup = std::function<std::optional<JobImagePins>(
    const Json& pod, std::string_view namespace_, PinMode policy_mode)>;

// What a job's record should be after seeing its pods (their spec images and container statuses):
// each container keeps its pin until the job's pods run another image by that name and none the
// pinned one (a changed template; a job between restarts, with no pods, keeps it); a container
// without one takes the digest of the
// earliest-created pod that reports one for it, from a repository matching the image. Only
// containers whose image has a tag and no digest are pinned. nullopt: nothing changes.
std::optional<std::vector<ImagePin>> RecordImagePins(const std::vector<ImagePin>& recorded,
                                                     const std::vector<Json>& pods);

// Pods of one job (Pending or Running) whose container of one name, running one image by tag,
// reports different digests: one line each such container, naming each digest and its pods
// ("container pytorch (reg/train:2.4) runs sha256:... in pod a, pod b; sha256:... in pod c"),
// digests in order, at most kMaxDriftPods digests and kMaxDriftPods pods each.
inline constexpr std::size_t kMaxDriftPods = 4;
std::vector<std::string> ImageDrift(const std::vector<Json>& pods);

// What RecordImagePins and ImageDrift read of a pod (its name, creation time, phase, containers'
// names and images and what their statuses say they run), for a caller that keeps many pods.
Json PodImageView(const Json& pod);

}  // namespace ncclguard::core
