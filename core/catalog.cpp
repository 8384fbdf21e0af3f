#include "core/catalog.h"

#include <array>

namespace ncclguard::core {
namespace {

constexpr std::array<CatalogEntry, 14> kNodeChecks{{
    {"efa-device-count", "efa-config"},
    {"efa-provider", "efa-tcp-fallback"},
    {"gpudirect-rdma", "efa-config"},
    {"memlock-limit", "memlock"},
    {"dev-shm-stale", "stale-shm"},
    {"removeipc", "stale-shm"},
    {"gpu-count", "node-hardware"},
    {"gpu-p2p", "gpu-p2p"},
    {"pci-acs", "gpu-p2p"},
    {"gpu-row-remap", "gpu-row-remap"},
    {"gpu-ecc", "node-hardware"},
    {"nvlink-status", "node-hardware"},
    {"nccl-version", "nccl-version"},
    {"driver-version", "nccl-version"},
}};

constexpr std::array<CatalogEntry, 9> kDiagnoses{{
    {"container-oom-killed", "container-oom"},
    {"gpu-oom", "gpu-oom"},
    {"segfault", "nccl-version"},
    {"image-pull-failed", "pod-lifecycle"},
    {"efa-unschedulable", "efa-tcp-fallback"},
    {"untolerated-taint", "pod-lifecycle"},
    {"nccl-watchdog-timeout", "nccl-timeout"},
    {"insufficient-validated-nodes", "efa-config"},
    {"version-drift", "nccl-version"},
}};

}  // namespace

std::span<const CatalogEntry> NodeChecks() { return kNodeChecks; }
std::span<const CatalogEntry> Diagnoses() { return kDiagnoses; }

}  // namespace ncclguard::core
