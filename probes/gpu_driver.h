#pragma once

#include "probes/facts.h"

namespace ncclguard::probes {

// Fill the CUDA part / the NVML part of the facts. Missing libraries, missing symbols and
// driver errors end up as the *_error fields; nothing throws.
void CollectCudaFacts(bool measure_bandwidth, GpuFacts& facts);
void CollectNvmlFacts(GpuFacts& facts);

}  // namespace ncclguard::probes
