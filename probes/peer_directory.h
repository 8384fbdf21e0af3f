// The peer checks' directory over the API server (probes/peer_round.h): the group read from the
// NodeValidations labelled with it (a list served from the API server's watch cache), this
// node's status.peer written as a merge patch of the status subresource.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "kube/client.h"
#include "probes/peer_round.h"

namespace ncclguard::probes {

class KubePeerDirectory : public PeerDirectory {
 public:
  // `group`: core::PeerGroupOf for this node; its NodeValidation is labelled with it
  // (core::kPeerGroupLabel) at the first write, and the list selects it.
  KubePeerDirectory(std::shared_ptr<kube::Client> client, std::string node_name, std::string group,
                    std::string field_manager = "ncclguard-probe");
  std::vector<core::Json> List() override;
  void Publish(const core::Json& peer) override;

 private:
  std::shared_ptr<kube::Client> client_;
  std::string node_name_;
  std::string group_;
  std::string field_manager_;
  bool labelled_ = false;
};

}  // namespace ncclguard::probes
