// Which API objects a request is about: group/version/resource (plural), and for namespaced
// resources a namespace (empty: all namespaces, for list and watch), and a name.
// Not an object reference (core::ObjectRef: apiVersion, kind, namespace, name, uid): this is a REST
// location, which may name a collection or every namespace, and knows the plural and whether the
// resource is namespaced, none of which an object's own fields say.
#pragma once

#include <string>

namespace ncclguard::kube {

struct ResourceRef {
  std::string group;  // "" for the core group
  std::string version;
  std::string resource;  // plural: "pods", "pytorchjobs"
  bool namespaced = true;
  std::string namespace_;
  std::string name;

  ResourceRef In(std::string ns) const;
  ResourceRef Named(std::string object_name) const;

  // /api/v1/namespaces/ns/pods or /apis/group/version/... (name and namespace where set).
  std::string CollectionPath() const;
  std::string ObjectPath() const;  // throws std::invalid_argument without a name
  std::string ApiVersion() const;  // "v1" or "group/version"
  std::string Describe() const;    // "pods ns/name" for messages
};

// The resources the operator and tests use most.
namespace resources {
ResourceRef Pods();
ResourceRef Services();
ResourceRef ConfigMaps();
ResourceRef Namespaces();
ResourceRef Nodes();
ResourceRef Events();  // events.k8s.io/v1
ResourceRef Leases();  // coordination.k8s.io/v1
ResourceRef Jobs();    // batch/v1
ResourceRef PyTorchJobs();
ResourceRef MPIJobs();
ResourceRef JobSets();
ResourceRef NodeValidations();  // ncclguard.io, cluster-scoped
ResourceRef NcclPolicies();     // ncclguard.io, cluster-scoped
ResourceRef CustomResourceDefinitions();
}  // namespace resources

// Percent-encodes a query parameter value.
std::string UrlEncode(const std::string& value);

}  // namespace ncclguard::kube
