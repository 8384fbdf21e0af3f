// Token bucket and jittered backoff, on a fake clock and a fixed seed.
#include <gtest/gtest.h>

#include <chrono>

#include "kube/backoff.h"
#include "kube/rate_limiter.h"

namespace ncclguard::kube {
namespace {

using namespace std::chrono_literals;

TEST(TokenBucket, BurstIsFreeThenOneTokenPerOneOverQps) {
  TokenBucket::Clock::time_point now{};
  TokenBucket bucket(10, 3, [&] { return now; });
  EXPECT_EQ(bucket.Reserve(), 0ns);
  EXPECT_EQ(bucket.Reserve(), 0ns);
  EXPECT_EQ(bucket.Reserve(), 0ns);
  // Empty: the next callers queue 100 ms apart.
  EXPECT_EQ(std::chrono::round<std::chrono::milliseconds>(bucket.Reserve()), 100ms);
  EXPECT_EQ(std::chrono::round<std::chrono::milliseconds>(bucket.Reserve()), 200ms);
  // After a long idle time the bucket holds `burst` tokens again, not more.
  now += 10s;
  for (int i = 0; i < 3; ++i) EXPECT_EQ(bucket.Reserve(), 0ns);
  EXPECT_GT(bucket.Reserve(), 0ns);
}

TEST(TokenBucket, RefillsAtQps) {
  TokenBucket::Clock::time_point now{};
  TokenBucket bucket(5, 1, [&] { return now; });
  EXPECT_EQ(bucket.Reserve(), 0ns);
  now += 200ms;
  EXPECT_EQ(bucket.Reserve(), 0ns);
  now += 100ms;
  EXPECT_EQ(std::chrono::round<std::chrono::milliseconds>(bucket.Reserve()), 100ms);
}

TEST(TokenBucket, ZeroQpsMeansUnlimited) {
  TokenBucket bucket(0, 1);
  for (int i = 0; i < 1000; ++i) EXPECT_EQ(bucket.Reserve(), 0ns);
}

TEST(TokenBucket, WaitReturnsFalseWhenStopped) {
  TokenBucket::Clock::time_point now{};
  TokenBucket bucket(0.001, 1, [&] { return now; });
  StopToken stop;
  EXPECT_TRUE(bucket.Wait(stop));
  stop.Stop();
  EXPECT_FALSE(bucket.Wait(stop));  // would wait ~1000 s; the stop ends it at once
}

TEST(Backoff, GrowsByTheFactorWithinTheJitterAndIsCapped) {
  Backoff backoff({100ms, 1000ms, 2.0, 0.5}, 42);
  std::vector<long> bases = {100, 200, 400, 800, 1000, 1000};
  for (long base : bases) {
    long delay = backoff.Next().count();
    EXPECT_GE(delay, base);
    EXPECT_LE(delay, std::min(1000L, base + base / 2));
  }
  EXPECT_EQ(backoff.attempts(), 6);
  backoff.Reset();
  EXPECT_LE(backoff.Next().count(), 150);
}

TEST(Backoff, JitterSpreadsReconnects) {
  Backoff first({1000ms, 30000ms, 2.0, 0.5}, 1);
  Backoff second({1000ms, 30000ms, 2.0, 0.5}, 2);
  EXPECT_NE(first.Next(), second.Next());
}

TEST(StopToken, WakesRegisteredStreamsAndLinkedTokens) {
  StopToken parent;
  StopToken child = LinkedStopToken(parent);
  int woken = 0;
  int id = parent.OnStop([&] { ++woken; });
  int removed = parent.OnStop([&] { woken += 100; });
  parent.RemoveOnStop(removed);
  EXPECT_FALSE(parent.WaitFor(0ms));
  parent.Stop();
  parent.Stop();
  EXPECT_EQ(woken, 1);
  EXPECT_TRUE(child.stopped());
  EXPECT_TRUE(parent.WaitFor(1h));  // returns at once
  parent.RemoveOnStop(id);
  int late = 0;
  parent.OnStop([&] { ++late; });  // already stopped: runs at once
  EXPECT_EQ(late, 1);
}

}  // namespace
}  // namespace ncclguard::kube
