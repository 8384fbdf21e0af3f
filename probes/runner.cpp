#include "probes/runner.h"

#include <condition_variable>
#include <mutex>
#include <thread>

#include "core/guide.h"

namespace ncclguard::probes {
namespace {

struct Slot {
  std::mutex mutex;
  std::condition_variable done_signal;
  bool done = false;
  CheckResult result;
};

CheckResult RunGuarded(const Check& check, ProbeContext& context) {
  try {
    return check.Run(context);
  } catch (const std::exception& e) {
    return Result(CheckStatus::Fail, "", "", "check failed: " + std::string(e.what()));
  } catch (...) {
    return Result(CheckStatus::Fail, "", "", "check failed with an unknown exception");
  }
}

}  // namespace

CheckRun RunChecks(const std::vector<const Check*>& checks,
                   const std::shared_ptr<ProbeContext>& context) {
  std::vector<std::shared_ptr<Slot>> slots;
  for (const Check* check : checks) {
    auto slot = std::make_shared<Slot>();
    slots.push_back(slot);
    std::thread([check, context, slot] {
      const auto started = std::chrono::steady_clock::now();
      CheckResult result = RunGuarded(*check, *context);
      result.duration = std::chrono::steady_clock::now() - started;
      const std::lock_guard lock(slot->mutex);
      slot->result = std::move(result);
      slot->done = true;
      slot->done_signal.notify_all();
    }).detach();
  }

  const auto timeout = context->Options().check_timeout;
  const auto started = std::chrono::steady_clock::now();
  const auto deadline = started + timeout;
  CheckRun run;
  for (std::size_t i = 0; i < checks.size(); ++i) {
    Slot& slot = *slots[i];
    std::unique_lock lock(slot.mutex);
    CheckResult result;
    if (slot.done_signal.wait_until(lock, deadline, [&] { return slot.done; })) {
      result = slot.result;
    } else {
      run.timed_out = true;
      result = Result(CheckStatus::Fail, "no answer", "an answer within the check timeout",
                      "check did not finish within " + std::to_string(timeout.count()) +
                          " ms (a hung driver call or file read)");
      result.duration = std::chrono::steady_clock::now() - started;
    }
    result.id = std::string(checks[i]->Id());
    result.guide =
        core::GuideLink(context->Options().policy.guide_base_url, checks[i]->Info().slug);
    run.results.push_back(std::move(result));
  }
  return run;
}

}  // namespace ncclguard::probes
