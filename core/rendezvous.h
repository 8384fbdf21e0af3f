#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "core/json.h"

namespace ncclguard::core {

// Rendezvous naming shared by the operator (which creates the headless Service), the mutating
// webhook (which sets the pods' subdomain and a missing MASTER_ADDR) and the master-addr rule.
// A pod named by the Service resolves as <hostname>.<service>.<namespace>.svc.<clusterDomain>.

// The headless Service of a training job, which is also its pods' `subdomain`: the job's name
// (or the field its kind's KindInfo::service_name_field names, when set: a JobSet's
// spec.network.subdomain), made a valid DNS-1035 label (a name that is not
// one is shortened or rewritten and gets a hash suffix, so different jobs keep different names).
// Empty for an object without a name. Never throws.
std::string RendezvousServiceName(const Json& job);

// The hostname of the pod that hosts rank 0, as the kind's operator names it (KindInfo::rank_zero):
// PyTorchJob <name>-master-0 (or <name>-worker-0 without a Master), MPIJob <name>-worker-0,
// JobSet <name>-<first replicatedJob>-0-0, Indexed batch Job <name>-0. nullopt for other objects.
// Throws InputError when a field it reads has the wrong type.
std::optional<std::string> RankZeroHostname(const Json& job);

// <rank-0 hostname>.<service>.<namespace>.svc.<cluster_domain>, the MASTER_ADDR of the job.
std::optional<std::string> MasterAddress(const Json& job, std::string_view cluster_domain);

// A DNS-1035 label (lower-case alphanumerics and '-', starting with a letter, at most 63).
bool IsDns1035Label(std::string_view name);

}  // namespace ncclguard::core
