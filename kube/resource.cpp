#include "kube/resource.h"

#include <cctype>
#include <stdexcept>
#include <utility>

#include "core/contract.h"

namespace ncclguard::kube {

ResourceRef ResourceRef::In(std::string ns) const {
  ResourceRef copy = *this;
  copy.namespace_ = std::move(ns);
  return copy;
}

ResourceRef ResourceRef::Named(std::string object_name) const {
  ResourceRef copy = *this;
  copy.name = std::move(object_name);
  return copy;
}

std::string ResourceRef::ApiVersion() const {
  return group.empty() ? version : group + "/" + version;
}

std::string ResourceRef::CollectionPath() const {
  std::string path = group.empty() ? "/api/" + version : "/apis/" + group + "/" + version;
  if (namespaced && !namespace_.empty()) path += "/namespaces/" + UrlEncode(namespace_);
  return path + "/" + resource;
}

std::string ResourceRef::ObjectPath() const {
  if (name.empty()) throw std::invalid_argument(resource + ": object request without a name");
  if (namespaced && namespace_.empty()) {
    throw std::invalid_argument(resource + "/" + name + ": namespaced object without a namespace");
  }
  return CollectionPath() + "/" + UrlEncode(name);
}

std::string ResourceRef::Describe() const {
  std::string what = group.empty() ? resource : resource + "." + group;
  if (!namespace_.empty() && !name.empty()) return what + " " + namespace_ + "/" + name;
  if (!namespace_.empty()) return what + " in " + namespace_;
  return name.empty() ? what : what + " " + name;
}

std::string UrlEncode(const std::string& value) {
  static const char* kHex = "0123456789ABCDEF";
  std::string out;
  for (unsigned char c : value) {
    if (std::isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~') {
      out.push_back(static_cast<char>(c));
    } else {
      out.push_back('%');
      out.push_back(kHex[c >> 4]);
      out.push_back(kHex[c & 15]);
    }
  }
  return out;
}

namespace resources {
ResourceRef Pods() { return {"", "v1", "pods", true, "", ""}; }
ResourceRef Services() { return {"", "v1", "services", true, "", ""}; }
ResourceRef ConfigMaps() { return {"", "v1", "configmaps", true, "", ""}; }
ResourceRef Namespaces() { return {"", "v1", "namespaces", false, "", ""}; }
ResourceRef Nodes() { return {"", "v1", "nodes", false, "", ""}; }
ResourceRef Events() { return {"events.k8s.io", "v1", "events", true, "", ""}; }
ResourceRef Leases() { return {"coordination.k8s.io", "v1", "leases", true, "", ""}; }
ResourceRef Jobs() { return {"batch", "v1", "jobs", true, "", ""}; }
ResourceRef PyTorchJobs() { return {"kubeflow.org", "v1", "pytorchjobs", true, "", ""}; }
ResourceRef MPIJobs() { return {"kubeflow.org", "v2beta1", "mpijobs", true, "", ""}; }
ResourceRef JobSets() { return {"jobset.x-k8s.io", "v1alpha2", "jobsets", true, "", ""}; }
ResourceRef NodeValidations() {
  return {std::string(core::kApiGroup),
          std::string(core::kApiGroupVersion),
          "nodevalidations",
          false,
          "",
          ""};
}
ResourceRef NcclPolicies() {
  return {std::string(core::kApiGroup),
          std::string(core::kApiGroupVersion),
          "ncclpolicies",
          false,
          "",
          ""};
}
ResourceRef CustomResourceDefinitions() {
  return {"apiextensions.k8s.io", "v1", "customresourcedefinitions", false, "", ""};
}
}  // namespace resources

}  // namespace ncclguard::kube
