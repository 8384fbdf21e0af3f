// The controller's cache projections keep everything the reconciler reads: reconciling over
// projected objects (as the caches keep them, from the controllers' declarations) returns exactly
// the actions that reconciling over whole objects does, so a diagnosis that reads a field no
// declaration keeps fails here. And they never throw on objects of the wrong shape.
#include <gtest/gtest.h>

#include <variant>

#include "controllers/training_job_reconciler.h"
#include "core/contract.h"
#include "core/reason.h"
#include "manager/cache.h"
#include "manager/executor.h"
#include "manager/projections.h"
#include "tests/unit/controllers/fake_cluster.h"

namespace ncclguard::test {
namespace {

using core::WorkloadKind;

controllers::Timestamp At() { return controllers::Timestamp(std::chrono::seconds(1'800'000'000)); }

std::string Describe(const std::vector<controllers::Action>& actions) {
  std::string out;
  for (const controllers::Action& action : actions) {
    if (const auto* c = std::get_if<controllers::CreateObject>(&action)) {
      out += "create " + c->target.name + " " + c->object.dump() + "\n";
    } else if (const auto* p = std::get_if<controllers::MergePatch>(&action)) {
      out += "patch " + p->target.name + (p->status_subresource ? "/status " : " ") +
             p->patch.dump() + "\n";
    } else if (const auto* e = std::get_if<controllers::RecordEvent>(&action)) {
      out += "event " + e->reason + " " + e->note + "\n";
    }
  }
  return out;
}

Json Failed(Json status) {
  status["phase"] = "Failed";
  return status;
}

// A job as the API server returns it: fields no reconciler reads included.
Json Noisy(Json object) {
  object["metadata"]["managedFields"] = Json::array({{{"manager", "kubectl"}}});
  object["metadata"]["creationTimestamp"] = "2026-12-02T14:00:00Z";
  return object;
}

void Fill(FakeCluster& cluster, bool projected) {
  // What the caches keep with every registered controller running (manager/controller_module.h).
  const auto job_projection =
      manager::CachedFields(manager::watched::ForKind(WorkloadKind::PyTorchJob));
  const auto pod_projection = manager::CachedFields(kube::resources::Pods());
  const auto event_projection = manager::CachedFields(kube::resources::Events());
  cluster.AddNamespace("team", true);
  cluster.AddNode("n1", "p5.48xlarge", "Pass");
  cluster.AddNode(
      "n2", "p5.48xlarge", "Fail",
      Json::array(
          {{{"id", "efa-device-count"}, {"status", "Fail"}, {"message", "30 of 32 EFA devices"}}}));
  Json job = Noisy(P5PyTorchJob("team", "llama", 2));
  job["metadata"]["uid"] = "uid-1";
  job["metadata"]["resourceVersion"] = "7";
  job["status"]["replicaStatuses"] = {{"Master", {{"active", 1}}}};
  cluster.AddJob(projected ? job_projection(job) : job);
  std::vector<Json> pods = {
      KubeflowPod("team", "llama", "llama-master-0",
                  Failed(Terminated("pytorch", 137, "OOMKilled")), "n1"),
      KubeflowPod(
          "team", "llama", "llama-worker-0",
          Failed(Terminated("pytorch", 1, "Error", "torch.OutOfMemoryError: CUDA out of memory.")),
          "n2"),
      KubeflowPod(
          "team", "llama", "llama-worker-1",
          {{"phase", "Pending"},
           {"conditions",
            {{{"type", "PodScheduled"},
              {"status", "False"},
              {"reason", "Unschedulable"},
              {"message", "0/3 nodes are available: 3 Insufficient vpc.amazonaws.com/efa."}},
             {{"type", "Initialized"}, {"status", "True"}}}}}),
  };
  for (Json& pod : pods) {
    pod["metadata"]["labels"]["unrelated"] = "x";
    cluster.AddPod(projected ? pod_projection(Noisy(pod)) : Noisy(pod));
  }
  const Json event{{"apiVersion", "events.k8s.io/v1"},
                   {"kind", "Event"},
                   {"metadata", {{"name", "e1"}, {"namespace", "team"}}},
                   {"regarding", {{"kind", "Pod"}, {"name", "llama-worker-1"}, {"uid", "p"}}},
                   {"reason", "FailedScheduling"},
                   {"note", "0/3 nodes are available: 1 node(s) had untolerated taint"},
                   {"type", "Warning"},
                   {"reportingController", "default-scheduler"}};
  // What else a busy cluster says of these objects: not cached (manager::ReadEvent), and the
  // reconcile does the same without them.
  const auto other = [](const char* name, const char* kind, const char* about, const char* reason,
                        const char* controller) {
    return Json{{"apiVersion", "events.k8s.io/v1"},
                {"kind", "Event"},
                {"metadata", {{"name", name}, {"namespace", "team"}}},
                {"regarding", {{"kind", kind}, {"name", about}}},
                {"reason", reason},
                {"note", "something happened"},
                {"type", "Normal"},
                {"reportingController", controller}};
  };
  for (const Json& e :
       {event, other("e2", "Pod", "llama-master-0", "Scheduled", "default-scheduler"),
        other("e3", "Pod", "llama-master-0", "Started", "kubelet"),
        other("e4", "PyTorchJob", "llama", "SuccessfulCreatePod", "pytorchjob-controller")}) {
    if (!projected) {
      cluster.AddEvent(e);
    } else if (manager::ReadEvent(e)) {
      cluster.AddEvent(event_projection(e));
    }
  }
}

TEST(ControllerProjections, OnlyTheEventsTheControllerReadsAreCached) {
  const auto event = [](const char* kind, const char* reason, const char* controller) {
    return Json{{"regarding", {{"kind", kind}, {"name", "x"}}},
                {"reason", reason},
                {"reportingController", controller}};
  };
  EXPECT_TRUE(manager::ReadEvent(event("Pod", "FailedScheduling", "default-scheduler")));
  EXPECT_TRUE(manager::ReadEvent(event("PyTorchJob", "InsufficientValidatedNodes",
                                       std::string(core::kReportingController).c_str())));
  EXPECT_TRUE(manager::ReadEvent(
      event("Pod", "EfaTcpFallback", std::string(core::kReportingController).c_str())));
  EXPECT_FALSE(manager::ReadEvent(event("Pod", "Scheduled", "default-scheduler")));
  EXPECT_FALSE(manager::ReadEvent(event("Job", "SuccessfulCreate", "job-controller")));
  EXPECT_FALSE(manager::ReadEvent(event("Node", "FailedScheduling", "default-scheduler")));
  EXPECT_FALSE(manager::ReadEvent(Json::array()));
}

TEST(ControllerProjections, ReconcilingOverProjectedObjectsGivesTheSameActions) {
  FakeCluster whole;
  FakeCluster projected;
  Fill(whole, false);
  Fill(projected, true);
  const controllers::JobKey key{WorkloadKind::PyTorchJob, "team", "llama"};
  const auto expected = controllers::ReconcileTrainingJob(key, whole, At());
  const auto got = controllers::ReconcileTrainingJob(key, projected, At());
  ASSERT_FALSE(expected.actions.empty());
  EXPECT_EQ(Describe(got.actions), Describe(expected.actions));
  EXPECT_EQ(got.requeue_after, expected.requeue_after);
  // The diagnoses the pods carry all reach the reconciler through the projection.
  const std::string described = Describe(got.actions);
  for (const char* id : {"container-oom-killed", "gpu-oom", "efa-unschedulable",
                         "untolerated-taint", "insufficient-validated-nodes"}) {
    // "event <Reason> <id>: <what was seen>..."
    EXPECT_NE(described.find("event " + core::ReasonFromId(id) + " " + id + ": "),
              std::string::npos)
        << id;
  }
}

// The placement's rank order (core/placement.h): a managed job's pod keeps its node and index
// labels through the cache, and the cached Node its topology labels.
TEST(ControllerProjections, APodKeepsItsNodeAndTheLabelsItsRankOrderIsReadFrom) {
  Json pod = KubeflowPod("team", "llama", "llama-worker-3", {{"phase", "Running"}}, "n1");
  pod["metadata"]["labels"]["training.kubeflow.org/replica-type"] = "worker";
  pod["metadata"]["labels"]["training.kubeflow.org/replica-index"] = "3";
  pod["metadata"]["labels"]["batch.kubernetes.io/job-completion-index"] = "3";
  pod["metadata"]["labels"]["jobset.sigs.k8s.io/job-index"] = "1";
  pod["metadata"]["labels"]["jobset.sigs.k8s.io/job-global-index"] = "4";
  pod["metadata"]["labels"]["unrelated"] = "x";
  const Json kept = manager::CachedFields(kube::resources::Pods())(Noisy(pod));
  for (const auto& [key, value] : pod["metadata"]["labels"].items()) {
    EXPECT_EQ(kept["metadata"]["labels"].value(key, Json()), key == "unrelated" ? Json() : value)
        << key;
  }
  EXPECT_EQ(kept["spec"]["nodeName"], "n1");
  const Json node{{"metadata",
                   {{"name", "n1"},
                    {"labels",
                     {{"topology.k8s.aws/network-node-layer-3", "nn-a"},
                      {"topology.k8s.aws/ultraserver-id", "us-1"}}}}},
                  {"status", {{"images", Json::array()}}}};
  EXPECT_EQ(manager::CachedFields(kube::resources::Nodes())(node)["metadata"]["labels"],
            node["metadata"]["labels"]);
}

TEST(ControllerProjections, PodsOfNoManagedJobKeepOnlyTheirIdentity) {
  const Json pod{{"metadata",
                  {{"name", "web"},
                   {"namespace", "a"},
                   {"uid", "u"},
                   {"resourceVersion", "1"},
                   {"labels", {{"app", "web"}}}}},
                 {"spec", {{"nodeName", "n1"}, {"containers", Json::array()}}},
                 {"status", {{"phase", "Running"}}}};
  EXPECT_EQ(
      manager::PodProjection()(pod),
      (Json{{"metadata",
             {{"name", "web"}, {"namespace", "a"}, {"uid", "u"}, {"resourceVersion", "1"}}}}));
}

TEST(ControllerProjections, ObjectsOfTheWrongShapeNeverThrow) {
  const std::vector<Json> junk = {
      Json(nullptr),
      Json("text"),
      Json::array({1, 2}),
      Json{{"metadata", "not an object"}},
      Json{{"metadata", {{"labels", "x"}, {"ownerReferences", "y"}}}, {"status", 3}},
      Json{{"metadata",
            {{"labels", {{"training.kubeflow.org/job-name", "j"}}},
             {"ownerReferences", {1, "two"}}}},
           {"spec", {{"nodeName", 5}}},
           {"status",
            {{"containerStatuses", {1, {{"state", "x"}}, {{"lastState", {{"terminated", 2}}}}}},
             {"conditions", "z"}}}},
      Json{{"regarding", {{"kind", 4}}}, {"reason", Json::array()}},
      Json{{"regarding", "Pod"}},
  };
  for (const Json& object : junk) {
    SCOPED_TRACE(object.dump());
    EXPECT_NO_THROW(manager::PodProjection()(object));
    EXPECT_NO_THROW(manager::JobProjection(WorkloadKind::JobSet)(object));
    EXPECT_NO_THROW(manager::ServiceProjection()(object));
    EXPECT_NO_THROW(manager::NodeProjection()(object));
    EXPECT_NO_THROW(manager::NodeValidationProjection()(object));
    EXPECT_NO_THROW(manager::NamespaceProjection()(object));
    EXPECT_NO_THROW(manager::EventProjection()(object));
    EXPECT_NO_THROW(manager::ReadEvent(object));
  }
}

TEST(ControllerExecutor, ActionTargetsBecomeClientResources) {
  const auto job = manager::ResourceFor({.api_version = "kubeflow.org/v1",
                                         .kind = "PyTorchJob",
                                         .namespace_ = "team",
                                         .name = "llama",
                                         .uid = "uid",
                                         .resource = "pytorchjobs"});
  EXPECT_EQ(job.ObjectPath(), "/apis/kubeflow.org/v1/namespaces/team/pytorchjobs/llama");
  const auto service = manager::ResourceFor({.api_version = "v1",
                                             .kind = "Service",
                                             .namespace_ = "team",
                                             .name = "llama",
                                             .uid = "",
                                             .resource = "services"});
  EXPECT_EQ(service.ObjectPath(), "/api/v1/namespaces/team/services/llama");
  const auto policy = manager::ResourceFor({.api_version = "ncclguard.io/v1alpha1",
                                            .kind = "NcclPolicy",
                                            .namespace_ = "",
                                            .name = "default",
                                            .uid = "",
                                            .resource = "ncclpolicies"});
  EXPECT_EQ(policy.ObjectPath(), "/apis/ncclguard.io/v1alpha1/ncclpolicies/default");
}

}  // namespace
}  // namespace ncclguard::test
