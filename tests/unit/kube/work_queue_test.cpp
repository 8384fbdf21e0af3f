// The controllers' work queue: de-duplication, one worker per key, per-key backoff, delays.
// A fake clock drives every delay; nothing here waits on real time.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <mutex>
#include <optional>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "kube/work_queue.h"

namespace ncclguard::kube {
namespace {

using namespace std::chrono_literals;

class FakeClock {
 public:
  WorkQueue::Clock::time_point now() const { return now_; }
  void Advance(WorkQueue::Clock::duration by) { now_ += by; }
  std::function<WorkQueue::Clock::time_point()> Function() {
    return [this] { return now_; };
  }

 private:
  WorkQueue::Clock::time_point now_{};
};

TEST(WorkQueue, AddingAKeyTwiceQueuesItOnce) {
  WorkQueue queue;
  queue.Add("ns/a");
  queue.Add("ns/b");
  queue.Add("ns/a");
  EXPECT_EQ(queue.Len(), 2u);
  EXPECT_EQ(queue.TryGet(), "ns/a");
  EXPECT_EQ(queue.TryGet(), "ns/b");
  EXPECT_EQ(queue.TryGet(), std::nullopt);
}

TEST(WorkQueue, AKeyBeingProcessedIsNotHandedToASecondWorker) {
  WorkQueue queue;
  queue.Add("ns/a");
  auto first = queue.TryGet();
  ASSERT_EQ(first, "ns/a");
  queue.Add("ns/a");  // changed again while a worker holds it
  queue.Add("ns/a");
  EXPECT_EQ(queue.TryGet(), std::nullopt);
  queue.Done("ns/a");
  EXPECT_EQ(queue.TryGet(), "ns/a");  // once, after Done
  queue.Done("ns/a");
  EXPECT_EQ(queue.TryGet(), std::nullopt);
}

TEST(WorkQueue, RateLimitedRetriesBackOffPerKeyUntilForgotten) {
  FakeClock clock;
  WorkQueue queue({10ms, 80ms}, clock.Function());
  std::vector<WorkQueue::Clock::duration> delays;
  for (int i = 0; i < 5; ++i) {
    delays.push_back(queue.NextBackoff("ns/a"));
    queue.AddRateLimited("ns/a");
    EXPECT_EQ(queue.TryGet(), std::nullopt);
    clock.Advance(delays.back() - 1ms);
    EXPECT_EQ(queue.TryGet(), std::nullopt);
    clock.Advance(1ms);
    ASSERT_EQ(queue.TryGet(), "ns/a");
    queue.Done("ns/a");
  }
  EXPECT_EQ(delays, (std::vector<WorkQueue::Clock::duration>{10ms, 20ms, 40ms, 80ms, 80ms}));
  EXPECT_EQ(queue.NumRequeues("ns/a"), 5);
  EXPECT_EQ(queue.NextBackoff("ns/b"), 10ms);  // other keys are not slowed down
  queue.Forget("ns/a");
  EXPECT_EQ(queue.NumRequeues("ns/a"), 0);
  EXPECT_EQ(queue.NextBackoff("ns/a"), 10ms);
}

// 150 keys failing at once (an API server answering 500 to every write): their first retries
// are not all due after the 5 ms backoff; 100 are (the burst), then 10 a second. Before the
// overall limit, all 150 were retried within 5 ms, and again within 10 ms, 20 ms...
TEST(WorkQueue, RetriesOfAllKeysTogetherAreLimitedByTheOverallBucket) {
  FakeClock clock;
  WorkQueue queue({5ms, 1000s, 10, 100}, clock.Function());
  for (int i = 0; i < 150; ++i) queue.AddRateLimited("ns/" + std::to_string(i));
  const auto due = [&] {
    int count = 0;
    while (auto key = queue.TryGet()) {
      queue.Done(*key);
      ++count;
    }
    return count;
  };
  EXPECT_EQ(due(), 0);
  clock.Advance(5ms);
  EXPECT_EQ(due(), 100);
  clock.Advance(1s);
  EXPECT_EQ(due(), 10);
  clock.Advance(4s);
  EXPECT_EQ(due(), 40);
  // A key's own backoff still applies when the bucket has tokens again.
  clock.Advance(1h);
  queue.AddRateLimited("ns/0");
  clock.Advance(9ms);
  EXPECT_EQ(due(), 0);
  clock.Advance(1ms);
  EXPECT_EQ(due(), 1);
}

TEST(WorkQueue, AddAfterKeepsTheEarlierTimeAndAnImmediateAddWins) {
  FakeClock clock;
  WorkQueue queue({}, clock.Function());
  queue.AddAfter("ns/a", 10s);
  queue.AddAfter("ns/a", 3s);
  queue.AddAfter("ns/a", 20s);
  clock.Advance(3s);
  EXPECT_EQ(queue.TryGet(), "ns/a");
  queue.Done("ns/a");
  EXPECT_EQ(queue.TryGet(), std::nullopt);
  clock.Advance(1h);
  EXPECT_EQ(queue.TryGet(), std::nullopt);  // the later times were merged into the earliest

  queue.AddAfter("ns/b", 1h);
  queue.Add("ns/b");
  EXPECT_EQ(queue.TryGet(), "ns/b");
  queue.Done("ns/b");
  clock.Advance(1h);
  // Still due later: a delayed add is a request to look again, de-duplicated when queued.
  EXPECT_EQ(queue.TryGet(), "ns/b");
}

TEST(WorkQueue, ShutDownReleasesBlockedWorkers) {
  WorkQueue queue;
  std::optional<std::string> got = "unset";
  std::thread worker([&] { got = queue.Get(); });
  queue.ShutDown();
  worker.join();
  EXPECT_EQ(got, std::nullopt);
  queue.Add("ns/a");
  EXPECT_EQ(queue.Len(), 0u);
  EXPECT_TRUE(queue.shutting_down());
}

TEST(WorkQueue, BlockingGetHandsOutEachKeyToExactlyOneOfManyWorkers) {
  WorkQueue queue;
  std::mutex mutex;
  std::vector<std::string> processed;
  std::vector<std::thread> workers;
  for (int w = 0; w < 4; ++w) {
    workers.emplace_back([&] {
      while (auto key = queue.Get()) {
        {
          std::lock_guard lock(mutex);
          processed.push_back(*key);
        }
        queue.Done(*key);
      }
    });
  }
  for (int i = 0; i < 200; ++i) queue.Add("ns/" + std::to_string(i));
  while (true) {
    {
      std::lock_guard lock(mutex);
      if (processed.size() >= 200) break;
    }
    std::this_thread::yield();
  }
  queue.ShutDown();
  for (auto& worker : workers) worker.join();
  std::sort(processed.begin(), processed.end());
  EXPECT_EQ(std::unique(processed.begin(), processed.end()), processed.end());
  EXPECT_EQ(processed.size(), 200u);
}

// A held job its nodes can now release goes ahead of the keys its pods' changes queued.
TEST(WorkQueue, UrgentKeysAreServedFirstAndAQueuedKeyMovesUp) {
  WorkQueue queue;
  for (const char* key : {"ns/a", "ns/b", "ns/c"}) queue.Add(key);
  queue.AddUrgent("ns/c");  // queued already: moves up, once
  queue.AddUrgent("ns/d");
  queue.Add("ns/d");  // a normal add of an urgent key leaves it urgent
  EXPECT_EQ(queue.Len(), 4u);
  EXPECT_EQ(queue.TryGet(), "ns/c");
  EXPECT_EQ(queue.TryGet(), "ns/d");
  EXPECT_EQ(queue.TryGet(), "ns/a");
  EXPECT_EQ(queue.TryGet(), "ns/b");
  EXPECT_EQ(queue.TryGet(), std::nullopt) << "the entry ns/c left behind is not handed out";
}

TEST(WorkQueue, AnUrgentAddWhileAWorkerHoldsTheKeyQueuesItUrgentWhenDone) {
  WorkQueue queue;
  queue.Add("ns/a");
  ASSERT_EQ(queue.TryGet(), "ns/a");
  queue.Add("ns/b");
  queue.AddUrgent("ns/a");
  EXPECT_EQ(queue.TryGet(), "ns/b") << "ns/a is held: not handed out twice";
  queue.Add("ns/c");
  queue.Done("ns/a");
  EXPECT_EQ(queue.TryGet(), "ns/a");
  EXPECT_EQ(queue.TryGet(), "ns/c");
  EXPECT_EQ(queue.TryGet(), std::nullopt);
}

// Against a model: every key added is handed out exactly once per add that found it not waiting,
// never to two workers at once, urgent ones before the others whenever both wait.
TEST(WorkQueue, RandomAddsUrgentAddsAndDonesKeepTheQueuesPromises) {
  for (unsigned seed = 1; seed <= 8; ++seed) {
    std::mt19937 random(seed);
    WorkQueue queue;
    std::set<std::string> waiting, urgent, held;
    for (int step = 0; step < 2000; ++step) {
      const std::string key = "ns/" + std::to_string(random() % 12);
      switch (random() % 4) {
        case 0:
          queue.Add(key);
          waiting.insert(key);
          break;
        case 1:
          queue.AddUrgent(key);
          waiting.insert(key);
          urgent.insert(key);
          break;
        case 2: {
          const std::optional<std::string> got = queue.TryGet();
          std::set<std::string> ready;
          for (const std::string& k : waiting) {
            if (!held.contains(k)) ready.insert(k);
          }
          ASSERT_EQ(got.has_value(), !ready.empty()) << "seed " << seed << " step " << step;
          if (!got) break;
          ASSERT_TRUE(ready.contains(*got));
          const bool urgent_ready = std::any_of(ready.begin(), ready.end(),
                                                [&](const auto& k) { return urgent.contains(k); });
          ASSERT_EQ(urgent.contains(*got), urgent_ready) << "seed " << seed << " step " << step;
          waiting.erase(*got);
          urgent.erase(*got);
          held.insert(*got);
          break;
        }
        default:
          if (held.empty()) break;
          auto it = held.begin();
          std::advance(it, random() % held.size());
          queue.Done(*it);
          held.erase(it);
      }
      std::size_t ready = 0;
      for (const std::string& k : waiting) ready += held.contains(k) ? 0 : 1;
      ASSERT_EQ(queue.Len(), ready);
    }
  }
}

}  // namespace
}  // namespace ncclguard::kube
