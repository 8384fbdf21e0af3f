// The fabric tier of the checks between nodes (docs/guide.md section 2): a reliable-datagram
// (FI_EP_RDM) ping-pong through libfabric with the provider the node's own checks use: `efa` on
// EFA nodes, where it is the only test that finds a security group without its self-referencing
// rule (EFA is not IP: TCP passes where EFA traffic is dropped), and `tcp` where there is no EFA
// device, which moves data on its own ports as NCCL's socket path does. One side opens an
// endpoint and answers pings until a deadline; the other opens its own, sends one ping carrying
// its address and waits for the pong. libfabric is loaded at run time, as for the node checks.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>

namespace ncclguard::probes {

struct FabricOptions {
  std::string provider = "efa";
  // A numeric address the endpoint binds to (FI_SOURCE), for providers that take one (tcp);
  // empty: the provider's first domain.
  std::string source;
  // The port (service) it binds to with `source`, for providers that take one (tcp); empty: any.
  std::string service;
};

enum class FabricOutcome {
  kPassed,    // the pong came back
  kTimedOut,  // nothing within the timeout: what a missing self-referencing rule looks like
  kFailed,    // the provider reported an error (its words in `detail`)
};

struct FabricTest {
  FabricOutcome outcome = FabricOutcome::kTimedOut;
  std::chrono::microseconds took{0};
  std::string detail;
};

// One RDM endpoint. Open throws core::InputError when libfabric, the provider or an endpoint
// cannot be had (the provider's own words).
class FabricEndpoint {
 public:
  static std::unique_ptr<FabricEndpoint> Open(const FabricOptions& options);
  virtual ~FabricEndpoint() = default;

  // The endpoint's address (fi_getname) as lower-case hex, what a peer pings.
  virtual std::string Address() const = 0;
  // "tcp;ofi_rxm", "efa": the provider that answered.
  virtual std::string Provider() const = 0;
  // Answers every ping until `deadline` or `stop`; returns how many it answered.
  virtual std::uint64_t Answer(std::chrono::steady_clock::time_point deadline,
                               const std::atomic<bool>* stop) = 0;
  // One ping to the endpoint at `peer_address` (hex, from its Address()) within `timeout`.
  // Throws core::InputError for an address that is not hex of a plausible length.
  virtual FabricTest Ping(const std::string& peer_address, std::chrono::milliseconds timeout) = 0;
};

std::string_view FabricOutcomeName(FabricOutcome outcome);  // "passed", "timed-out", "failed"

}  // namespace ncclguard::probes
