// Leader election on a real Lease and de-duplicated Events, against the real kube-apiserver.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <mutex>
#include <optional>
#include <thread>

#include "kube/event_recorder.h"
#include "kube/leader_election.h"
#include "kube/metrics.h"
#include "kube/owner_reference.h"
#include "kube_test_support.h"
#include "metrics/registry.h"

namespace ncclguard::testenv {
namespace {

using namespace std::chrono_literals;
using Steady = std::chrono::steady_clock;

// One replica: an elector on its own thread and what its callbacks saw.
class Replica {
 public:
  Replica(const kube::ClientConfig& config, const std::string& ns, const std::string& identity,
          bool release_on_stop, std::optional<kube::OwnerReference> owner = std::nullopt) {
    kube::LeaderElectionOptions options;
    options.owner = std::move(owner);
    options.lease_namespace = ns;
    options.lease_name = "ncclguard-controller";
    options.identity = identity;
    options.lease_duration = 3s;
    options.renew_deadline = 2s;
    options.retry_period = 500ms;
    options.release_on_stop = release_on_stop;
    options.metrics = &metrics_;
    options.on_started_leading = [this](const kube::StopToken& leading) {
      started_at_ = Steady::now();
      leading_ = true;
      leading.WaitFor(24h);
      leading_ = false;
    };
    options.on_stopped_leading = [this] { stopped_ = true; };
    elector_ = std::make_unique<kube::LeaderElector>(config, options);
    thread_ = std::thread([this] { elector_->Run(stop_); });
  }
  ~Replica() { Stop(); }

  void Stop() {
    stop_.Stop();
    if (thread_.joinable()) thread_.join();
  }
  bool leading() const { return leading_; }
  bool stopped_leading() const { return stopped_; }
  Steady::time_point started_at() const { return started_at_; }
  kube::LeaderElector& elector() { return *elector_; }
  // ncclguard_leader_election_master_status of this replica (its own registry).
  std::string MasterStatus() const {
    const std::string text = metrics::Render(registry_);
    const std::string series =
        R"(ncclguard_leader_election_master_status{name="ncclguard-controller"} )";
    const auto at = text.find(series);
    return at == std::string::npos ? "" : text.substr(at + series.size(), 1);
  }

