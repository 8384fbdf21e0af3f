// Event de-duplication: which occurrences count onto an existing Event.
#include <gtest/gtest.h>

#include <chrono>

#include "kube/event_recorder.h"
#include "kube/leader_election.h"

namespace ncclguard::kube {
namespace {

using namespace std::chrono_literals;

EventSpec Spec(const std::string& note = "3/4 nodes validated") {
  EventSpec spec;
  spec.regarding = {{"apiVersion", "kubeflow.org/v1"},
                    {"kind", "PyTorchJob"},
                    {"namespace", "ml"},
                    {"name", "train"},
                    {"uid", "u-1"}};
  spec.type = "Warning";
  spec.reason = "NcclPreflightPending";
  spec.action = "Gate";
  spec.note = note;
  return spec;
}

TEST(EventDedup, KeyDependsOnObjectReasonAndNote) {
  EXPECT_EQ(EventDeduplicator::Key(Spec()), EventDeduplicator::Key(Spec()));
  EXPECT_NE(EventDeduplicator::Key(Spec()), EventDeduplicator::Key(Spec("4/4 nodes validated")));
  EventSpec other_reason = Spec();
  other_reason.reason = "NcclPreflightPassed";
  EXPECT_NE(EventDeduplicator::Key(Spec()), EventDeduplicator::Key(other_reason));
  EventSpec recreated = Spec();
  recreated.regarding["uid"] = "u-2";
  EXPECT_NE(EventDeduplicator::Key(Spec()), EventDeduplicator::Key(recreated));
  // Field values cannot run into each other.
  EventSpec a = Spec(), b = Spec();
  a.reason = "AB";
  a.action = "C";
  b.reason = "A";
  b.action = "BC";
  EXPECT_NE(EventDeduplicator::Key(a), EventDeduplicator::Key(b));
}

TEST(EventDedup, RepeatsWithinTheWindowCountOntoTheFirstEvent) {
  EventDeduplicator dedup(10min);
  EventDeduplicator::Clock::time_point t{};
  std::string key = EventDeduplicator::Key(Spec());
  EXPECT_EQ(dedup.Observe(key, t), std::nullopt);
  dedup.Remember(key, "train.17", "ml", t);
  auto second = dedup.Observe(key, t + 1min);
  ASSERT_TRUE(second);
  EXPECT_EQ(second->name, "train.17");
  EXPECT_EQ(second->namespace_, "ml");
  EXPECT_EQ(second->count, 2);
  EXPECT_EQ(dedup.Observe(key, t + 9min)->count, 3);
  // The window runs from the last occurrence; past it a new Event starts.
  EXPECT_EQ(dedup.Observe(key, t + 19min)->count, 4);
  EXPECT_EQ(dedup.Observe(key, t + 30min), std::nullopt);
}

TEST(EventDedup, OldestEntriesAreEvictedAtTheLimit) {
  EventDeduplicator dedup(10min, 2);
  EventDeduplicator::Clock::time_point t{};
  dedup.Remember("a", "ea", "ns", t);
  dedup.Remember("b", "eb", "ns", t);
  EXPECT_TRUE(dedup.Observe("a", t));  // a is now the most recently seen
  dedup.Remember("c", "ec", "ns", t);
  EXPECT_EQ(dedup.size(), 2u);
  EXPECT_EQ(dedup.Observe("b", t), std::nullopt);
  EXPECT_TRUE(dedup.Observe("a", t));
  dedup.Forget("a");
  EXPECT_EQ(dedup.Observe("a", t), std::nullopt);
}

TEST(EventDedup, ReferenceToAnObject) {
  core::Json pod = {{"apiVersion", "v1"},
                    {"kind", "Pod"},
                    {"metadata", {{"name", "p"}, {"namespace", "ml"}, {"uid", "u"}, {"x", 1}}}};
  EXPECT_EQ(ReferenceTo(pod), (core::Json{{"apiVersion", "v1"},
                                          {"kind", "Pod"},
                                          {"namespace", "ml"},
                                          {"name", "p"},
                                          {"uid", "u"}}));
}

TEST(MicroTime, KubernetesFormatInUtc) {
  std::chrono::system_clock::time_point t{std::chrono::seconds(1700000000) +
                                          std::chrono::microseconds(42)};
  EXPECT_EQ(FormatMicroTime(t), "2023-11-14T22:13:20.000042Z");
}

}  // namespace
}  // namespace ncclguard::kube
