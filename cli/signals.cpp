#include "cli/signals.h"

#include <pthread.h>

#include <ctime>
#include <stdexcept>
#include <utility>

#include "log/log.h"

namespace ncclguard::cli {
namespace {

void LogReceived(int signal, std::string_view then) {
  log::Info(std::string("received ") + (signal == SIGTERM ? "SIGTERM" : "SIGINT") + "; " +
            std::string(then));
}

}  // namespace

TerminationSignals::TerminationSignals() {
  sigemptyset(&signals_);
  sigaddset(&signals_, SIGTERM);
  sigaddset(&signals_, SIGINT);
  pthread_sigmask(SIG_BLOCK, &signals_, nullptr);
}

TerminationSignals::~TerminationSignals() {
  done_ = true;
  if (waiter_.joinable()) waiter_.join();
}

void TerminationSignals::Wait(std::string_view then) const {
  int received = 0;
  sigwait(&signals_, &received);
  LogReceived(received, then);
}

void TerminationSignals::StopOnSignal(kube::StopToken stop, std::string then,
                                      std::function<void()> on_signal) {
  if (waiter_.joinable()) throw std::logic_error("TerminationSignals::StopOnSignal called twice");
  waiter_ = std::thread(
      [this, stop = std::move(stop), then = std::move(then), on_signal = std::move(on_signal)] {
        // A timed wait, so that the thread notices a stop with no signal (a lost lease, a finished
        // run) within a tick.
        const timespec tick{0, 200'000'000};
        while (!done_ && !stop.stopped()) {
          const int received = sigtimedwait(&signals_, nullptr, &tick);
          if (received == SIGTERM || received == SIGINT) {
            LogReceived(received, then);
            if (on_signal) on_signal();
            stop.Stop();
            return;
          }
        }
      });
}

}  // namespace ncclguard::cli
