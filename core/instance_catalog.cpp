#include "core/policy.h"

namespace ncclguard::core {

// The built-in catalog: NVIDIA GPU instance types that support EFA, with the most EFA devices a
// pod can request (vpc.amazonaws.com/efa; EC2's EfaInfo.MaximumEfaInterfaces), the GPU count and
// whether the type uses GPUDirect RDMA (aws-ofi-nccl requires it there). Where every number comes
// from, and the types left out and why: docs/instance-types.md. Sorted by name (byte order).
std::vector<InstanceType> BuiltInInstanceTypes() {
  return {
      {"g4dn.12xlarge", 1, 4, false},     // T4
      {"g4dn.16xlarge", 1, 1, false},     // T4
      {"g4dn.8xlarge", 1, 1, false},      // T4
      {"g4dn.metal", 1, 8, false},        // T4
      {"g5.12xlarge", 1, 4, false},       // A10G
      {"g5.16xlarge", 1, 1, false},       // A10G
      {"g5.24xlarge", 1, 4, false},       // A10G
      {"g5.48xlarge", 1, 8, false},       // A10G
      {"g5.8xlarge", 1, 1, false},        // A10G
      {"g6.12xlarge", 1, 4, false},       // L4
      {"g6.16xlarge", 1, 1, false},       // L4
      {"g6.24xlarge", 1, 4, false},       // L4
      {"g6.48xlarge", 1, 8, false},       // L4
      {"g6.8xlarge", 1, 1, false},        // L4
      {"g6e.12xlarge", 1, 4, false},      // L40S
      {"g6e.16xlarge", 1, 1, false},      // L40S
      {"g6e.24xlarge", 2, 4, false},      // L40S
      {"g6e.48xlarge", 4, 8, false},      // L40S
      {"g6e.8xlarge", 1, 1, false},       // L40S
      {"g7e.12xlarge", 1, 2, true},       // RTX PRO 6000 Blackwell Server
      {"g7e.24xlarge", 2, 4, true},       // RTX PRO 6000 Blackwell Server
      {"g7e.48xlarge", 4, 8, true},       // RTX PRO 6000 Blackwell Server
      {"g7e.8xlarge", 1, 1, false},       // RTX PRO 6000 Blackwell Server
      {"gr6.8xlarge", 1, 1, false},       // L4
      {"p3dn.24xlarge", 1, 8, false},     // V100 32 GB
      {"p4d.24xlarge", 4, 8, true},       // A100 40 GB
      {"p4de.24xlarge", 4, 8, true},      // A100 80 GB
      {"p5.48xlarge", 32, 8, true},       // H100
      {"p5.4xlarge", 1, 1, false},        // H100
      {"p5e.48xlarge", 32, 8, true},      // H200
      {"p5en.48xlarge", 16, 8, true},     // H200
      {"p6-b200.48xlarge", 8, 8, true},   // B200
      {"p6-b300.48xlarge", 16, 8, true},  // B300
  };
}

}  // namespace ncclguard::core
