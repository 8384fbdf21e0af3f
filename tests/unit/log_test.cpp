#include "log/log.h"

#include <gtest/gtest.h>
#include <spdlog/sinks/ostream_sink.h>

#include <regex>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

namespace ncclguard::log {
namespace {

using nlohmann::json;

// Lines written through a logger configured onto a string stream.
class LogTest : public ::testing::Test {
 protected:
  void Use(Format format, Level level = Level::Trace) {
    Options options;
    options.level = level;
    options.format = format;
    options.sink = std::make_shared<spdlog::sinks::ostream_sink_mt>(out_, /*force_flush=*/true);
    Configure(options);
  }
  void TearDown() override { Configure(Options{}); }

  std::vector<std::string> Lines() const {
    std::vector<std::string> lines;
    std::istringstream in(out_.str());
    for (std::string line; std::getline(in, line);) lines.push_back(line);
    return lines;
  }
  json OnlyJsonLine() const {
    const auto lines = Lines();
    EXPECT_EQ(lines.size(), 1u) << out_.str();
    if (lines.empty()) return nullptr;
    return json::parse(lines.front());  // throws, failing the test, if it is not JSON
  }

  std::ostringstream out_;
};

TEST_F(LogTest, JsonLineHasTsLevelMsgThenTheFieldsInOrder) {
  Use(Format::Json);
  Info("webhook listening", {{"listen", "127.0.0.1:8443"}, {"port", 8443}, {"tls", true}});
  const std::string line = Lines().at(0);
  EXPECT_TRUE(std::regex_match(
      line, std::regex(R"(\{"ts":"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z","level":"info",)"
                       R"("msg":"webhook listening","listen":"127.0.0.1:8443","port":8443,)"
                       R"("tls":true\})")))
      << line;
}

TEST_F(LogTest, JsonEscapesQuotesAndNewlinesSoEachCallIsOneLine) {
  Use(Format::Json);
  const std::string message = "container \"pytorch\":\nline two\ttab \\ back";
  Warn(message, {{"error", "a \"quoted\"\r\nvalue"}});
  const json line = OnlyJsonLine();
  EXPECT_EQ(line["level"], "warning");
  EXPECT_EQ(line["msg"], message);
  EXPECT_EQ(line["error"], "a \"quoted\"\r\nvalue");
}

TEST_F(LogTest, JsonReplacesInvalidUtf8InsteadOfFailing) {
  Use(Format::Json);
  const std::string broken = std::string("name \xff\xfe end");
  Error(broken, {{"name", broken}, {std::string_view("ke\xffy"), 1}});
  const json line = OnlyJsonLine();
  EXPECT_EQ(line["msg"], "name \xEF\xBF\xBD\xEF\xBF\xBD end");  // U+FFFD for each bad byte
  EXPECT_EQ(line["name"], line["msg"]);
  EXPECT_EQ(line["ke\xEF\xBF\xBDy"], 1);
}

TEST_F(LogTest, JsonKeepsValidUtf8AndStructuredValues) {
  Use(Format::Json);
  Info("größe ✓", {{"rules", json::array({"a", "b"})}, {"ms", 1.5}, {"none", nullptr}});
  const json line = OnlyJsonLine();
  EXPECT_EQ(line["msg"], "größe ✓");
  EXPECT_EQ(line["rules"], json::array({"a", "b"}));
  EXPECT_EQ(line["ms"], 1.5);
  EXPECT_TRUE(line["none"].is_null());
}

TEST_F(LogTest, LevelFiltersLowerLevels) {
  Use(Format::Json, Level::Warn);
  EXPECT_FALSE(Enabled(Level::Info));
  EXPECT_TRUE(Enabled(Level::Warn));
  Trace("t");
  Debug("d");
  Info("i");
  Warn("w");
  Error("e");
  const auto lines = Lines();
  ASSERT_EQ(lines.size(), 2u) << out_.str();
  EXPECT_EQ(json::parse(lines[0])["msg"], "w");
  EXPECT_EQ(json::parse(lines[1])["msg"], "e");
  EXPECT_EQ(json::parse(lines[1])["level"], "error");
}

TEST_F(LogTest, OffWritesNothing) {
  Use(Format::Json, Level::Off);
  EXPECT_FALSE(Enabled(Level::Error));
  Error("e");
  Write(Level::Off, "off is not a level to write at");
  EXPECT_EQ(out_.str(), "");
}

TEST_F(LogTest, TextLineIsTimestampLevelMessageAndKeyValues) {
  Use(Format::Text);
  Info("policy reloaded", {{"file", "/etc/ncclguard/policy.yaml"}, {"rules", 3}});
  Warn("request refused", {{"reason", "Content-Type must be application/json"}, {"empty", ""}});
  const auto lines = Lines();
  ASSERT_EQ(lines.size(), 2u) << out_.str();
  EXPECT_TRUE(std::regex_match(
      lines[0], std::regex(R"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z INFO policy reloaded )"
                           R"(file=/etc/ncclguard/policy.yaml rules=3)")))
      << lines[0];
  // Values with spaces (or nothing) are quoted so the line splits back into its fields.
  EXPECT_NE(lines[1].find(R"( WARN request refused reason="Content-Type must be application/json")"
                          R"( empty="")"),
            std::string::npos)
      << lines[1];
}

TEST_F(LogTest, TextEscapesNewlinesAndQuotesSoEachCallIsOneLine) {
  Use(Format::Text);
  Error("first\nsecond", {{"error", "say \"hi\"\nbye"}, {"bad", std::string("\xff")}});
  const auto lines = Lines();
  ASSERT_EQ(lines.size(), 1u) << out_.str();
  const std::string expected = R"( ERROR "first\nsecond" error="say \"hi\"\nbye" bad=")"
                               "\xEF\xBF\xBD\"";  // U+FFFD for the invalid byte
  EXPECT_NE(lines[0].find(expected), std::string::npos) << lines[0];
}

TEST_F(LogTest, ScopeAddsItsFieldsToThisThreadsLinesWhileItLives) {
  Use(Format::Json);
  {
    const Scope scope({{"key", "PyTorchJob/ml/llama"}});
    Info("reconcile failed; retrying with backoff", {{"error", "conflict"}});
    Info("overridden", {{"key", "call wins"}});
    std::thread([] { Info("other thread"); }).join();
  }
  Info("after");
  const auto lines = Lines();
  ASSERT_EQ(lines.size(), 4u) << out_.str();
  const json first = json::parse(lines[0]);
  EXPECT_EQ(first["key"], "PyTorchJob/ml/llama");
  EXPECT_EQ(first["error"], "conflict");
  EXPECT_LT(lines[0].find("\"key\""), lines[0].find("\"error\""));  // scope fields come first
  const json overridden = json::parse(lines[1]);
  EXPECT_EQ(overridden["key"], "call wins");
  EXPECT_EQ(lines[1].find("PyTorchJob"), std::string::npos);
  EXPECT_FALSE(json::parse(lines[2]).contains("key"));
  EXPECT_FALSE(json::parse(lines[3]).contains("key"));
}

TEST_F(LogTest, DynamicFieldsAreWrittenLikeListedOnes) {
  Use(Format::Json);
  Fields fields{{"error", "boom"}};
  fields.push_back({"attempt", 2});
  Write(Level::Warn, "publishing failed; retrying", fields);
  EXPECT_EQ(Lines().at(0).substr(Lines().at(0).find("\"msg\"")),
            R"("msg":"publishing failed; retrying","error":"boom","attempt":2})");
}

TEST(LogFlags, ParseLevelAndFormatNameTheFlagOnBadInput) {
  EXPECT_EQ(ParseLevel("warn"), Level::Warn);
  EXPECT_EQ(ParseLevel("warning"), Level::Warn);
  EXPECT_EQ(ParseLevel("off"), Level::Off);
  EXPECT_EQ(ParseFormat("auto"), Format::Auto);
  EXPECT_EQ(ParseFormat("text"), Format::Text);
  try {
    ParseLevel("loud");
    FAIL() << "no error";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("--log-level loud"), std::string::npos) << e.what();
  }
  try {
    ParseFormat("xml");
    FAIL() << "no error";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("--log-format xml"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace ncclguard::log
