#include "core/kueue.h"

#include <string>

namespace ncclguard::core {

bool QueuedByKueue(const Json& job) {
  if (!job.is_object()) return false;
  const auto metadata = job.find("metadata");
  if (metadata == job.end() || !metadata->is_object()) return false;
  const auto labels = metadata->find("labels");
  if (labels == metadata->end() || !labels->is_object()) return false;
  const auto queue = labels->find(std::string(kKueueQueueNameLabel));
  return queue != labels->end() && queue->is_string() && !queue->get<std::string>().empty();
}

}  // namespace ncclguard::core
