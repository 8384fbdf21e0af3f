// Container image references as the distribution registry's grammar writes them
// ([domain[:port]/]path[:tag][@digest]), and what the kubelet reports a container runs
// (status.containerStatuses[].imageID). Read by the image pin (core/image_pin.h) and the webhook's
// resolution of a tag at admission (webhook/digest_resolver.h). Pure: no I/O.
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace ncclguard::core {

// The one digest algorithm ncclguard pins with: "sha256:" and 64 lower-case hex digits. Others
// (sha512, a digest of another length) are refused rather than guessed at.
bool IsSha256Digest(std::string_view digest);

struct ImageReference {
  std::string domain;  // as written ("registry.example:5000"), "" for Docker Hub's short names
  std::string path;    // "ml/train"
  std::string tag;     // "" when none
  std::string digest;  // "sha256:<64 hex>", "" when none

  // domain/path as written: "registry.example:5000/ml/train", "pytorch/pytorch".
  std::string Name() const;
  // The repository as runtimes name it: Docker Hub's short names in full ("docker.io/library/x"
  // for "x"), domains lower-cased. Two references to one repository have the same Repository.
  std::string Repository() const;
  // The registry host a client talks to: the domain, "docker.io" when none.
  std::string Registry() const;
  // The reference without its digest: Name()[:tag].
  std::string WithoutDigest() const;
  // Name()[:tag]@digest: the tag kept for people, the digest for the runtime.
  std::string PinnedTo(std::string_view sha256_digest) const;
};

// Parses `image`; throws InputError naming what is wrong (an empty or over-long reference, a
// path component or tag with characters the grammar refuses, a digest that is not sha256).
ImageReference ParseImageReference(std::string_view image);
std::optional<ImageReference> TryParseImageReference(std::string_view image) noexcept;

// What a container status' imageID says the container runs: "repo@sha256:<hex>" (containerd;
// "docker-pullable://" before it from dockershim) gives the repository (as Repository() writes
// it) and the manifest digest. A bare "sha256:<hex>" is the image's config id (an image loaded
// without a registry), not something a pod can be pinned to: nullopt, as for anything else.
struct ImageId {
  std::string repository;
  std::string digest;
};
std::optional<ImageId> ParseImageId(std::string_view image_id) noexcept;

}  // namespace ncclguard::core
