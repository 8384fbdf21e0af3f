// A reference to one Kubernetes object, in the fields of core/v1 ObjectReference that ncclguard
// uses: what a finding is about, what a controller action writes, what an Event regards.
#pragma once

#include <string>

#include "core/json.h"

namespace ncclguard::core {

struct ObjectRef {
  std::string api_version;
  std::string kind;
  std::string namespace_;  // "" for cluster-scoped objects
  std::string name;
  std::string uid;  // "" when not known (a finding on a manifest that was never created)
  // The REST plural ("pytorchjobs", "services"), set where the object is written (the
  // controllers' actions); "" in findings. A REST location for a request, collections and
  // cluster-wide lists included, is kube::ResourceRef.
  std::string resource;

  // "PyTorchJob ml/llama" style, for messages and logs.
  std::string Describe() const;
  // apiVersion, kind, metadata.namespace, metadata.name (else generateName) and metadata.uid.
  static ObjectRef From(const Json& object);
};

}  // namespace ncclguard::core
