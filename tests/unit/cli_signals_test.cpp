// cli::TerminationSignals (cli/signals.h). A signal sent to the process must find every thread
// blocking it, so the tests that send one run in a child process (a death test) that blocks
// before it starts any thread; the others block only in a thread of their own.
#include "cli/signals.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdlib>
#include <thread>

#include "kube/stop_token.h"

namespace ncclguard::cli {
namespace {

using std::chrono::steady_clock;

class TerminationSignalsTest : public ::testing::Test {
 protected:
  // The child re-executes the test binary rather than forking this (threaded) process.
  void SetUp() override { GTEST_FLAG_SET(death_test_style, "threadsafe"); }
};

TEST_F(TerminationSignalsTest, SigtermLogsRunsTheCallbackAndFiresTheStopToken) {
  EXPECT_EXIT(
      {
        TerminationSignals signals;
        const kube::StopToken stop;
        std::atomic<bool> called{false};
        signals.StopOnSignal(stop, "testing", [&called] { called = true; });
        kill(getpid(), SIGTERM);
        const bool stopped = stop.WaitFor(std::chrono::seconds(10));
        std::exit(stopped && called ? 0 : 1);
      },
      ::testing::ExitedWithCode(0), "received SIGTERM; testing");
}

TEST_F(TerminationSignalsTest, WaitReturnsOnSigint) {
  EXPECT_EXIT(
      {
        const TerminationSignals signals;
        kill(getpid(), SIGINT);  // pending until the wait takes it
        signals.Wait("testing");
        std::exit(0);
      },
      ::testing::ExitedWithCode(0), "received SIGINT; testing");
}

// Runs `body` on a thread of its own (the signals stay blocked there only) and returns how long
// it took.
steady_clock::duration TimeOnOwnThread(void (*body)()) {
  const auto start = steady_clock::now();
  std::thread(body).join();
  return steady_clock::now() - start;
}

TEST_F(TerminationSignalsTest, AStopWithoutASignalEndsTheWaiterQuietly) {
  const auto took = TimeOnOwnThread([] {
    TerminationSignals signals;
    const kube::StopToken stop;
    std::atomic<bool> called{false};
    signals.StopOnSignal(stop, "testing", [&called] { called = true; });
    stop.Stop();
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    EXPECT_FALSE(called);
  });
  EXPECT_LT(took, std::chrono::seconds(2));
}

TEST_F(TerminationSignalsTest, WaiterEndsWithTheObject) {
  const auto took = TimeOnOwnThread([] {
    TerminationSignals signals;
    const kube::StopToken stop;
    signals.StopOnSignal(stop, "testing");
  });
  EXPECT_LT(took, std::chrono::seconds(2));
}

}  // namespace
}  // namespace ncclguard::cli