 private:
  prometheus::Registry registry_;
  kube::Metrics metrics_{registry_};
  std::unique_ptr<kube::LeaderElector> elector_;
  kube::StopToken stop_;
  std::thread thread_;
  std::atomic<bool> leading_{false};
  std::atomic<bool> stopped_{false};
  Steady::time_point started_at_{};
};

TEST_F(KubeClientTest, OnlyOneLeaderAndTheOtherTakesOverWithinTheLeaseWhenItDies) {
  auto a = std::make_unique<Replica>(client_->config(), namespace_, "replica-a", false);
  ASSERT_TRUE(Eventually([&] { return a->leading(); }, 10s));
  Replica b(client_->config(), namespace_, "replica-b", false);
  EXPECT_TRUE(Eventually([&] { return b.elector().ObservedLeader() == "replica-a"; }, 5s));
  std::this_thread::sleep_for(2s);  // several renew rounds: b must stay a follower
  EXPECT_FALSE(b.leading());
  EXPECT_TRUE(a->elector().IsLeader());
  EXPECT_EQ(a->MasterStatus(), "1");
  EXPECT_EQ(b.MasterStatus(), "0");

  // a dies without releasing (release_on_stop=false is what a crash looks like).
  auto died = Steady::now();
  a->Stop();
  EXPECT_TRUE(a->stopped_leading());
  EXPECT_EQ(a->MasterStatus(), "0");
  ASSERT_TRUE(Eventually([&] { return b.leading(); }, 10s));
  EXPECT_EQ(b.MasterStatus(), "1");
  // lease_duration (3 s) plus a retry period of slack for polling.
  EXPECT_LT(b.started_at() - died, 3s + 1500ms);
  core::Json lease =
      client_->Get(kube::resources::Leases().In(namespace_).Named("ncclguard-controller"));
  EXPECT_EQ(lease["spec"]["holderIdentity"], "replica-b");
  EXPECT_EQ(lease["spec"]["leaseTransitions"], 1);
}

TEST_F(KubeClientTest, GracefulStopReleasesTheLeaseForAnImmediateTakeover) {
  auto a = std::make_unique<Replica>(client_->config(), namespace_, "replica-a", true);
  ASSERT_TRUE(Eventually([&] { return a->leading(); }, 10s));
  Replica b(client_->config(), namespace_, "replica-b", true);
  EXPECT_TRUE(Eventually([&] { return b.elector().ObservedLeader() == "replica-a"; }, 5s));
  auto released = Steady::now();
  a->Stop();
  ASSERT_TRUE(Eventually([&] { return b.leading(); }, 10s));
  // No waiting out the 3 s lease: the released lease is free at b's next retry.
  EXPECT_LT(b.started_at() - released, 2500ms);
}

TEST_F(KubeClientTest, ALeaderWhoseLeaseIsTakenStopsLeadingAtOnce) {
  Replica a(client_->config(), namespace_, "replica-a", true);
  ASSERT_TRUE(Eventually([&] { return a.leading(); }, 10s));
  // Someone else writes the lease (an operator, a partitioned peer's late write).
  kube::ResourceRef lease_ref =
      kube::resources::Leases().In(namespace_).Named("ncclguard-controller");
  core::Json lease = client_->Get(lease_ref);
  lease["spec"]["holderIdentity"] = "usurper";
  client_->Update(lease_ref, lease);
  auto taken = Steady::now();
  // on_stopped_leading is the elector's last step (after the leading callback has returned).
  ASSERT_TRUE(Eventually([&] { return a.stopped_leading(); }, 5s));
  EXPECT_LT(Steady::now() - taken, 1500ms) << "must stop at the next renew, not after the deadline";
  EXPECT_FALSE(a.leading());
  EXPECT_FALSE(a.elector().IsLeader());
}

// The Lease is owned by the controller's ServiceAccount (so that the garbage collector deletes
// it on uninstall): set when created, added to a Lease from before owner references.
TEST_F(KubeClientTest, TheLeaseIsOwnedByTheServiceAccountWhetherCreatedOrFoundWithoutAnOwner) {
  const kube::ResourceRef accounts{"", "v1", "serviceaccounts", true, namespace_, ""};
  const core::Json account = client_->Create(
      accounts, {{"apiVersion", "v1"},
                 {"kind", "ServiceAccount"},
                 {"metadata", {{"name", "ncclguard-controller"}, {"namespace", namespace_}}}});
  const std::string uid = account["metadata"]["uid"];
  const std::optional<kube::OwnerReference> owner =
      kube::ServiceAccountOwner(*client_, namespace_, "ncclguard-controller");
  ASSERT_TRUE(owner.has_value());
  EXPECT_EQ(owner->uid, uid);
  // One that is not there (or cannot be read): no owner, no exception.
  EXPECT_FALSE(kube::ServiceAccountOwner(*client_, namespace_, "missing").has_value());

  const kube::ResourceRef lease_ref =
      kube::resources::Leases().In(namespace_).Named("ncclguard-controller");
  const core::Json expected = core::Json::array({{{"apiVersion", "v1"},
                                                  {"kind", "ServiceAccount"},
                                                  {"name", "ncclguard-controller"},
                                                  {"uid", uid}}});
  auto owners = [&] {
    return client_->Get(lease_ref)["metadata"].value("ownerReferences", core::Json::array());
  };

  // A free Lease left by a version without owner references.
  client_->Create(kube::resources::Leases().In(namespace_),
                  kube::NewLeaseObject(lease_ref, {{"holderIdentity", ""}}, std::nullopt));
  ASSERT_EQ(owners(), core::Json::array());
  {
    Replica a(client_->config(), namespace_, "replica-a", true, owner);
    ASSERT_TRUE(Eventually([&] { return a.leading(); }, 10s));
    EXPECT_EQ(owners(), expected);
  }

  // None yet: created with the owner.
  client_->Delete(lease_ref);
  Replica b(client_->config(), namespace_, "replica-b", true, owner);
  ASSERT_TRUE(Eventually([&] { return b.leading(); }, 10s));
  EXPECT_EQ(owners(), expected);
  EXPECT_EQ(client_->Get(lease_ref)["spec"]["holderIdentity"], "replica-b");
}

TEST_F(KubeClientTest, RepeatedEventsIncrementTheSeriesInsteadOfPiling) {
  core::Json cm = client_->Create(ConfigMaps(), ConfigMap("regarding"));
  kube::EventRecorder recorder(client_, "ncclguard.io/controller", "replica-a");
  kube::EventSpec spec;
  spec.regarding = kube::ReferenceTo(cm);
  spec.type = "Warning";
  spec.reason = "InsufficientValidatedNodes";
  spec.action = "Gate";
  spec.note = "3/4 p5.48xlarge nodes validated";
  spec.annotations = {{"ncclguard.io/diagnosis", "insufficient-validated-nodes"}};
  std::string first = recorder.Record(spec);
  ASSERT_FALSE(first.empty());
  EXPECT_EQ(recorder.Record(spec), first);
  EXPECT_EQ(recorder.Record(spec), first);
  spec.note = "4/4 p5.48xlarge nodes validated";
  std::string other = recorder.Record(spec);
  EXPECT_NE(other, first);

  kube::ListPage events = client_->List(kube::resources::Events().In(namespace_));
  ASSERT_EQ(events.items.size(), 2u);
  core::Json repeated = client_->Get(kube::resources::Events().In(namespace_).Named(first));
  EXPECT_EQ(repeated["series"]["count"], 3);
  EXPECT_EQ(repeated["regarding"]["name"], "regarding");
  EXPECT_EQ(repeated["reportingController"], "ncclguard.io/controller");
  EXPECT_EQ(repeated["note"], "3/4 p5.48xlarge nodes validated");
  EXPECT_EQ(repeated["metadata"]["annotations"]["ncclguard.io/diagnosis"],
            "insufficient-validated-nodes");
  EXPECT_FALSE(
      client_->Get(kube::resources::Events().In(namespace_).Named(other)).contains("series"));

  // The Event was deleted (TTL): the next occurrence starts a new one instead of failing.
  client_->Delete(kube::resources::Events().In(namespace_).Named(other));
  std::string again = recorder.Record(spec);
  EXPECT_FALSE(again.empty());
  EXPECT_NE(again, other);
}

TEST_F(KubeClientTest, AnEventThatCannotBeWrittenIsLoggedNotThrown) {
  kube::EventRecorder recorder(client_, "ncclguard.io/controller", "replica-a");
  kube::EventSpec spec;
  spec.regarding = {{"apiVersion", "v1"},
                    {"kind", "ConfigMap"},
                    {"namespace", "no-such-namespace-x"},
                    {"name", "x"}};
  spec.reason = "Test";
  spec.action = "Test";
  EXPECT_EQ(recorder.Record(spec), "");
}

}  // namespace
}  // namespace ncclguard::testenv
