// `ncclguard audit`'s pure part (cli/cluster_audit.h): scope, text, the PolicyReports List, the
// exit code; and the command's errors before it reaches a cluster. The scan against a real API
// server is tests/controlplane/audit_cli_test.cpp.
#include <gtest/gtest.h>

#include <string>

#include "cli/cluster_audit.h"
#include "cli/exit_code.h"
#include "core/audit.h"
#include "core/guide.h"
#include "core/policy_report.h"
#include "tests/unit/test_support.h"

namespace ncclguard::test {
namespace {

using cli::AuditOutput;
using cli::AuditScope;
using cli::ClusterAudit;
using core::Json;

Json PodIn(const std::string& ns, const std::string& name) {
  Json pod = CompliantPod();
  pod["metadata"]["namespace"] = ns;
  pod["metadata"]["name"] = name;
  pod["metadata"]["uid"] = "uid-" + ns + "-" + name;
  return pod;
}

Json BrokenPodIn(const std::string& ns, const std::string& name) {
  Json pod = PodIn(ns, name);
  for (auto& container : pod["spec"]["containers"]) {
    container["resources"]["limits"].erase("vpc.amazonaws.com/efa");
    container["resources"]["requests"].erase("vpc.amazonaws.com/efa");
  }
  return pod;
}

Json CpuPodIn(const std::string& ns) {
  return Yaml("apiVersion: v1\nkind: Pod\nmetadata: {name: web, namespace: " + ns +
              "}\nspec: {containers: [{name: web, image: nginx}]}\n");
}

AuditScope Namespace(const std::string& ns) { return {false, ns}; }
AuditScope All() { return {true, ""}; }

TEST(ClusterAudit, TheNamespaceIsTheFlagsElseTheContextsElseDefault) {
  EXPECT_EQ(cli::ScopeNamespace("ml", "team"), "ml");
  EXPECT_EQ(cli::ScopeNamespace("", "team"), "team");
  EXPECT_EQ(cli::ScopeNamespace("", ""), "default");
}

TEST(ClusterAudit, AllNamespacesAreThoseThePolicysAuditCoversNeverTheSystemOnes) {
  const core::Policy policy = core::ParsePolicy("spec: {audit: {excludedNamespaces: [scratch]}}");
  EXPECT_TRUE(All().Includes("ml", policy.audit));
  EXPECT_FALSE(All().Includes("kube-system", policy.audit));
  EXPECT_FALSE(All().Includes("kube-node-lease", policy.audit));
  EXPECT_FALSE(All().Includes("scratch", policy.audit));
  // -n is what the admin asked for.
  EXPECT_TRUE(Namespace("scratch").Includes("scratch", policy.audit));
  EXPECT_FALSE(Namespace("ml").Includes("team", policy.audit));
}

TEST(ClusterAudit, TextSaysEachObjectsResultsWithRuleAndGuideThenTheSummary) {
  ClusterAudit audit(core::Policy::Defaults(), Namespace("ml"), AuditOutput::Text);
  EXPECT_EQ(audit.Add(PodIn("ml", "good")), "Pod ml/good: pass\n");
  const std::string broken = audit.Add(BrokenPodIn("ml", "bad"));
  EXPECT_EQ(broken.rfind("Pod ml/bad: fail\n", 0), 0u) << broken;
  EXPECT_NE(broken.find("  fail efa-resources-missing (fix) at /spec/containers/0"),
            std::string::npos)
      << broken;
  EXPECT_NE(broken.find("guide: https://"), std::string::npos) << broken;
  EXPECT_NE(broken.find("#efa-tcp-fallback"), std::string::npos) << broken;
  // Not audited: no GPU, another namespace.
  EXPECT_EQ(audit.Add(CpuPodIn("ml")), "");
  EXPECT_EQ(audit.Add(BrokenPodIn("team", "bad")), "");

  const auto findings = core::AuditObject(BrokenPodIn("ml", "bad"), core::Policy::Defaults());
  ASSERT_TRUE(findings.has_value());
  EXPECT_EQ(audit.counts().objects, 2u);
  EXPECT_EQ(audit.counts().pass, 1u);
  EXPECT_EQ(audit.counts().fail + audit.counts().warn, findings->findings.size());
  EXPECT_EQ(audit.Finish(), std::to_string(audit.counts().fail) + " fail, " +
                                std::to_string(audit.counts().warn) +
                                " warn, 1 pass: 2 objects in 1 namespaces\n");
  EXPECT_EQ(audit.ExitCode(), cli::kExitDenied);
}

TEST(ClusterAudit, ExitsZeroWhenNothingFailsWarningsIncluded) {
  ClusterAudit audit(core::Policy::Defaults(), All(), AuditOutput::Text);
  audit.Add(PodIn("ml", "good"));
  // A policy that makes warnings of the missing EFA devices (a fix that would fail a Pod) and of
  // the FI_PROVIDER=efa that then has no device (a deny): warned, not failed.
  ClusterAudit warned(core::ParsePolicy("spec: {rules: {efa-resources-missing: {level: warn}, "
                                        "fi-provider-without-efa: {level: warn}}}"),
                      All(), AuditOutput::Text);
  warned.Add(BrokenPodIn("ml", "bad"));
  EXPECT_EQ(audit.ExitCode(), cli::kExitClean);
  EXPECT_GT(warned.counts().warn, 0u);
  EXPECT_EQ(warned.counts().fail, 0u) << warned.Finish();
  EXPECT_EQ(warned.ExitCode(), cli::kExitClean);
}

// -o json is what the controller writes: core::PolicyReportsFor over the same objects, namespace
// by namespace; none for a namespace with nothing audited, for which the controller writes none.
TEST(ClusterAudit, JsonIsAListOfThePolicyReportsOfEachNamespace) {
  ClusterAudit audit(core::Policy::Defaults(), All(), AuditOutput::Json);
  const Json objects[] = {BrokenPodIn("ml", "b"), PodIn("ml", "a"), PodIn("team", "x"),
                          BrokenPodIn("kube-system", "sys")};
  for (const Json& object : objects) EXPECT_EQ(audit.Add(object), "");
  audit.NotServed("PyTorchJob kubeflow.org/v1");
  audit.SetPolicySource("built-in defaults");
  const std::string text = audit.Finish();
  const Json list = Json::parse(text);
  // Written a namespace at a time, laid out as one dump of the whole List would be.
  EXPECT_EQ(text, list.dump(2) + "\n");
  EXPECT_EQ(list["apiVersion"], "v1");
  EXPECT_EQ(list["kind"], "List");

  const core::Policy policy = core::Policy::Defaults();
  auto audited = [&](const Json& object) { return *core::AuditObject(object, policy); };
  Json expected = Json::array();
  for (Json& report : core::PolicyReportsFor("ml", {audited(objects[0]), audited(objects[1])})) {
    expected.push_back(report);
  }
  for (Json& report : core::PolicyReportsFor("team", {audited(objects[2])})) {
    expected.push_back(report);
  }
  EXPECT_EQ(list["items"], expected);
  EXPECT_EQ(list["ncclguard"]["notServed"], Json::array({"PyTorchJob kubeflow.org/v1"}));
  EXPECT_EQ(list["ncclguard"]["policy"], "built-in defaults");
  EXPECT_EQ(audit.ExitCode(), cli::kExitDenied);
}

TEST(ClusterAudit, ANamespaceWithNothingAuditedGetsNoReport) {
  ClusterAudit audit(core::Policy::Defaults(), Namespace("ml"), AuditOutput::Json);
  audit.Add(CpuPodIn("ml"));
  const std::string text = audit.Finish();
  const Json list = Json::parse(text);
  EXPECT_EQ(text, list.dump(2) + "\n");
  EXPECT_EQ(list, Json::parse(R"({"apiVersion": "v1", "kind": "List", "metadata": {}, "items": [],
                            "ncclguard": {"policy": "", "notServed": [], "unreadable": [],
                                          "topologyWarnings": []}})"));
  EXPECT_EQ(audit.ExitCode(), cli::kExitClean);
}

// Two p5 nodes, one of them without network-node-layer-3; a TAS flavor over both whose Topology
// names network-node-layer-4.
void AddMislabelledNodes(core::TopologyAudit& topology) {
  topology.AddTopology(
      Yaml("metadata: {name: aws}\nspec: {levels: [{nodeLabel: "
           "topology.k8s.aws/network-node-layer-4}]}\n"));
  topology.AddResourceFlavor(
      Yaml("metadata: {name: gpu}\nspec: {topologyName: aws, nodeLabels: {pool: gpu}}\n"));
  topology.AddNode(Yaml(
      "metadata: {name: node-a, labels: {pool: gpu, node.kubernetes.io/instance-type: p5.48xlarge, "
      "topology.k8s.aws/network-node-layer-3: nn-a}}\n"));
  topology.AddNode(
      Yaml("metadata: {name: node-b, labels: {pool: gpu, "
           "node.kubernetes.io/instance-type: p5.48xlarge}}\n"));
}

TEST(ClusterAudit, TextSaysTheTopologyWarningsBeforeTheSummaryAndTheyChangeNoExitCode) {
  ClusterAudit audit(core::Policy::Defaults(), Namespace("ml"), AuditOutput::Text);
  EXPECT_EQ(audit.Add(PodIn("ml", "good")), "Pod ml/good: pass\n");
  AddMislabelledNodes(audit.topology());
  EXPECT_EQ(audit.Finish(),
            "warning: NodeMissingTopologyLevel: 1 p5.48xlarge node lacks "
            "topology.k8s.aws/network-node-layer-3, which other p5.48xlarge nodes carry (node-b): "
            "Kueue's topology-aware scheduling leaves it out of a Topology's capacity (guide: " +
                core::GuideLink(core::Policy::Defaults().guide_base_url, "advanced-tuning") +
                ")\n"
                "warning: TopologyLevelUnlabelled: ResourceFlavor gpu's Topology aws names level "
                "topology.k8s.aws/network-node-layer-4, which none of its 2 nodes carries: "
                "Kueue's topology-aware scheduling leaves out every node lacking a level, so the "
                "flavor has no topology capacity (guide: " +
                core::GuideLink(core::Policy::Defaults().guide_base_url, "advanced-tuning") +
                ")\n0 fail, 0 warn, 1 pass: 1 objects in 1 namespaces, 2 topology warnings\n");
  EXPECT_EQ(audit.ExitCode(), cli::kExitClean);
}

TEST(ClusterAudit, JsonCarriesTheTopologyWarningsInItsOwnNotes) {
  ClusterAudit audit(core::Policy::Defaults(), Namespace("ml"), AuditOutput::Json);
  AddMislabelledNodes(audit.topology());
  const std::string text = audit.Finish();
  const Json list = Json::parse(text);
  EXPECT_EQ(text, list.dump(2) + "\n");
  EXPECT_EQ(list["kind"], "List");
  const Json& warnings = list["ncclguard"]["topologyWarnings"];
  ASSERT_EQ(warnings.size(), 2u) << text;
  EXPECT_EQ(warnings[0]["reason"], "NodeMissingTopologyLevel");
  EXPECT_EQ(warnings[1]["reason"], "TopologyLevelUnlabelled");
  EXPECT_NE(warnings[1]["guide"].get<std::string>().find("#advanced-tuning"), std::string::npos);
  EXPECT_EQ(audit.ExitCode(), cli::kExitClean);
}

TEST(ClusterAudit, ATrainJobIsCheckedWithTheRuntimeListedBeforeIt) {
  const Json runtime = Yaml(R"(
apiVersion: trainer.kubeflow.org/v1alpha1
kind: ClusterTrainingRuntime
metadata: {name: torch-distributed}
spec:
  mlPolicy: {numNodes: 1, torch: {}}
  template:
    spec:
      replicatedJobs:
        - name: node
          template:
            spec:
              template:
                spec:
                  nodeSelector: {node.kubernetes.io/instance-type: p5.48xlarge}
                  containers:
                    - name: node
                      image: pytorch/pytorch:2.10.0
                      env: [{name: NCCL_PROTO, value: fast}]
)");
  const Json trainjob = Yaml(ReadFile(SourcePath("examples/trainjob-broken.yaml")));
  const core::RuntimeLookup lookup = [&](const core::RuntimeRef& ref,
                                         std::string_view) -> std::optional<Json> {
    if (ref.kind == core::WorkloadKind::ClusterTrainingRuntime && ref.name == "torch-distributed") {
      return runtime;
    }
    return std::nullopt;
  };
  const core::Policy policy = core::Policy::Defaults();
  const auto with = core::AuditObject(trainjob, policy, lookup);
  const auto without = core::AuditObject(trainjob, policy);
  ASSERT_TRUE(with.has_value());

  ClusterAudit audit(policy, Namespace("ml"), AuditOutput::Json);
  audit.AddRuntime(runtime);
  audit.Add(trainjob);
  const Json list = Json::parse(audit.Finish());
  EXPECT_EQ(list["items"][0], core::PolicyReportsFor("ml", {*with})[0]);
  // The runtime's NCCL_PROTO is found only with it.
  EXPECT_NE(list["items"][0].dump().find("nccl-proto-invalid"), std::string::npos);
  if (without) {
    EXPECT_EQ(core::PolicyReportsFor("ml", {*without})[0].dump().find("nccl-proto-invalid"),
              std::string::npos);
  }
}

TEST(ClusterAudit, AMalformedObjectIsNamedAndTheOthersStillAudited) {
  ClusterAudit audit(core::Policy::Defaults(), Namespace("ml"), AuditOutput::Text);
  Json pod = PodIn("ml", "odd");
  pod["spec"]["containers"] = "not a list";
  const std::string text = audit.Add(pod);
  EXPECT_EQ(text.rfind("Pod ml/odd: error: ", 0), 0u) << text;
  EXPECT_EQ(audit.Add(PodIn("ml", "good")), "Pod ml/good: pass\n");
  EXPECT_EQ(audit.counts().errors, 1u);
  EXPECT_EQ(audit.Finish(), "0 fail, 0 warn, 1 pass: 1 objects in 1 namespaces, 1 unreadable\n");
}

// A running pod of PyTorchJob "pin" in ml whose container pytorch runs `digest` of the tag.
Json DriftPod(const std::string& name, const std::string& digest) {
  Json pod = PodIn("ml", name);
  pod["metadata"]["labels"]["training.kubeflow.org/job-name"] = "pin";
  pod["metadata"]["ownerReferences"] = Json::array({Json{{"apiVersion", "kubeflow.org/v1"},
                                                         {"kind", "PyTorchJob"},
                                                         {"name", "pin"},
                                                         {"controller", true}}});
  pod["spec"]["containers"][0]["image"] = "registry.example:5000/ml/train:2.4";
  pod["status"] = Json{
      {"phase", "Running"},
      {"containerStatuses",
       Json::array(
           {Json{{"name", "pytorch"}, {"imageID", "registry.example:5000/ml/train@" + digest}}})}};
  return pod;
}

TEST(ClusterAudit, PodsOfOneJobRunningDifferentDigestsAreTheJobsImageDrift) {
  const std::string first = "sha256:" + std::string(64, '1');
  const std::string second = "sha256:" + std::string(64, '2');
  ClusterAudit audit(core::Policy::Defaults(), Namespace("ml"), AuditOutput::Text);
  std::string text = audit.Add(DriftPod("pin-master-0", first));
  text += audit.Add(DriftPod("pin-worker-0", second));
  text += audit.Finish();
  EXPECT_NE(text.find("PyTorchJob ml/pin: warn"), std::string::npos) << text;
  EXPECT_NE(text.find("warn image-drift (warn)"), std::string::npos) << text;
  for (const std::string& part : {first + " in pod pin-master-0", second + " in pod pin-worker-0",
                                  std::string("guide.md#nccl-version")}) {
    EXPECT_NE(text.find(part), std::string::npos) << part << "\n" << text;
  }
  EXPECT_EQ(audit.counts().warn, 1u);  // a warning, as the diagnosis is

  ClusterAudit same(core::Policy::Defaults(), Namespace("ml"), AuditOutput::Json);
  same.Add(DriftPod("pin-master-0", first));
  same.Add(DriftPod("pin-worker-0", first));
  EXPECT_EQ(same.Finish().find("image-drift"), std::string::npos);
}

TEST(CliAudit, ABadKubeconfigIsOneLineAndExitTwo) {
  const auto missing = RunCli({"audit", "--kubeconfig", "/nonexistent/kubeconfig"});
  EXPECT_EQ(missing.exit_code, cli::kExitInputError) << missing.err;
  EXPECT_EQ(missing.out, "");
  EXPECT_EQ(missing.err.rfind("ncclguard audit: ", 0), 0u) << missing.err;
  EXPECT_EQ(missing.err.find('\n'), missing.err.size() - 1) << missing.err;

  TempFile garbage("apiVersion: v1\nkind: Config\nclusters: 7\n");
  const auto bad = RunCli({"audit", "--kubeconfig", garbage.path()});
  EXPECT_EQ(bad.exit_code, cli::kExitInputError) << bad.err;
  EXPECT_EQ(bad.err.find('\n'), bad.err.size() - 1) << bad.err;
}

TEST(CliAudit, AnUnreachableServerIsOneLineAndExitTwo) {
  // Port 1 on loopback: nothing listens, the connection is refused at once.
  TempFile kubeconfig(R"(apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "https://127.0.0.1:1", certificate-authority: /etc/ssl/certs/ca-certificates.crt}}]
users: [{name: u, user: {token: t}}]
contexts: [{name: x, context: {cluster: c, user: u, namespace: ml}}]
current-context: x
)");
  const auto r = RunCli({"audit", "--kubeconfig", kubeconfig.path()});
  EXPECT_EQ(r.exit_code, cli::kExitInputError) << r.err;
  EXPECT_EQ(r.out, "");
  EXPECT_NE(r.err.find("ncclguard audit: cannot reach the API server https://127.0.0.1:1"),
            std::string::npos)
      << r.err;
}

TEST(CliAudit, NamespaceAndAllNamespacesTogetherAreAUsageError) {
  const auto r = RunCli({"audit", "-n", "ml", "-A"});
  EXPECT_EQ(r.exit_code, cli::kExitInputError) << r.err;
}

}  // namespace
}  // namespace ncclguard::test
