// The stated behaviour of the manifest reader (core::ParseDocuments) and the CLI for hostile
// input: deep nesting, huge strings, many documents, invalid UTF-8 and control bytes, duplicate
// keys, numbers beyond int64, endless input. docs/limits.md lists each with this test.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <utility>

#include "core/documents.h"
#include "core/errors.h"
#include "core/policy.h"
#include "tests/unit/test_support.h"
#include "webhook/review_answer.h"

namespace ncclguard::test {
namespace {

using core::Json;

// The InputError message of parsing `text`, or "" when it parses.
std::string ParseError(const std::string& text) {
  try {
    core::ParseDocuments(text);
  } catch (const core::InputError& e) {
    return e.what();
  }
  return "";
}

// Parses, writes back, parses again: the documents must be the same.
void ExpectRoundTrip(const std::string& text) {
  const core::DocumentSet first = core::ParseDocuments(text);
  const core::DocumentSet second = core::ParseDocuments(core::WriteDocuments(first));
  EXPECT_EQ(second.documents, first.documents);
}

constexpr const char* kConfigMap = "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c}\n";
constexpr const char* kConfigMapJson =
    R"({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}})";

TEST(HostileInput, HundredThousandJsonBracketsAreRefusedBeforeParsing) {
  const std::string text = std::string(100000, '[') + std::string(100000, ']');
  EXPECT_EQ(ParseError(text), "nesting deeper than 256 levels");
  // Unclosed: the depth check does not need the brackets to balance.
  EXPECT_EQ(ParseError("{\"a\":" + std::string(100000, '[')), "nesting deeper than 256 levels");
}

TEST(HostileInput, HundredThousandYamlFlowLevelsAreAnInputError) {
  for (const std::string& open : {std::string("["), std::string("{a: ")}) {
    std::string text = "a: ";
    for (int i = 0; i < 100000; ++i) text += open;
    const std::string error = ParseError(text);
    EXPECT_NE(error.find("line 1"), std::string::npos) << error;
  }
  // Block nesting past 256 levels (each level indented one more space).
  std::string block;
  for (int i = 0; i < 300; ++i) block += std::string(i, ' ') + "k:\n";
  EXPECT_NE(ParseError(block).find("nesting deeper than 256 levels"), std::string::npos);
}

TEST(HostileInput, AHugeStringIsKeptWhole) {
  const std::string blob(4u << 20, 'x');  // 4 MiB: more than an API object may be
  const core::DocumentSet set =
      core::ParseDocuments(std::string(kConfigMap) + "data:\n  blob: " + blob + "\n");
  EXPECT_EQ(set.documents.at(0)["data"]["blob"].get<std::string>().size(), blob.size());
}

TEST(HostileInput, ThirtyThousandDocumentsAreEachRead) {
  std::string text;
  for (int i = 0; i < 30000; ++i) text += "---\nkind: ConfigMap\n";
  text += "---\n---\nkind: Last\n";
  const core::DocumentSet set = core::ParseDocuments(text);
  ASSERT_EQ(set.documents.size(), 30001u);
  EXPECT_EQ(set.positions.back(), 30002u);  // the empty document is counted in positions
}

TEST(HostileInput, InvalidUtf8IsAnInputErrorNamingDocumentLineAndColumn) {
  EXPECT_EQ(ParseError(std::string(kConfigMap) + "---\n" + kConfigMap + "data:\n  k\xff: v\n"),
            "document 2: line 9, column 4: not UTF-8 (byte 0xFF)");
  // Overlong forms and UTF-16 surrogates are not UTF-8 either.
  EXPECT_NE(ParseError(std::string(kConfigMap) + "data: {a: \"\xc0\xaf\"}\n").find("not UTF-8"),
            std::string::npos);
  EXPECT_NE(ParseError(std::string(kConfigMap) + "data: {a: \xed\xa0\x80}\n").find("not UTF-8"),
            std::string::npos);
  // JSON: the parser's own check, naming the document.
  EXPECT_NE(ParseError("{\"kind\": \"a\xff\"}").find("document 1: not valid JSON"),
            std::string::npos);
}

TEST(HostileInput, RawControlBytesAreAnInputErrorEscapedOnesAreText) {
  EXPECT_EQ(ParseError(std::string(kConfigMap) + "data:\n  \x01k: v\n"),
            "document 1: line 5, column 3: control character U+0001 (YAML allows tab, line feed "
            "and carriage return only; escape it in a double-quoted string)");
  EXPECT_NE(ParseError(std::string(kConfigMap) + "data: {a: b\x7f}\n").find("U+007F"),
            std::string::npos);
  // Written as an escape, a control character is ordinary text and survives a round trip.
  const std::string escaped = std::string(kConfigMap) + "data: {\"k\\x01\": \"v\\t\\u0000\"}\n";
  EXPECT_EQ(core::ParseDocuments(escaped).documents.at(0)["data"].begin().key(), "k\x01");
  ExpectRoundTrip(escaped);
  // Multi-byte UTF-8, a byte-order mark and CRLF line ends are fine.
  ExpectRoundTrip("\xef\xbb\xbf" + std::string(kConfigMap) +
                  "data: {\xc3\xbc: \xf0\x9f\x9a\x80}\r\n");
}

TEST(HostileInput, DuplicateYamlKeysAreAnInputErrorJsonKeepsTheLast) {
  EXPECT_EQ(ParseError(std::string(kConfigMap) + "data:\n  a: 1\n  a: 2\n"),
            "document 1: line 6: duplicate key \"a\"");
  // The API server's JSON decoder keeps the last of duplicate fields; so does ours.
  const core::DocumentSet set = core::ParseDocuments(R"({"kind": "A", "kind": "B"})");
  EXPECT_EQ(set.documents.at(0)["kind"], "B");
}

TEST(HostileInput, NumbersBeyondInt64) {
  // YAML: a plain integer no int64 holds stays the text written, and is written back as is.
  const std::string yaml = std::string(kConfigMap) + "data: {big: 99999999999999999999999}\n";
  EXPECT_EQ(core::ParseDocuments(yaml).documents.at(0)["data"]["big"], "99999999999999999999999");
  ExpectRoundTrip(yaml);
  ExpectRoundTrip(std::string(kConfigMap) + "data: {big: 1e999, small: -1e999}\n");
  // JSON: up to 2^64-1 an integer, beyond a double, beyond a double's range an input error.
  EXPECT_TRUE(core::ParseDocuments(R"({"n": 18446744073709551615})")
                  .documents.at(0)["n"]
                  .is_number_unsigned());
  EXPECT_TRUE(core::ParseDocuments(R"({"n": 1e300})").documents.at(0)["n"].is_number_float());
  EXPECT_NE(
      ParseError("{\"kind\": \"A\"}\n{\"n\": 1e999}").find("document 2: a number is out of range"),
      std::string::npos);
}

// Found by fuzz/manifest_fix: yaml-cpp's LoadAll read `"",` as endless empty documents, growing
// until memory ran out.
TEST(HostileInput, YamlThatStallsTheParserIsAnInputError) {
  EXPECT_EQ(ParseError("\"\","),
            "not valid YAML: line 1, column 3: no document can be read from here");
  EXPECT_NE(ParseError(std::string(kConfigMap) + "---\n\"\", x").find("not valid YAML: line 5"),
            std::string::npos);
  EXPECT_NE(ParseError(ReadFile(SourcePath("fuzz/corpus/manifest_fix/"
                                           "finding-yaml-cpp-endless-documents")))
                .find("not valid YAML"),
            std::string::npos);
}

// Found by fuzz/manifest_fix: a key beginning with "..." was written plain at the start of a
// line, where YAML reads it as the end of the document.
TEST(HostileInput, KeysAndValuesLikeDocumentMarkersAreQuoted) {
  ExpectRoundTrip("\"...x\": 1\n\"--- y\": 2\nz: \"...\"\nl: [\"...\", \"---\"]\n");
  ExpectRoundTrip(ReadFile(SourcePath("fuzz/corpus/manifest_fix/finding-key-like-document-end")));
}

// Found by fuzz/manifest_fix: a key of more than 1024 characters was written as an implicit key
// ("key: value"), which YAML does not allow, so `ncclguard fix` wrote a file it could not read.
TEST(HostileInput, KeysLongerThanYamlAllowsInlineAreWrittenAsExplicitKeys) {
  const std::string plain(2000, 'k');
  const std::string quoted = std::string(1500, 'q') + ": \"x\" #";
  const std::string spaced = "- " + std::string(1200, ' ') + "y";
  for (const std::string& key : {plain, quoted, spaced}) {
    Json doc = Json::parse(kConfigMapJson);
    doc["data"][key] = "v";
    doc["nested"] = {{key, {{"inner", 1}}}, {"short", "s"}};
    doc["list"] = Json::array({{{key, "first"}, {"b", 2}}, {{"a", {{key, Json::array({1})}}}}});
    const std::string yaml = core::ToYaml(doc);
    EXPECT_NE(yaml.find("? "), std::string::npos);
    const core::DocumentSet read = core::ParseDocuments(yaml);
    ASSERT_EQ(read.documents.size(), 1u);
    EXPECT_EQ(read.documents[0], doc);
  }
  ExpectRoundTrip(
      ReadFile(SourcePath("fuzz/corpus/manifest_fix/finding-key-over-1024-characters")));
}

// Found by fuzz/manifest_fix: yaml-cpp decodes the escapes "\N" (U+0085) and "\_" (U+00A0) to
// single bytes, which `fix` wrote back raw: output that was not UTF-8.
TEST(HostileInput, EscapesYamlCppDecodesToSingleBytesReadAsUtf8) {
  const core::DocumentSet set =
      core::ParseDocuments(std::string(kConfigMap) + "data:\n  \"k\\N\": \"a\\Nb\\_c\"\n");
  ASSERT_EQ(set.documents.size(), 1u);
  EXPECT_EQ(set.documents[0]["data"], Json({{"k\u0085", "a\u0085b\u00a0c"}}));
  ExpectRoundTrip(std::string(kConfigMap) + "data:\n  h: \"\\NC1\"\n");
  ExpectRoundTrip(ReadFile(SourcePath("fuzz/corpus/manifest_fix/finding-yaml-cpp-nel-escape")));
  // An escaped surrogate yaml-cpp refuses itself.
  EXPECT_NE(ParseError(std::string(kConfigMap) + "data:\n  s: \"\\uD800\"\n")
                .find("not valid YAML: line 5, column 13: invalid unicode"),
            std::string::npos);
}

// Found from outside: fix rewrote such a key with U+FFFD and exited 0.
TEST(HostileInput, FixRefusesAKeyWithInvalidUtf8AndAControlByte) {
  TempFile file(std::string(kConfigMap) + "data:\n  \"a\xff\x02\": v\n", "");
  const CommandResult r = RunCli({"fix", file.path()});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(r.out, "");
  EXPECT_EQ(r.err, "ncclguard: " + file.path() +
                       ": document 1: line 5, column 5: not UTF-8 (byte 0xFF)\n");
}

// Found from outside: reported as "internal error: ... number overflow".
TEST(HostileInput, JsonNumberOverflowIsAnInputErrorNamingFileAndDocument) {
  TempFile file(
      "{\"apiVersion\": \"v1\", \"kind\": \"ConfigMap\"}\n"
      "{\"apiVersion\": \"v1\", \"kind\": \"ConfigMap\", \"data\": {\"n\": 1e999}}\n",
      "");
  for (const char* command : {"lint", "fix"}) {
    const CommandResult r = RunCli({command, file.path()});
    EXPECT_EQ(r.exit_code, 2) << command;
    EXPECT_EQ(r.out, "") << command;
    EXPECT_EQ(r.err.find("internal error"), std::string::npos) << r.err;
    EXPECT_EQ(
        r.err.rfind("ncclguard: " + file.path() + ": document 2: a number is out of range", 0), 0u)
        << r.err;
  }
}

// The exit status and the output (stdout and stderr together) of a shell command line.
std::pair<int, std::string> RunShell(const std::string& command) {
  std::FILE* pipe = popen((command + " 2>&1").c_str(), "r");
  if (pipe == nullptr) return {-1, ""};
  std::string output;
  char buffer[4096];
  while (const std::size_t n = std::fread(buffer, 1, sizeof buffer, pipe)) output.append(buffer, n);
  const int status = pclose(pipe);
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, output};
}

// Issue 23: std::cin took a read error (EISDIR, standard input a directory) for the end of the
// input: `ncclguard lint - < /` linted nothing and exited 0, `--policy -` applied no policy.
TEST(HostileInput, AStandardInputReadErrorIsAnInputError) {
  for (const char* args : {"lint -", "fix -", "lint --policy - /dev/null"}) {
    const auto [status, output] = RunShell(std::string(NCCLGUARD_BINARY) + " " + args + " < /");
    EXPECT_EQ(status, 2) << args;
    EXPECT_EQ(output, "ncclguard: <stdin>: read error: Is a directory\n") << args;
  }
}

// Issue 23: a policy file that starts with "," was read as no policy, the defaults applied; the
// webhook loads its policy file the same way (cli::LoadPolicy).
TEST(HostileInput, APolicyFileYamlCppCannotReadIsAPolicyError) {
  TempFile policy(", rules: {image-unpinned: {enabled: false}}\n");
  const CommandResult r =
      RunCli({"lint", "--policy", policy.path(), SourcePath("examples/pytorchjob-p5.yaml")});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(r.out, "");
  EXPECT_EQ(r.err, "ncclguard: policy: " + policy.path() +
                       ": not valid YAML: line 1, column 1: no document can be read from here\n");
}

// Endless or huge input stops being read at the 32 MiB limit: memory stays bounded.
TEST(HostileInput, EndlessAndOversizedInputStopsAtTheLimit) {
  CommandResult r = RunCli({"lint", "/dev/zero"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(r.err, "ncclguard: /dev/zero: larger than the 32 MiB input limit\n");
  r = RunCli({"fix", "-"}, std::string((32u << 20) + 1, '\n'));
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(r.out, "");
  EXPECT_EQ(r.err, "ncclguard: <stdin>: larger than the 32 MiB input limit\n");
  // Exactly at the limit is read: an empty JSON list padded to 32 MiB.
  r = RunCli({"lint", "-"}, "[" + std::string((32u << 20) - 2, ' ') + "]");
  EXPECT_EQ(r.exit_code, 0) << r.err;
}

}  // namespace
}  // namespace ncclguard::test

namespace ncclguard::test {
namespace {

constexpr const char* kPodWithListSecurityContext = R"(apiVersion: v1
kind: Pod
metadata: {name: p}
spec:
  nodeSelector: {node.kubernetes.io/instance-type: p5.48xlarge}
  containers:
  - name: c
    image: x
    securityContext: [1]
    resources: {limits: {nvidia.com/gpu: "8"}}
)";

// Found by fuzz/webhook_review: a container whose securityContext is a list made the IPC_LOCK
// fix add under it, and PatchPlan said "internal error" (webhook and CLI alike).
TEST(HostileInput, AListWhereAnObjectBelongsIsAnInputErrorNotAnInternalOne) {
  TempFile file(kPodWithListSecurityContext, "");
  for (const char* command : {"lint", "fix"}) {
    const CommandResult r = RunCli({command, file.path()});
    EXPECT_EQ(r.exit_code, 2) << command;
    EXPECT_EQ(r.out, "") << command;
    EXPECT_EQ(r.err, "ncclguard: " + file.path() +
                         ": document 1 (Pod p): /spec/containers/0/securityContext: expected an "
                         "object, got array\n")
        << command;
  }

  // The webhook: a new object like that is refused as unreadable (400), not as an internal error.
  const std::string review =
      R"({"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"u",)"
      R"("kind":{"group":"","version":"v1","kind":"Pod"},"namespace":"ml","name":"p",)"
      R"("operation":"CREATE","object":)" +
      core::ParseDocuments(kPodWithListSecurityContext).documents.at(0).dump() + "}}";
  for (webhook::Endpoint endpoint : {webhook::Endpoint::Mutate, webhook::Endpoint::Validate}) {
    const webhook::ReviewAnswer answer =
        webhook::AnswerReview(endpoint, review, core::Policy::Defaults(), {});
    ASSERT_TRUE(answer.decoded) << answer.error;
    EXPECT_EQ(answer.outcome.result, webhook::AdmitResult::Denied);
    EXPECT_EQ(answer.outcome.response.status_code, 400);
    EXPECT_NE(answer.outcome.response.message.find(
                  "/spec/containers/0/securityContext: expected an object, got array"),
              std::string::npos)
        << answer.outcome.response.message;
  }
  // The finding itself: an UPDATE whose old object has such a list is judged on the new one.
  const webhook::ReviewAnswer update = webhook::AnswerReview(
      webhook::Endpoint::Validate,
      ReadFile(SourcePath("fuzz/corpus/webhook_review/finding-security-context-list")),
      core::Policy::Defaults(), {});
  ASSERT_TRUE(update.decoded) << update.error;
  EXPECT_NE(update.outcome.result, webhook::AdmitResult::Error) << update.outcome.response.message;
}

}  // namespace
}  // namespace ncclguard::test
