#include "probes/peer_directory.h"

#include <utility>

#include "core/contract.h"
#include "probes/publisher.h"

namespace ncclguard::probes {

KubePeerDirectory::KubePeerDirectory(std::shared_ptr<kube::Client> client, std::string node_name,
                                     std::string group, std::string field_manager)
    : client_(std::move(client)),
      node_name_(std::move(node_name)),
      group_(std::move(group)),
      field_manager_(std::move(field_manager)) {}

std::vector<core::Json> KubePeerDirectory::List() {
  kube::ListOptions options;
  options.resource_version = "0";  // the watch cache: every probe reads the group each round
  options.label_selector = std::string(core::kPeerGroupLabel) + "=" + group_;
  kube::ListPage page = client_->List(NodeValidations(), options);
  std::vector<core::Json> items;
  items.reserve(page.items.size());
  for (core::Json& item : page.items) items.push_back(std::move(item));
  return items;
}

void KubePeerDirectory::Publish(const core::Json& peer) {
  const kube::ResourceRef validation = NodeValidations().Named(node_name_);
  if (!labelled_) {
    client_->Patch(
        validation, kube::PatchType::kMerge,
        core::Json{{"metadata", {{"labels", {{std::string(core::kPeerGroupLabel), group_}}}}}},
        kube::WriteOptions{field_manager_, false});
    labelled_ = true;
  }
  client_->PatchStatus(NodeValidations().Named(node_name_), kube::PatchType::kMerge,
                       core::Json{{"status", {{"peer", peer}}}},
                       kube::WriteOptions{field_manager_, false});
}

}  // namespace ncclguard::probes
