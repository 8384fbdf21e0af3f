// The CLI contract of docs/contract.md, exercised on the built binary.
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <sstream>
#include <stdexcept>

#include "cli/exit_code.h"
#include "core/catalog.h"
#include "core/documents.h"
#include "core/errors.h"
#include "kube/client.h"
#include "tests/unit/test_support.h"

namespace ncclguard::test {
namespace {

using core::Json;

const char* kBrokenP5Job = R"(apiVersion: kubeflow.org/v1
kind: PyTorchJob
metadata: {name: bad, namespace: ml}
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
              env: [{name: NCCL_PROTO, value: fast}]
              resources: {limits: {nvidia.com/gpu: 8, memory: 100Gi}}
)";

TEST(CliLint, ReportsTheDoneWhenScenarioAsJsonAndExitsOne) {
  TempFile file(kBrokenP5Job);
  const auto r = RunCli({"lint", "-o", "json", file.path()});
  EXPECT_EQ(r.exit_code, 1) << r.err;
  const Json findings = Json::parse(r.out);
  ASSERT_TRUE(findings.is_array());
  std::map<std::string, Json> by_rule;
  for (const Json& f : findings) by_rule[f["rule"]] = f;
  ASSERT_TRUE(by_rule.contains("efa-resources-missing"));
  ASSERT_TRUE(by_rule.contains("ipc-lock-missing"));
  ASSERT_TRUE(by_rule.contains("nccl-proto-invalid"));
  EXPECT_EQ(by_rule["efa-resources-missing"]["level"], "fix");
  EXPECT_EQ(by_rule["nccl-proto-invalid"]["level"], "deny");
  EXPECT_EQ(by_rule["efa-resources-missing"]["guide"],
            "https://github.com/ncclguard/ncclguard/blob/main/docs/guide.md#efa-tcp-fallback");
  EXPECT_EQ(by_rule["ipc-lock-missing"]["guide"].get<std::string>().substr(
                by_rule["ipc-lock-missing"]["guide"].get<std::string>().find('#')),
            "#memlock");
  EXPECT_EQ(by_rule["nccl-proto-invalid"]["path"],
            "/spec/pytorchReplicaSpecs/Worker/template/spec/containers/0/env/0");
  EXPECT_EQ(by_rule["nccl-proto-invalid"]["object"], Json({{"apiVersion", "kubeflow.org/v1"},
                                                           {"kind", "PyTorchJob"},
                                                           {"namespace", "ml"},
                                                           {"name", "bad"}}));
  for (const Json& f : findings) {
    EXPECT_EQ(f.size(), 6u) << f.dump();  // rule, level, guide, message, object, path: exactly
  }
}

TEST(CliLint, TextOutputNamesFileDocumentRuleAndLink) {
  TempFile file(std::string("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\n---\n") +
                kBrokenP5Job);
  const auto r = RunCli({"lint", file.path(), "--guide-base-url", "https://wiki.example/g"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.out.find(file.path() + "#2: deny nccl-proto-invalid PyTorchJob ml/bad"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("guide: https://wiki.example/g#efa-config"), std::string::npos) << r.out;
}

TEST(CliLint, CleanManifestExitsZeroFromStdin) {
  const auto r = RunCli({"lint", "-"}, ReadFile(SourcePath("examples/pytorchjob-p5.yaml")));
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_EQ(r.out, "0 deny, 0 warn, 0 fixable\n");
}

TEST(CliLint, PolicyFileChangesLevels) {
  TempFile policy("rules:\n  nccl-proto-invalid: {level: warn}\n");
  TempFile file(kBrokenP5Job);
  const auto r = RunCli({"lint", "--policy", policy.path(), file.path()});
  EXPECT_EQ(r.exit_code, 0) << r.out;
  EXPECT_NE(r.out.find("warn nccl-proto-invalid"), std::string::npos);
}

TEST(CliFix, WritesFixedYamlPreservingEveryOtherField) {
  const std::string input = ReadFile(SourcePath("examples/pytorchjob-broken.yaml"));
  const auto r = RunCli({"fix", "-"}, input);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.err, "");
  const Json original = core::ParseDocuments(input).documents.at(0);
  const Json fixed = core::ParseDocuments(r.out).documents.at(0);
  const Json flat = fixed.flatten();
  const Json flat_original = original.flatten();
  for (const auto& [pointer, value] : flat_original.items())
    EXPECT_EQ(flat.at(pointer), value) << pointer;
  const Json& worker =
      fixed["spec"]["pytorchReplicaSpecs"]["Worker"]["template"]["spec"]["containers"][0];
  EXPECT_EQ(worker["resources"]["limits"]["vpc.amazonaws.com/efa"], "32");
  EXPECT_EQ(worker["securityContext"]["capabilities"]["add"], Json::array({"IPC_LOCK"}));
  // Key order of the input is kept.
  EXPECT_EQ(r.out.rfind("apiVersion: kubeflow.org/v1\nkind: PyTorchJob\nmetadata:", 0), 0u)
      << r.out;
  // Fixing the output again changes nothing.
  const auto again = RunCli({"fix", "-"}, r.out);
  EXPECT_EQ(again.out, r.out);
}

TEST(CliFix, JsonInGivesJsonOutAndUnfixableFindingsGoToStderr) {
  const Json job = core::ParseDocuments(kBrokenP5Job).documents.at(0);
  const auto r = RunCli({"fix", "-"}, job.dump());
  EXPECT_EQ(r.exit_code, 1);
  const Json fixed = Json::parse(r.out);
  EXPECT_EQ(fixed["kind"], "PyTorchJob");
  EXPECT_NE(r.err.find("deny nccl-proto-invalid"), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find("efa-resources-missing"), std::string::npos)
      << "fixed findings are not reported";
}

struct BadInput {
  std::string name;
  std::string content;
  std::string message;  // expected in stderr
};

TEST(CliBadInput, ExitsTwoWithOneLineReasonAndNothingOnStdout) {
  const std::vector<BadInput> cases = {
      {"not-yaml", "a: [1, 2\nb: }\n", "not valid YAML"},
      {"not-object", "apiVersion: v1\nkind: Pod\nspec: {}\n---\n- a\n- b\n",
       "document 2: expected a Kubernetes object"},
      {"wrong-type",
       "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec:\n  containers: {a: 1}\n",
       "document 1 (Pod p): /spec/containers: expected a list, got object"},
      {"bad-gpu-count",
       "apiVersion: v1\nkind: Pod\nspec:\n  containers:\n  - name: c\n    resources: {limits: "
       "{nvidia.com/gpu: many}}\n",
       "/spec/containers/0/resources/limits/nvidia.com~1gpu: expected a whole-number quantity"},
      {"deep-json", std::string(50000, '[') + std::string(50000, ']'),
       "nesting deeper than 256 levels"},
      {"deep-yaml", "a: " + std::string(50000, '[') + std::string(50000, ']'), "line 1"},
      {"bad-json", "{\"apiVersion\": \"v1\",", "not valid JSON"},
      {"huge-count",
       "apiVersion: v1\nkind: Pod\nspec:\n  containers:\n  - name: c\n    resources: {limits: "
       "{nvidia.com/gpu: 99999999999999}}\n",
       "99999999999999 is out of range"},
      {"binary", std::string("\x00\x01\x02\xff\xfe", 5),
       "document 1: line 1, column 1: control character U+0000"},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.name);
    TempFile good(ReadFile(SourcePath("examples/pytorchjob-p5.yaml")));
    TempFile bad(c.content);
    for (const char* command : {"lint", "fix"}) {
      // The good file first: its output must not appear when a later file is bad.
      const auto r = RunCli({command, good.path(), bad.path()});
      EXPECT_EQ(r.exit_code, 2) << command;
      EXPECT_EQ(r.out, "") << command;
      EXPECT_NE(r.err.find(bad.path()), std::string::npos) << r.err;
      EXPECT_NE(r.err.find(c.message), std::string::npos) << r.err;
      EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
    }
  }
}

TEST(CliBadInput, RefusesAFiftyMegabyteFile) {
  std::string big = "apiVersion: v1\nkind: ConfigMap\ndata:\n  blob: \"";
  big.append(50u * 1024u * 1024u, 'x');
  big += "\"\n";
  TempFile file(big);
  const auto r = RunCli({"lint", file.path()});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(r.out, "");
  EXPECT_NE(r.err.find("larger than the 32 MiB input limit"), std::string::npos) << r.err;
}

TEST(CliBadInput, MissingFileBadPolicyAndBadFlagsExitTwo) {
  auto r = RunCli({"lint", "/tmp"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("/tmp: is a directory"), std::string::npos) << r.err;

  r = RunCli({"lint", "/nonexistent/manifest.yaml"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("/nonexistent/manifest.yaml: cannot open"), std::string::npos) << r.err;

  TempFile policy("rules: {nope: {enabled: false}}\n");
  r = RunCli({"lint", "--policy", policy.path(), SourcePath("examples/pytorchjob-p5.yaml")});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("spec.rules.nope"), std::string::npos) << r.err;
  EXPECT_EQ(r.out, "");

  EXPECT_EQ(RunCli({"lint", "-o", "xml", "-"}).exit_code, 2);
  EXPECT_EQ(RunCli({"lint"}).exit_code, 2);
  EXPECT_EQ(RunCli({"frobnicate"}).exit_code, 2);
}

TEST(CliBadInput, ABadLogLevelIsAUsageErrorNotAnInternalOne) {
  auto r = RunCli({"webhook", "--tls-cert-file", "/nonexistent/tls.crt", "--tls-key-file",
                   "/nonexistent/tls.key", "--log-level", "loud"});
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_NE(r.err.find("--log-level loud"), std::string::npos) << r.err;
  r = RunCli({"controller", "--log-level", "loud"});
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_NE(r.err.find("--log-level loud"), std::string::npos) << r.err;
}

// Exit 2 tells the user to fix the input; 3 that ncclguard has a bug (docs/contract.md).
TEST(CliExitCode, InputAndPolicyErrorsExitTwoAnythingElseIsAnInternalErrorExitingThree) {
  struct Case {
    std::string name;
    std::function<int()> command;
    int exit_code;
    std::string err;
  };
  const std::vector<Case> cases = {
      {"returns", [] { return 1; }, 1, ""},
      {"input", []() -> int { throw core::InputError("a.yaml: document 1: bad"); }, 2,
       "ncclguard: a.yaml: document 1: bad\n"},
      {"policy", []() -> int { throw core::PolicyError("p.yaml: unknown rule"); }, 2,
       "ncclguard: policy: p.yaml: unknown rule\n"},
      {"bug", []() -> int { throw std::logic_error("index out of range"); }, 3,
       "ncclguard: internal error: index out of range\n"},
      {"not an exception", []() -> int { throw 7; }, 3,
       "ncclguard: internal error: an exception that is not a std::exception\n"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    std::ostringstream err;
    EXPECT_EQ(cli::RunReportingErrors(c.command, err), c.exit_code);
    EXPECT_EQ(err.str(), c.err);
  }
  EXPECT_EQ(cli::kExitInternalError, 3);
}

TEST(CliExplain, PrintsRuleTextFixAndGuideLink) {
  const auto r = RunCli({"explain", "ipc-lock-missing"});
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_NE(r.out.find("action: fix"), std::string::npos);
  EXPECT_NE(r.out.find("fix:    Add IPC_LOCK"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("docs/guide.md#memlock"), std::string::npos);

  const auto check = RunCli({"explain", "pci-acs"});
  EXPECT_EQ(check.exit_code, 0);
  EXPECT_NE(check.out.find("#gpu-p2p"), std::string::npos);

  const auto unknown = RunCli({"explain", "no-such-rule"});
  EXPECT_EQ(unknown.exit_code, 2);
  EXPECT_NE(unknown.err.find("no rule, node check or diagnosis named \"no-such-rule\""),
            std::string::npos);

  const auto all = RunCli({"explain", "--all"});
  EXPECT_EQ(all.exit_code, 0);
  // One guide link for every rule, node check and diagnosis.
  EXPECT_EQ(std::count(all.out.begin(), all.out.end(), '#'),
            static_cast<std::ptrdiff_t>(core::Catalog::All().size()));
}

TEST(CliExplain, ChecksAndDiagnosesAreExplainedLikeRules) {
  const auto check = RunCli({"explain", "efa-device-count"});
  EXPECT_EQ(check.exit_code, 0);
  EXPECT_NE(check.out.find("kind:   check"), std::string::npos) << check.out;
  EXPECT_NE(check.out.find("action: fail"), std::string::npos) << check.out;
  EXPECT_NE(check.out.find("what:   EFA devices the kernel sees"), std::string::npos) << check.out;
  EXPECT_NE(check.out.find("fix:    Fewer devices: check the EFA driver"), std::string::npos)
      << check.out;
  EXPECT_NE(check.out.find("guide:  https://"), std::string::npos) << check.out;
  EXPECT_NE(check.out.find("docs/guide.md#efa-config"), std::string::npos) << check.out;

  const auto diagnosis = RunCli({"explain", "container-oom-killed"});
  EXPECT_EQ(diagnosis.exit_code, 0);
  EXPECT_NE(diagnosis.out.find("kind:   diagnosis"), std::string::npos) << diagnosis.out;
  EXPECT_NE(diagnosis.out.find("action: warn"), std::string::npos) << diagnosis.out;
  EXPECT_NE(diagnosis.out.find("what:   A container terminated with reason OOMKilled"),
            std::string::npos)
      << diagnosis.out;
  EXPECT_NE(diagnosis.out.find("fix:    Raise the container's memory limit"), std::string::npos)
      << diagnosis.out;
  EXPECT_NE(diagnosis.out.find("docs/guide.md#container-oom"), std::string::npos) << diagnosis.out;
}

TEST(CliExplain, WithoutAnIdListsEveryIdGroupedByKind) {
  const auto list = RunCli({"explain"});
  ASSERT_EQ(list.exit_code, 0) << list.err;
  const auto rules = list.out.find("Admission rules");
  const auto checks = list.out.find("Node checks");
  const auto diagnoses = list.out.find("Runtime diagnoses");
  ASSERT_LT(rules, checks);
  ASSERT_LT(checks, diagnoses);
  ASSERT_NE(diagnoses, std::string::npos);
  for (const core::CatalogEntry& entry : core::Catalog::All()) {
    const auto at = list.out.find("  " + std::string(entry.id) + " ");
    ASSERT_NE(at, std::string::npos) << entry.id;
    const auto group = entry.kind == core::FindingKind::Rule    ? rules
                       : entry.kind == core::FindingKind::Check ? checks
                                                                : diagnoses;
    EXPECT_GT(at, group) << entry.id;
    const auto line = list.out.substr(at, list.out.find('\n', at) - at);
    EXPECT_TRUE(line.ends_with(" " + std::string(entry.slug))) << line;
  }

  // A rule the policy turns off is listed as off.
  TempFile policy("rules: {ipc-lock-missing: {enabled: false}}\n");
  const auto off = RunCli({"explain", "--policy", policy.path()});
  EXPECT_NE(off.out.find("ipc-lock-missing"), std::string::npos);
  const auto at = off.out.find("ipc-lock-missing");
  EXPECT_NE(off.out.substr(at, off.out.find('\n', at) - at).find(" off "), std::string::npos)
      << off.out;
}

// The controller's client-side rate limit has one default (kube::ClientOptions): the flags take
// it, and the chart and the README state it.
TEST(CliController, KubeApiRateLimitDefaultsAreTheClientsInTheChartAndTheReadme) {
  const kube::ClientOptions client;
  const Json values = Yaml(ReadFile(SourcePath("charts/ncclguard/values.yaml")));
  EXPECT_EQ(values["controller"]["kubeApiQps"].get<double>(), client.qps);
  EXPECT_EQ(values["controller"]["kubeApiBurst"].get<int>(), client.burst);
  const std::string row = "| `--kube-api-qps`, `--kube-api-burst` | " +
                          std::to_string(static_cast<long>(client.qps)) + ", " +
                          std::to_string(client.burst) + " |";
  EXPECT_NE(ReadFile(SourcePath("README.md")).find(row), std::string::npos) << row;
}

}  // namespace
}  // namespace ncclguard::test
