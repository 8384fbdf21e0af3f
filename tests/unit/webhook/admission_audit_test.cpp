// Audit mode in the admission webhook (docs/operator.md "Audit mode"): nothing changed, nothing
// denied, everything enforce mode would have done said in warnings.
#include <gtest/gtest.h>

#include <optional>
#include <string>

#include "core/contract.h"
#include "core/gate.h"
#include "core/trainjob.h"
#include "tests/unit/test_support.h"
#include "webhook/admission_handler.h"
#include "webhook/review_answer.h"

namespace ncclguard::webhook::audit_test {
namespace {

using core::Json;
using core::Mode;
using test::CompliantPod;
using test::Yaml;

AdmissionRequest Request(Json object, std::string operation = "CREATE") {
  AdmissionRequest request;
  request.uid = "uid-1";
  const std::string api_version = object.value("apiVersion", "");
  const auto slash = api_version.find('/');
  request.kind.group = slash == std::string::npos ? "" : api_version.substr(0, slash);
  request.kind.version = slash == std::string::npos ? api_version : api_version.substr(slash + 1);
  request.kind.kind = object.value("kind", "");
  request.operation = std::move(operation);
  request.namespace_ = "ml";
  request.name = object["metadata"].value("name", "");
  request.object = std::move(object);
  return request;
}

core::Policy AuditPolicy() {
  core::Policy policy = core::Policy::Defaults();
  policy.mode = Mode::Audit;
  return policy;
}

AdmissionOutcome AdmitIn(Endpoint endpoint, Json object, const core::Policy& policy,
                         std::optional<Mode> mode = std::nullopt) {
  return Admit(endpoint, Request(std::move(object)), policy, {}, mode);
}

Json BarePod() {
  return Yaml(R"(
apiVersion: v1
kind: Pod
metadata: {name: w0, namespace: ml}
spec:
  nodeSelector: {node.kubernetes.io/instance-type: p5.48xlarge}
  containers:
    - name: pytorch
      image: registry.example/train:1.0
      resources:
        limits: {nvidia.com/gpu: 8, memory: 1000Gi}
)");
}

Json PyTorchJob(const std::string& proto = "Simple") {
  return Yaml(R"(
apiVersion: kubeflow.org/v1
kind: PyTorchJob
metadata: {name: llama, namespace: ml}
spec:
  pytorchReplicaSpecs:
    Worker:
      replicas: 2
      template:
        spec:
          nodeSelector: {node.kubernetes.io/instance-type: p5.48xlarge}
          containers:
            - name: pytorch
              image: registry.example/train:1.0
              env: [{name: NCCL_PROTO, value: )" +
              proto + R"(}]
              resources:
                limits: {nvidia.com/gpu: 8, memory: 1000Gi}
)");
}

Json TrainJob() {
  return Yaml(R"(
apiVersion: trainer.kubeflow.org/v1alpha1
kind: TrainJob
metadata: {name: llama, namespace: ml}
spec:
  runtimeRef: {name: torch-p5}
  trainer:
    image: registry.example/train:1.0
    numNodes: 2
    numProcPerNode: 8
    resourcesPerNode: {limits: {nvidia.com/gpu: 8, memory: 1000Gi}}
)");
}

bool NoPatch(const AdmissionOutcome& outcome) {
  return outcome.response.patch.is_null() || outcome.response.patch.empty();
}

bool HasWarningStartingWith(const AdmissionOutcome& outcome, const std::string& prefix) {
  for (const std::string& warning : outcome.response.warnings) {
    if (warning.rfind(prefix, 0) == 0) return true;
  }
  return false;
}

TEST(AuditMode, ThePolicysModeIsAuditUnlessThePathSaysEnforce) {
  // The plain paths follow the policy; /validate/audit and /.../enforce name their mode.
  EXPECT_FALSE(
      AdmitIn(Endpoint::Validate, PyTorchJob("fast"), core::Policy::Defaults()).response.allowed);
  EXPECT_TRUE(AdmitIn(Endpoint::Validate, PyTorchJob("fast"), AuditPolicy()).response.allowed);
  EXPECT_TRUE(AdmitIn(Endpoint::Validate, PyTorchJob("fast"), core::Policy::Defaults(), Mode::Audit)
                  .response.allowed);
  const AdmissionOutcome enforced =
      AdmitIn(Endpoint::Validate, PyTorchJob("fast"), AuditPolicy(), Mode::Enforce);
  EXPECT_FALSE(enforced.response.allowed);
  EXPECT_EQ(enforced.result, AdmitResult::Denied);
  EXPECT_FALSE(enforced.audit);
}

TEST(AuditMode, WhatEnforceDeniesIsAdmittedWithAWouldDenyWarning) {
  const AdmissionOutcome outcome = AdmitIn(Endpoint::Validate, PyTorchJob("fast"), AuditPolicy());
  EXPECT_TRUE(outcome.response.allowed);
  EXPECT_EQ(outcome.response.status_code, 0);
  EXPECT_TRUE(outcome.response.message.empty());
  EXPECT_EQ(outcome.result, AdmitResult::Audited);
  EXPECT_EQ(AdmitResultName(outcome.result), "audited");
  EXPECT_TRUE(outcome.audit);
  ASSERT_FALSE(outcome.response.warnings.empty());
  // The denial leads, whole: rule, message, guide link.
  const std::string& first = outcome.response.warnings.front();
  EXPECT_EQ(first.rfind("ncclguard audit: would deny: [nccl-proto-invalid] ", 0), 0u) << first;
  EXPECT_NE(first.find("(https://"), std::string::npos) << first;
  EXPECT_NE(first.find("#"), std::string::npos) << first;
  for (const std::string& warning : outcome.response.warnings) EXPECT_LE(warning.size(), 256u);
  // Its findings are what enforce would have acted on, the denial among them.
  bool denial = false;
  for (const core::Finding& finding : outcome.findings) {
    denial = denial || (finding.rule == "nccl-proto-invalid" && finding.level == core::Level::Deny);
  }
  EXPECT_TRUE(denial);
  // The encoded answer admits, with the warnings and no status.
  const std::string body = EncodeAdmissionReview(outcome.response);
  const Json review = Json::parse(body);
  EXPECT_EQ(review["response"]["allowed"], true);
  EXPECT_FALSE(review["response"].contains("status"));
  EXPECT_FALSE(review["response"].contains("patch"));
  EXPECT_EQ(review["response"]["warnings"][0], first);
}

TEST(AuditMode, AJobsFixesAreSaidAsWouldFixSinceItsPodsWillNotGetThem) {
  const AdmissionOutcome outcome = AdmitIn(Endpoint::Validate, PyTorchJob(), AuditPolicy());
  EXPECT_TRUE(outcome.response.allowed);
  EXPECT_EQ(outcome.result, AdmitResult::Audited);
  EXPECT_TRUE(
      HasWarningStartingWith(outcome, "ncclguard audit: would fix: [efa-resources-missing]"))
      << testing::PrintToString(outcome.response.warnings);
}

TEST(AuditMode, AnAuditedPodGetsNoPatchAndItsValidationSaysWhatWouldBeFixed) {
  const AdmissionOutcome mutated = AdmitIn(Endpoint::Mutate, BarePod(), AuditPolicy());
  EXPECT_TRUE(mutated.response.allowed);
  EXPECT_TRUE(NoPatch(mutated));
  EXPECT_EQ(mutated.result, AdmitResult::Audited);
  EXPECT_TRUE(mutated.response.warnings.empty()) << "the validating webhook says it, once";
  EXPECT_TRUE(mutated.findings.empty()) << "nothing fixed: nothing counted as a finding";

  const AdmissionOutcome validated = AdmitIn(Endpoint::Validate, BarePod(), AuditPolicy());
  EXPECT_TRUE(validated.response.allowed);
  EXPECT_EQ(validated.result, AdmitResult::Audited);
  EXPECT_TRUE(
      HasWarningStartingWith(validated, "ncclguard audit: would fix: [efa-resources-missing]"));
  EXPECT_TRUE(HasWarningStartingWith(validated, "ncclguard audit: would fix: [ipc-lock-missing]"));
}

TEST(AuditMode, ACompliantObjectIsAllowedWithoutWarnings) {
  const AdmissionOutcome mutated = AdmitIn(Endpoint::Mutate, CompliantPod(), AuditPolicy());
  EXPECT_EQ(mutated.result, AdmitResult::Allowed);
  const AdmissionOutcome validated = AdmitIn(Endpoint::Validate, CompliantPod(), AuditPolicy());
  EXPECT_EQ(validated.result, AdmitResult::Allowed);
  EXPECT_TRUE(validated.response.warnings.empty())
      << testing::PrintToString(validated.response.warnings);
}

TEST(AuditMode, AJobGetsNoGateMarkAndNoSuspend) {
  const AdmissionOutcome outcome = AdmitIn(Endpoint::Mutate, PyTorchJob(), AuditPolicy());
  EXPECT_TRUE(outcome.response.allowed);
  EXPECT_TRUE(NoPatch(outcome));
  EXPECT_EQ(outcome.result, AdmitResult::Audited) << "enforce would have marked it";
  // The enforce path under the same policy, by path: marked as ever.
  const AdmissionOutcome enforced =
      AdmitIn(Endpoint::Mutate, PyTorchJob(), AuditPolicy(), Mode::Enforce);
  const Json marked = PyTorchJob().patch(enforced.response.patch);
  EXPECT_EQ(marked["metadata"]["annotations"][std::string(core::kGateAnnotation)], "pending");
  EXPECT_EQ(marked["spec"]["runPolicy"]["suspend"], true);
}

TEST(AuditMode, APodOfAKindThatCannotBeSuspendedGetsNoSchedulingGate) {
  Json pod = BarePod();
  pod["metadata"]["labels"] = {{"HPJob", "llama"}};
  const AdmissionOutcome audited = AdmitIn(Endpoint::Mutate, pod, AuditPolicy());
  EXPECT_TRUE(NoPatch(audited));
  EXPECT_EQ(audited.result, AdmitResult::Audited);
  const AdmissionOutcome enforced = AdmitIn(Endpoint::Mutate, pod, core::Policy::Defaults());
  EXPECT_TRUE(core::HasSchedulingGate(pod.patch(enforced.response.patch), core::kSchedulingGate));
}

TEST(AuditMode, ATrainJobGetsNoRuntimePatch) {
  const AdmissionOutcome audited = AdmitIn(Endpoint::Mutate, TrainJob(), AuditPolicy());
  EXPECT_TRUE(NoPatch(audited));
  EXPECT_EQ(audited.result, AdmitResult::Audited);
  const AdmissionOutcome enforced = AdmitIn(Endpoint::Mutate, TrainJob(), core::Policy::Defaults());
  EXPECT_TRUE(core::HasRuntimePatch(TrainJob().patch(enforced.response.patch)));
}

TEST(AuditMode, FixesInEnforceStayIdempotentWhateverThePolicysMode) {
  // An enforce namespace under an audit policy is fixed as under an enforce policy.
  const AdmissionOutcome first = AdmitIn(Endpoint::Mutate, BarePod(), AuditPolicy(), Mode::Enforce);
  ASSERT_EQ(first.result, AdmitResult::Patched);
  EXPECT_EQ(first.response.patch,
            AdmitIn(Endpoint::Mutate, BarePod(), core::Policy::Defaults()).response.patch);
  const Json fixed = BarePod().patch(first.response.patch);
  const AdmissionOutcome second = AdmitIn(Endpoint::Mutate, fixed, AuditPolicy(), Mode::Enforce);
  EXPECT_EQ(second.result, AdmitResult::Allowed);
  EXPECT_TRUE(NoPatch(second));
  // And a fixed pod has nothing audit would fix.
  const AdmissionOutcome audited = AdmitIn(Endpoint::Validate, fixed, AuditPolicy());
  EXPECT_EQ(audited.result, AdmitResult::Allowed);
  EXPECT_TRUE(audited.response.warnings.empty());
}

TEST(AuditMode, TheEnforcePathsAnswerIsTheSameWhetherTheModeIsNamedOrNot) {
  for (const Json& object : {PyTorchJob("fast"), PyTorchJob(), BarePod(), CompliantPod()}) {
    for (Endpoint endpoint : {Endpoint::Mutate, Endpoint::Validate}) {
      const AdmissionOutcome plain = AdmitIn(endpoint, object, core::Policy::Defaults());
      const AdmissionOutcome named =
          AdmitIn(endpoint, object, core::Policy::Defaults(), Mode::Enforce);
      EXPECT_EQ(EncodeAdmissionReview(plain.response), EncodeAdmissionReview(named.response));
      EXPECT_EQ(plain.result, named.result);
      EXPECT_FALSE(named.audit);
    }
  }
}

TEST(AuditMode, AnUpdateIsAuditedOnlyForWhatItIntroduces) {
  AdmissionRequest release = Request(PyTorchJob("fast"), "UPDATE");
  release.old_object = PyTorchJob("fast");
  release.object["spec"]["runPolicy"] = {{"suspend", false}};
  const AdmissionOutcome unchanged = Admit(Endpoint::Validate, release, AuditPolicy(), {});
  EXPECT_TRUE(unchanged.response.allowed);
  EXPECT_TRUE(unchanged.response.warnings.empty())
      << testing::PrintToString(unchanged.response.warnings);

  AdmissionRequest edit = Request(PyTorchJob("fast"), "UPDATE");
  edit.old_object = PyTorchJob();
  const AdmissionOutcome introduced = Admit(Endpoint::Validate, edit, AuditPolicy(), {});
  EXPECT_TRUE(introduced.response.allowed);
  ASSERT_EQ(introduced.response.warnings.size(), 1u)
      << testing::PrintToString(introduced.response.warnings);
  EXPECT_EQ(introduced.response.warnings[0].rfind(
                "ncclguard audit: would deny: [nccl-proto-invalid] ", 0),
            0u);
}

TEST(AuditMode, WhatCannotBeReadIsAdmittedWithAWarningSayingSo) {
  Json job = PyTorchJob();
  job["spec"]["pytorchReplicaSpecs"]["Worker"]["replicas"] = "two";
  for (Endpoint endpoint : {Endpoint::Mutate, Endpoint::Validate}) {
    const AdmissionOutcome outcome = AdmitIn(endpoint, job, AuditPolicy());
    EXPECT_TRUE(outcome.response.allowed);
    EXPECT_EQ(outcome.response.status_code, 0);
    EXPECT_EQ(outcome.result, AdmitResult::Audited);
    ASSERT_EQ(outcome.response.warnings.size(), 1u);
    EXPECT_EQ(outcome.response.warnings[0].rfind(
                  "ncclguard audit: would deny: ncclguard cannot read PyTorchJob ml/llama", 0),
              0u)
        << outcome.response.warnings[0];
    EXPECT_LE(outcome.response.warnings[0].size(), 256u);
    const Json review = Json::parse(EncodeAdmissionReview(outcome.response));
    EXPECT_FALSE(review["response"].contains("status"));
  }
}

TEST(AuditMode, KubeSystemAndRuntimesAreAnsweredAsInEnforce) {
  AdmissionRequest request = Request(PyTorchJob("fast"));
  request.namespace_ = "kube-system";
  EXPECT_EQ(Admit(Endpoint::Validate, request, AuditPolicy(), {}).result, AdmitResult::Skipped);
  const Json runtime = Yaml(R"(
apiVersion: trainer.kubeflow.org/v1alpha1
kind: ClusterTrainingRuntime
metadata: {name: torch-p5}
spec:
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
                      image: registry.example/train:1.0
                      env: [{name: NCCL_PROTO, value: fast}]
                      resources: {limits: {nvidia.com/gpu: 8}}
)");
  const AdmissionOutcome enforced = AdmitIn(Endpoint::Validate, runtime, core::Policy::Defaults());
  const AdmissionOutcome audited = AdmitIn(Endpoint::Validate, runtime, AuditPolicy());
  EXPECT_TRUE(audited.response.allowed);
  EXPECT_EQ(audited.response.warnings, enforced.response.warnings);
  EXPECT_EQ(audited.result, enforced.result);
}

TEST(AuditWarnings, OneLineADistinctProblemAtMostTenThenHowManyMore) {
  std::vector<core::Finding> findings;
  for (int i = 0; i < 14; ++i) {
    core::Finding finding;
    finding.rule = "rule-" + std::to_string(i);
    finding.level = i % 2 == 0 ? core::Level::Deny : core::Level::Warn;
    finding.guide = "https://example.com/guide.md#x";
    finding.message = "problem " + std::to_string(i);
    findings.push_back(finding);
    finding.path = "/spec/other";  // the same problem elsewhere: said once
    findings.push_back(finding);
  }
  const std::vector<std::string> warnings = AuditWarnings(findings);
  ASSERT_EQ(warnings.size(), kMaxAuditProblems + 1);
  EXPECT_EQ(warnings[0],
            "ncclguard audit: would deny: [rule-0] problem 0 (https://example.com/guide.md#x)");
  EXPECT_EQ(warnings[1],
            "ncclguard audit: would warn: [rule-1] problem 1 (https://example.com/guide.md#x)");
  EXPECT_EQ(warnings.back(),
            "ncclguard audit: and 4 more problems; `ncclguard lint` on the manifest lists every "
            "one");
  EXPECT_TRUE(AuditWarnings({}).empty());
}

TEST(AuditWarnings, ALongMessageIsCutKeepingRuleAndLink) {
  core::Finding finding;
  finding.rule = "memory-limit-missing";
  finding.level = core::Level::Fix;
  finding.guide = "https://example.com/guide.md#container-oom";
  finding.message = std::string(1000, 'x');
  const std::string warning = AuditWarningText(finding);
  EXPECT_EQ(warning.size(), 256u);
  EXPECT_EQ(warning.rfind("ncclguard audit: would fix: [memory-limit-missing] ", 0), 0u);
  EXPECT_NE(warning.find("... (" + finding.guide + ")"), std::string::npos);
}

TEST(AuditMode, TheReviewAnswerCarriesTheModeThrough) {
  Json review = {{"apiVersion", "admission.k8s.io/v1"},
                 {"kind", "AdmissionReview"},
                 {"request",
                  {{"uid", "u-1"},
                   {"kind", {{"group", "kubeflow.org"}, {"version", "v1"}, {"kind", "PyTorchJob"}}},
                   {"operation", "CREATE"},
                   {"namespace", "ml"},
                   {"name", "llama"},
                   {"object", PyTorchJob("fast")}}}};
  const ReviewAnswer audited =
      AnswerReview(Endpoint::Validate, review.dump(), core::Policy::Defaults(), {}, Mode::Audit);
  ASSERT_TRUE(audited.decoded);
  EXPECT_EQ(Json::parse(audited.body)["response"]["allowed"], true);
  const ReviewAnswer enforced =
      AnswerReview(Endpoint::Validate, review.dump(), AuditPolicy(), {}, Mode::Enforce);
  EXPECT_EQ(Json::parse(enforced.body)["response"]["allowed"], false);
}

}  // namespace
}  // namespace ncclguard::webhook::audit_test
