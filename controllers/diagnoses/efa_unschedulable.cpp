#include <cctype>
#include <cstdint>

#include "controllers/diagnoses/pod_status.h"
#include "controllers/diagnosis.h"
#include "controllers/json_fields.h"

namespace ncclguard::controllers::diagnoses {
namespace {

constexpr std::string_view kEfaShort = "Insufficient vpc.amazonaws.com/efa";
constexpr std::string_view kGpuShort = "Insufficient nvidia.com/gpu";

// The scheduler's "N <reason>" count in "0/4 nodes are available: 3 Insufficient ..., ...";
// 0 when the reason is absent or has no count before it.
std::int64_t NodesWith(std::string_view message, std::string_view reason) {
  const auto at = message.find(reason);
  if (at == std::string_view::npos || at < 2 || message[at - 1] != ' ') return 0;
  std::size_t begin = at - 1;
  while (begin > 0 && std::isdigit(static_cast<unsigned char>(message[begin - 1])) != 0) --begin;
  std::int64_t count = 0;
  for (std::size_t i = begin; i + 1 < at && count < 1'000'000; ++i)
    count = count * 10 + (message[i] - '0');
  return count;
}

class EfaUnschedulable final : public Diagnosis {
 public:
  EfaUnschedulable()
      : Diagnosis({"efa-unschedulable", "efa-tcp-fallback", 70,
                   "A FailedScheduling Event or PodScheduled=False condition says Insufficient "
                   "vpc.amazonaws.com/efa on more nodes than it says Insufficient nvidia.com/gpu "
                   "(a node has the GPUs but not the EFA devices; a node short of both is full).",
                   "No node offers the EFA devices requested: check the EFA device plugin on the "
                   "nodes and that the request matches the instance type."}) {}

  std::vector<std::string> Find(const DiagnosisContext& context) const override {
    // A full node is short of GPUs and EFA devices alike (each GPU pod holds its share of both):
    // the real scheduler then says "1 Insufficient nvidia.com/gpu, 1 Insufficient
    // vpc.amazonaws.com/efa" and the pod simply waits its turn. Only a node that has the GPUs
    // but lacks the EFA devices points at EFA.
    std::vector<std::string> lines;
    for (std::string& line : SchedulingFailures(context.pods, context.events, kEfaShort)) {
      if (NodesWith(line, kEfaShort) > NodesWith(line, kGpuShort)) lines.push_back(std::move(line));
    }
    return lines;
  }
};

NCCLGUARD_REGISTER(EfaUnschedulable);

}  // namespace
}  // namespace ncclguard::controllers::diagnoses
