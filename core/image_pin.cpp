#include "core/image_pin.h"

#include <algorithm>
#include <map>
#include <set>
#include <tuple>

#include "core/contract.h"
#include "core/errors.h"
#include "core/image_ref.h"
#include "core/json_access.h"
#include "core/json_reader.h"

namespace ncclguard::core {
namespace {

constexpr std::size_t kMaxField = 512;  // a name, an image (the grammar's bound), a digest

std::string Text(const Json& object, std::string_view key) {
  const Json* value = Member(object, key);
  return value != nullptr && value->is_string() ? value->get<std::string>() : std::string();
}

// One container of one pod: its image as the spec writes it, and what its status says it runs.
struct RunningImage {
  std::string container;
  std::string image;   // the spec's
  ImageReference ref;  // the spec's, parsed
  std::optional<ImageId> runs;
};

struct PodImages {
  std::string name;
  std::string created;  // RFC 3339: orders as time does
  std::string phase;
  std::vector<RunningImage> containers;
};

PodImages ReadPod(const Json& pod) {
  PodImages out;
  if (const Json* metadata = Member(pod, "metadata")) {
    out.name = Text(*metadata, "name");
    out.created = Text(*metadata, "creationTimestamp");
  }
  const Json* status = Member(pod, "status");
  if (status != nullptr) out.phase = Text(*status, "phase");
  std::map<std::string, std::optional<ImageId>, std::less<>> runs;
  // The containers the rules read (core/pod_spec.h): init containers run no ranks.
  if (const Json* statuses = status != nullptr ? Member(*status, "containerStatuses") : nullptr;
      statuses != nullptr && statuses->is_array()) {
    for (const Json& s : *statuses) {
      const std::string name = Text(s, "name");
      if (!name.empty()) runs[name] = ParseImageId(Text(s, "imageID"));
    }
  }
  const Json* spec = Member(pod, "spec");
  if (const Json* containers = spec != nullptr ? Member(*spec, "containers") : nullptr;
      containers != nullptr && containers->is_array()) {
    for (const Json& c : *containers) {
      RunningImage image{Text(c, "name"), Text(c, "image"), {}, std::nullopt};
      if (image.container.empty()) continue;
      auto ref = TryParseImageReference(image.image);
      if (!ref) continue;
      image.ref = std::move(*ref);
      if (const auto found = runs.find(image.container); found != runs.end()) {
        image.runs = found->second;
      }
      out.containers.push_back(std::move(image));
    }
  }
  return out;
}

std::string ReadField(const Json& entry, std::string_view container, std::string_view key) {
  const Json* value = Member(entry, key);
  if (value == nullptr || !value->is_string()) {
    throw InputError("container " + std::string(container) + ": \"" + std::string(key) +
                     "\" is not a string");
  }
  std::string text = value->get<std::string>();
  if (text.empty() || text.size() > kMaxField) {
    throw InputError("container " + std::string(container) + ": \"" + std::string(key) +
                     "\" is empty or longer than " + std::to_string(kMaxField) + " characters");
  }
  return text;
}

}  // namespace

std::string_view PinModeName(PinMode mode) {
  switch (mode) {
    case PinMode::Pin:
      return "pin";
    case PinMode::Warn:
      return "warn";
    case PinMode::Off:
      return "off";
  }
  return "pin";
}

std::optional<PinMode> ParsePinMode(std::string_view name) {
  for (const PinMode mode : {PinMode::Pin, PinMode::Warn, PinMode::Off}) {
    if (name == PinModeName(mode)) return mode;
  }
  return std::nullopt;
}

PinMode PinModeIn(PinMode policy_mode, const Json* namespace_labels) {
  if (namespace_labels == nullptr) return policy_mode;
  const Json* label = Member(*namespace_labels, kImagePinNamespaceLabel);
  if (label == nullptr || !label->is_string()) return policy_mode;
  return ParsePinMode(label->get_ref<const std::string&>()).value_or(policy_mode);
}

std::string WriteImagePins(const std::vector<ImagePin>& pins) {
  Json out = Json::object();
  std::vector<const ImagePin*> sorted;
  for (const ImagePin& pin : pins) sorted.push_back(&pin);
  std::sort(sorted.begin(), sorted.end(),
            [](const ImagePin* a, const ImagePin* b) { return a->container < b->container; });
  for (const ImagePin* pin : sorted) {
    out[pin->container] = Json{{"image", pin->image}, {"digest", pin->digest}, {"pod", pin->pod}};
  }
  return out.dump(-1, ' ', false, Json::error_handler_t::replace);
}

std::vector<ImagePin> ReadImagePins(std::string_view annotation) {
  if (annotation.size() > kMaxImagePinsAnnotation) {
    throw InputError("longer than " + std::to_string(kMaxImagePinsAnnotation) + " bytes");
  }
  const Json value = ReadJson(annotation, {.max_depth = 4});
  if (!value.is_object()) throw InputError("not a JSON object of containers");
  if (value.size() > kMaxImagePins) {
    throw InputError("more than " + std::to_string(kMaxImagePins) + " containers");
  }
  std::vector<ImagePin> pins;
  for (const auto& [container, entry] : value.items()) {
    if (container.empty() || container.size() > kMaxField) {
      throw InputError("a container name is empty or too long");
    }
    if (!entry.is_object()) throw InputError("container " + container + ": not an object");
    ImagePin pin{container, ReadField(entry, container, "image"),
                 ReadField(entry, container, "digest"), ReadField(entry, container, "pod")};
    const ImageReference ref = ParseImageReference(pin.image);
    if (!ref.digest.empty()) {
      throw InputError("container " + container + ": image " + pin.image + " has a digest");
    }
    if (!IsSha256Digest(pin.digest)) {
      throw InputError("container " + container + ": digest is not sha256:<64 hex digits>");
    }
    pins.push_back(std::move(pin));
  }
  return pins;
}

const ImagePin* JobImagePins::Find(std::string_view container, std::string_view image) const {
  for (const ImagePin& pin : pins) {
    if (pin.container == container && pin.image == image) return &pin;
  }
  return nullptr;
}

std::optional<std::vector<ImagePin>> RecordImagePins(const std::vector<ImagePin>& recorded,
                                                     const std::vector<Json>& pods) {
  std::vector<PodImages> read;
  read.reserve(pods.size());
  for (const Json& pod : pods) read.push_back(ReadPod(pod));
  std::sort(read.begin(), read.end(), [](const PodImages& a, const PodImages& b) {
    return std::tie(a.created, a.name) < std::tie(b.created, b.name);
  });
  // A pin stands until the job's pods run another image by that container name (its template
  // changed) and none runs the pinned one: between a restart's pods (none at all) it stays.
  const auto superseded = [&read](const ImagePin& pin) {
    bool other = false;
    for (const PodImages& pod : read) {
      for (const RunningImage& c : pod.containers) {
        if (c.container != pin.container) continue;
        if (c.ref.WithoutDigest() == pin.image) return false;
        other = true;
      }
    }
    return other;
  };
  std::vector<ImagePin> next;
  for (const ImagePin& pin : recorded) {
    if (!superseded(pin) && next.size() < kMaxImagePins) next.push_back(pin);
  }
  for (const PodImages& pod : read) {
    for (const RunningImage& c : pod.containers) {
      if (next.size() >= kMaxImagePins) break;
      if (!c.ref.digest.empty() || c.ref.tag.empty() || !c.runs) continue;
      if (c.runs->repository != c.ref.Repository()) continue;  // another registry's name
      const bool known = std::any_of(next.begin(), next.end(), [&c](const ImagePin& pin) {
        return pin.container == c.container;
      });
      if (!known) next.push_back({c.container, c.image, c.runs->digest, pod.name});
    }
  }
  std::sort(next.begin(), next.end(),
            [](const ImagePin& a, const ImagePin& b) { return a.container < b.container; });
  std::vector<ImagePin> before = recorded;
  std::sort(before.begin(), before.end(),
            [](const ImagePin& a, const ImagePin& b) { return a.container < b.container; });
  if (next == before) return std::nullopt;
  return next;
}

Json PodImageView(const Json& pod) {
  Json view = Json::object();
  const Json* metadata = Member(pod, "metadata");
  for (const char* key : {"name", "creationTimestamp"}) {
    if (const Json* value = metadata != nullptr ? Member(*metadata, key) : nullptr) {
      view["metadata"][key] = *value;
    }
  }
  const Json* spec = Member(pod, "spec");
  if (const Json* containers = spec != nullptr ? Member(*spec, "containers") : nullptr;
      containers != nullptr && containers->is_array()) {
    Json kept = Json::array();
    for (const Json& c : *containers) {
      kept.push_back(Json{{"name", Text(c, "name")}, {"image", Text(c, "image")}});
    }
    view["spec"]["containers"] = std::move(kept);
  }
  const Json* status = Member(pod, "status");
  if (status != nullptr) {
    if (const Json* phase = Member(*status, "phase")) view["status"]["phase"] = *phase;
    if (const Json* statuses = Member(*status, "containerStatuses");
        statuses != nullptr && statuses->is_array()) {
      Json kept = Json::array();
      for (const Json& s : *statuses) {
        kept.push_back(Json{{"name", Text(s, "name")}, {"imageID", Text(s, "imageID")}});
      }
      view["status"]["containerStatuses"] = std::move(kept);
    }
  }
  return view;
}

std::vector<std::string> ImageDrift(const std::vector<Json>& pods) {
  // (container, image by tag) -> digest -> pods, in name order.
  std::map<std::pair<std::string, std::string>, std::map<std::string, std::set<std::string>>> seen;
  for (const Json& pod : pods) {
    const PodImages read = ReadPod(pod);
    if (read.phase != "Pending" && read.phase != "Running") continue;
    for (const RunningImage& c : read.containers) {
      if (!c.runs) continue;
      seen[{c.container, c.ref.WithoutDigest()}][c.runs->digest].insert(read.name);
    }
  }
  std::vector<std::string> lines;
  for (const auto& [key, digests] : seen) {
    if (digests.size() < 2) continue;
    std::string line = "container " + key.first + " (" + key.second + ") runs ";
    std::size_t shown = 0;
    for (const auto& [digest, names] : digests) {
      if (shown == kMaxDriftPods) {
        line += "; and " + std::to_string(digests.size() - shown) + " more digests";
        break;
      }
      line += (shown++ == 0 ? "" : "; ") + digest + " in ";
      std::size_t listed = 0;
      for (const std::string& name : names) {
        if (listed == kMaxDriftPods) {
          line += " and " + std::to_string(names.size() - listed) + " more";
          break;
        }
        line += (listed++ == 0 ? "pod " : ", pod ") + name;
      }
    }
    lines.push_back(std::move(line));
  }
  return lines;
}

}  // namespace ncclguard::core
