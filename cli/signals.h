#pragma once

#include <csignal>

namespace ncclguard::cli {

// Blocks SIGTERM and SIGINT in the calling thread, before any other thread starts, so that
// every thread inherits the mask and one thread takes the signal with sigwait. Returns the set.
inline sigset_t BlockTerminationSignals() {
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  return signals;
}

}  // namespace ncclguard::cli
