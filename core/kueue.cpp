#include "core/kueue.h"

#include "core/json_access.h"

namespace ncclguard::core {

bool QueuedByKueue(const Json& job) { return !LabelValue(job, kKueueQueueNameLabel).empty(); }

}  // namespace ncclguard::core
