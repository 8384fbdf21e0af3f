// Each limit on untrusted bytes outside the manifest reader (docs/limits.md), tested just past
// it: kubeconfig and policy files, the watch stream, the probe's host files.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "core/errors.h"
#include "core/policy.h"
#include "kube/config.h"
#include "kube/errors.h"
#include "kube/watch_stream.h"
#include "probes/host_files.h"
#include "tests/unit/test_support.h"

namespace ncclguard::test {
namespace {

std::string FileOf(std::size_t bytes, char fill) {
  const std::string path =
      (std::filesystem::temp_directory_path() / ("ncclguard-limits-" + std::to_string(getpid())))
          .string();
  std::ofstream(path, std::ios::binary) << std::string(bytes, fill);
  return path;
}

std::string KubeConfigError(const std::string& path) {
  try {
    kube::LoadKubeConfigFile(path);
  } catch (const kube::ConfigError& e) {
    return e.what();
  }
  return "";
}

TEST(InputLimits, KubeconfigsOverSixteenMebibytesAreRefusedUnread) {
  EXPECT_EQ(KubeConfigError("/dev/zero"), "kubeconfig: /dev/zero: larger than the 16 MiB limit");
  const std::string over = FileOf(kube::kMaxConfigFileBytes + 1, '#');
  EXPECT_EQ(KubeConfigError(over), "kubeconfig: " + over + ": larger than the 16 MiB limit");
  // At the limit it is read (and found to be no kubeconfig: all comment).
  const std::string at = FileOf(kube::kMaxConfigFileBytes, '#');
  EXPECT_NE(KubeConfigError(at).find("must be a YAML map"), std::string::npos);
  std::filesystem::remove(at);
}

TEST(InputLimits, DeepOrStallingYamlInKubeconfigAndPolicyIsAnError) {
  for (const std::string& text : {"clusters: " + std::string(100000, '['),
                                  "a: " + std::string(100000, '{'), std::string("\"\",")}) {
    EXPECT_THROW(kube::ParseKubeConfig(text, "deep", "/"), kube::ConfigError);
    EXPECT_THROW(core::ParsePolicy(text), core::PolicyError);
  }
}

// Found by fuzz/policy: a list or map used as a key escaped as a yaml-cpp conversion error (the
// CLI's "internal error").
TEST(InputLimits, APolicyKeyThatIsNotAStringIsAPolicyError) {
  for (const std::string& text :
       {std::string("spec:\n  ? [a]\n  : b\n"),
        std::string("spec:\n  rules:\n    ? {a: b}\n    : {}\n"),
        ReadFile(SourcePath("fuzz/corpus/policy/finding-non-string-key"))}) {
    try {
      core::ParsePolicy(text);
      ADD_FAILURE() << "accepted: " << text;
    } catch (const core::PolicyError& e) {
      EXPECT_NE(std::string(e.what()).find("keys must be strings"), std::string::npos) << e.what();
    }
  }
}

TEST(InputLimits, APolicyFileIsReadUpToTheCliInputLimit) {
  const CommandResult r = RunCli({"lint", "--policy", "/dev/zero", "-"}, "kind: ConfigMap\n");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(r.err, "ncclguard: /dev/zero: larger than the 32 MiB input limit\n");
}

// A watch stream that never ends a line: refused at the line limit with at most that buffered.
TEST(InputLimits, AWatchLineThatNeverEndsIsRefusedAtSixteenMebibytes) {
  kube::WatchStreamParser parser;  // the informer's default limit
  const std::string chunk(1 << 16, 'x');
  std::size_t fed = 0;
  try {
    for (; fed < (64u << 20); fed += chunk.size()) {
      parser.Feed(chunk, [](kube::WatchEvent&&) { FAIL() << "no event expected"; });
      ASSERT_LE(parser.buffered_bytes(), 16u << 20);
    }
    FAIL() << "no error after 64 MiB";
  } catch (const kube::ApiError& error) {
    EXPECT_EQ(error.code(), kube::ErrorCode::kDecode);
    EXPECT_NE(std::string(error.what()).find("exceeds 16777216 bytes"), std::string::npos);
  }
  EXPECT_EQ(fed, 16u << 20);  // the chunk that would pass the limit is refused, not buffered
}

// The probe reads at most the bytes a check asks for, whatever the file (sysfs, procfs, a FIFO).
TEST(InputLimits, ProbeHostFilesAreReadUpToTheirBound) {
  const probes::HostFiles files("/");
  const auto text = files.Read("/dev/zero");
  ASSERT_TRUE(text.content.has_value());
  EXPECT_EQ(text.content->size(), 64u * 1024u);
  EXPECT_EQ(files.Read("/dev/zero", 4096).content->size(), 4096u);
}

}  // namespace
}  // namespace ncclguard::test
