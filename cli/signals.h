// SIGTERM and SIGINT (a pod's termination, ^C), the signals that end the long-running
// subcommands (controller, webhook, probe --publish) gracefully: taken synchronously by one
// thread, so that what follows them is ordinary code rather than a signal handler.
#pragma once

#include <csignal>

#include <atomic>
#include <functional>
#include <string>
#include <string_view>
#include <thread>

#include "kube/stop_token.h"

namespace ncclguard::cli {

class TerminationSignals {
 public:
  // Blocks SIGTERM and SIGINT in the calling thread. Construct it before any other thread
  // starts: threads inherit the mask, so none of them takes a signal it does not wait for (the
  // webhook's listener threads, cpprestsdk's pool, among them).
  TerminationSignals();
  // Ends and joins the thread StopOnSignal started. The signals stay blocked.
  ~TerminationSignals();
  TerminationSignals(const TerminationSignals&) = delete;
  TerminationSignals& operator=(const TerminationSignals&) = delete;

  // Waits in this thread for SIGTERM or SIGINT and logs "received SIGTERM; <then>".
  void Wait(std::string_view then) const;

  // Waits on a thread of its own: on SIGTERM or SIGINT logs "received SIGTERM; <then>", runs
  // `on_signal` (if given), then fires `stop`. The thread also ends, taking no signal, when
  // `stop` fires for another reason or this object goes. Call it at most once.
  void StopOnSignal(kube::StopToken stop, std::string then,
                    std::function<void()> on_signal = nullptr);

 private:
  sigset_t signals_;
  std::atomic<bool> done_{false};
  std::thread waiter_;
};

}  // namespace ncclguard::cli
