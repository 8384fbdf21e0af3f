#pragma once

#include <chrono>
#include <filesystem>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include "core/policy.h"
#include "probes/facts.h"
#include "probes/host_files.h"

namespace ncclguard::probes {

struct ProbeOptions {
  std::filesystem::path host_root = "/";
  std::string node_name;
  // The node's instance type when known, where it came from, or why it is unknown.
  std::optional<std::string> instance_type;
  std::string instance_type_source;
  // libfabric provider the EFA checks query; "efa" except in tests (Debian's "tcp"/"sockets").
  std::string fabric_provider = "efa";
  bool measure_bandwidth = false;
  // The network namespace host-firewall reads: a /proc/<pid>/ns/net file entered with setns, or
  // "current" for the probe's own. nullopt: the host's, <host_root>/proc/1/ns/net.
  std::optional<std::filesystem::path> firewall_netns;
  // This node's verdict from the checks between nodes (core/peer_status.h, status.peer.standing)
  // when the probe runs them, "" otherwise: host-firewall fails a rule it finds when the node's
  // peers cannot reach it.
  std::string peer_standing;
  std::chrono::milliseconds check_timeout{10000};
  core::Policy policy = core::Policy::Defaults();
};

// What every check reads from: options, host files, and facts gathered once and shared (several
// checks look at the same libfabric and GPU answers). Thread-safe: checks run concurrently.
class ProbeContext {
 public:
  ProbeContext(ProbeOptions options, std::shared_ptr<FactSources> sources);

  const ProbeOptions& Options() const { return options_; }
  const HostFiles& Files() const { return files_; }

  // The node's catalog entry; nullptr when the type is unknown or not in the catalog, and then
  // CatalogGap() is the reason, for Skip messages.
  const core::InstanceType* Instance() const { return instance_; }
  std::string CatalogGap() const;

  const FabricFacts& Fabric();
  const GpuFacts& Gpu();
  const NcclFacts& Nccl();
  std::optional<FileSystemUsage> Usage(std::string_view host_path);
  std::chrono::system_clock::time_point Now();

 private:
  ProbeOptions options_;
  HostFiles files_;
  std::shared_ptr<FactSources> sources_;
  const core::InstanceType* instance_ = nullptr;
  std::once_flag fabric_once_, gpu_once_, nccl_once_;
  FabricFacts fabric_;
  GpuFacts gpu_;
  NcclFacts nccl_;
};

}  // namespace ncclguard::probes
