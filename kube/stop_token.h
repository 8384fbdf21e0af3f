// A stop request shared between the thread that asks and the loops that must end promptly:
// sleeps wake up at once and in-flight streams are woken through registered callbacks.
#pragma once

#include <chrono>
#include <condition_variable>
#include <functional>
#include <map>
#include <memory>
#include <mutex>

namespace ncclguard::kube {

class StopToken {
 public:
  StopToken();

  void Stop() const;
  bool stopped() const;

  // Sleeps up to `duration`; returns true when stopped (now or during the wait).
  bool WaitFor(std::chrono::steady_clock::duration duration) const;

  // `wake` runs on Stop() (or at once if already stopped) until the returned id is removed.
  int OnStop(std::function<void()> wake) const;
  void RemoveOnStop(int id) const;

 private:
  struct State {
    std::mutex mutex;
    std::condition_variable changed;
    bool stopped = false;
    int next_id = 0;
    std::map<int, std::function<void()>> wakers;
  };
  std::shared_ptr<State> state_;
};

// A token that stops when either of two tokens does (a leader's lease lost or the process ends).
StopToken LinkedStopToken(const StopToken& parent);

}  // namespace ncclguard::kube
