#include "probes/context.h"

namespace ncclguard::probes {

ProbeContext::ProbeContext(ProbeOptions options, std::shared_ptr<FactSources> sources)
    : options_(std::move(options)), files_(options_.host_root), sources_(std::move(sources)) {
  if (options_.instance_type) instance_ = options_.policy.FindInstanceType(*options_.instance_type);
}

std::string ProbeContext::CatalogGap() const {
  if (!options_.instance_type)
    return "instance type unknown: pass --instance-type or --instance-type-file";
  if (instance_ == nullptr)
    return "instance type " + *options_.instance_type +
           " is not in the instance catalog (add it to the policy's instanceTypes)";
  return "";
}

const FabricFacts& ProbeContext::Fabric() {
  std::call_once(fabric_once_, [&] { fabric_ = sources_->Fabric(options_.fabric_provider); });
  return fabric_;
}

const GpuFacts& ProbeContext::Gpu() {
  std::call_once(gpu_once_, [&] { gpu_ = sources_->Gpu(options_.measure_bandwidth); });
  return gpu_;
}

const NcclFacts& ProbeContext::Nccl() {
  std::call_once(nccl_once_, [&] { nccl_ = sources_->Nccl(); });
  return nccl_;
}

std::optional<FileSystemUsage> ProbeContext::Usage(std::string_view host_path) {
  return sources_->Usage(files_.Path(host_path));
}

std::chrono::system_clock::time_point ProbeContext::Now() { return sources_->Now(); }

}  // namespace ncclguard::probes
