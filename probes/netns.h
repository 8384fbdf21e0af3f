// Work done inside another network namespace (the host's, from a probe pod on the pod network):
// a socket belongs to the namespace of the thread that creates it, and setns changes the calling
// thread only, so the work runs on a thread of its own that enters the namespace and ends with it.
// Entering a namespace the probe did not create takes CAP_SYS_ADMIN (the privileged probe).
#pragma once

#include <functional>
#include <string>

namespace ncclguard::probes {

// Runs `work` on a new thread inside the network namespace at `path` (a /proc/PID/ns/net file)
// and waits for it. Throws std::runtime_error naming the path and why when the namespace cannot
// be entered; an exception from `work` is rethrown here.
void RunInNetworkNamespace(const std::string& path, const std::function<void()>& work);

}  // namespace ncclguard::probes
