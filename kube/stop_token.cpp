#include "kube/stop_token.h"

#include <utility>
#include <vector>

namespace ncclguard::kube {

StopToken::StopToken() : state_(std::make_shared<State>()) {}

void StopToken::Stop() const {
  std::vector<std::function<void()>> wakers;
  {
    std::lock_guard lock(state_->mutex);
    if (state_->stopped) return;
    state_->stopped = true;
    for (auto& [id, wake] : state_->wakers) wakers.push_back(wake);
  }
  state_->changed.notify_all();
  for (auto& wake : wakers) wake();
}

bool StopToken::stopped() const {
  std::lock_guard lock(state_->mutex);
  return state_->stopped;
}

bool StopToken::WaitFor(std::chrono::steady_clock::duration duration) const {
  std::unique_lock lock(state_->mutex);
  return state_->changed.wait_for(lock, duration, [&] { return state_->stopped; });
}

int StopToken::OnStop(std::function<void()> wake) const {
  std::unique_lock lock(state_->mutex);
  if (state_->stopped) {
    lock.unlock();
    wake();
    return -1;
  }
  int id = state_->next_id++;
  state_->wakers.emplace(id, std::move(wake));
  return id;
}

void StopToken::RemoveOnStop(int id) const {
  std::lock_guard lock(state_->mutex);
  state_->wakers.erase(id);
}

StopToken LinkedStopToken(const StopToken& parent) {
  StopToken child;
  // The parent keeps a callback into the child's state; both are small and shared.
  parent.OnStop([child] { child.Stop(); });
  return child;
}

}  // namespace ncclguard::kube
