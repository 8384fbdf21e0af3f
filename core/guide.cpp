#include "core/guide.h"

#include <algorithm>
#include <array>

namespace ncclguard::core {
namespace {

constexpr std::array<GuideSection, 22> kSections{{
    {1, "nccl-timeout", "NCCL timeout / rendezvous hang"},
    {2, "security-group", "Security-group self-reference rules"},
    {3, "socket-ifname", "NCCL_SOCKET_IFNAME interface selection"},
    {4, "container-oom", "Container OOM, exit code 137"},
    {5, "gradient-sync", "Wrong results, gradient sync"},
    {6, "efa-config", "EFA configuration"},
    {7, "node-hardware", "Node hardware failures (Xid, ECC, NVLink)"},
    {8, "slurm", "Slurm-specific procedures"},
    {9, "nccl-ras", "NCCL RAS live job health"},
    {10, "nccl-version", "NCCL / driver version mismatch, image pinning"},
    {11, "gpu-oom", "CUDA out of memory"},
    {12, "dns-rendezvous", "DNS resolution, headless service, MASTER_ADDR"},
    {13, "efa-tcp-fallback", "EFA falls back to TCP"},
    {14, "gpu-p2p", "GPU P2P blocked (ACS/IOMMU)"},
    {15, "stale-shm", "/dev/shm, stale shared memory, RemoveIPC"},
    {16, "host-firewall", "Host firewall blocking NCCL"},
    {17, "memlock", "RDMA memory registration, memlock, IPC_LOCK"},
    {18, "frameworks", "FSDP, DeepSpeed, Megatron-LM"},
    {19, "advanced-tuning", "NVLS, PXN, CollNet, mixed instance families"},
    {20, "pod-lifecycle", "Pending, CrashLoopBackOff, init containers"},
    {21, "gpu-row-remap", "GPU row remap, DCGM health"},
    {22, "sagemaker-hyperpod", "On SageMaker HyperPod"},
}};

}  // namespace

std::span<const GuideSection> GuideSections() { return kSections; }

bool IsGuideSlug(std::string_view slug) {
  return std::any_of(kSections.begin(), kSections.end(),
                     [&](const GuideSection& s) { return s.slug == slug; });
}

std::string GuideLink(std::string_view base_url, std::string_view slug) {
  while (!base_url.empty() && (base_url.back() == '#' || base_url.back() == '/')) {
    base_url.remove_suffix(1);
  }
  std::string link(base_url);
  link += '#';
  link += slug;
  return link;
}

}  // namespace ncclguard::core
