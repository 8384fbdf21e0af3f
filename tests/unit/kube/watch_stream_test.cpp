// The watch stream parser: events split anywhere across chunks, garbage, huge lines.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "kube/watch_stream.h"

namespace ncclguard::kube {
namespace {

std::string Event(const std::string& type, const std::string& name, const std::string& rv) {
  return R"({"type":")" + type + R"(","object":{"kind":"ConfigMap","metadata":{"name":")" + name +
         R"(","resourceVersion":")" + rv + R"("}}})" + "\n";
}

std::vector<WatchEvent> FeedAll(WatchStreamParser& parser, const std::vector<std::string>& chunks) {
  std::vector<WatchEvent> events;
  for (const auto& chunk : chunks) {
    parser.Feed(chunk, [&](WatchEvent&& event) { events.push_back(std::move(event)); });
  }
  return events;
}

std::string DecodeErrorOf(const std::string& stream) {
  WatchStreamParser parser;
  try {
    FeedAll(parser, {stream});
    parser.Finish();
  } catch (const ApiError& error) {
    EXPECT_EQ(error.code(), ErrorCode::kDecode);
    return error.what();
  }
  return "no error";
}

TEST(WatchStream, EventsSplitAtEveryByteArriveWholeAndInOrder) {
  std::string stream = Event("ADDED", "a", "1") + Event("MODIFIED", "a", "2") +
                       Event("BOOKMARK", "", "3") + Event("DELETED", "a", "4");
  for (std::size_t cut = 0; cut <= stream.size(); ++cut) {
    WatchStreamParser parser;
    auto events = FeedAll(parser, {stream.substr(0, cut), stream.substr(cut)});
    ASSERT_EQ(events.size(), 4u) << "cut at " << cut;
    EXPECT_EQ(events[0].type, WatchEventType::kAdded);
    EXPECT_EQ(events[1].type, WatchEventType::kModified);
    EXPECT_EQ(events[2].type, WatchEventType::kBookmark);
    EXPECT_EQ(events[3].type, WatchEventType::kDeleted);
    EXPECT_EQ(events[3].object["metadata"]["resourceVersion"], "4");
    EXPECT_NO_THROW(parser.Finish());
  }
}

TEST(WatchStream, OneByteChunksBlankLinesAndCrlf) {
  std::string stream = "\n" + Event("ADDED", "a", "1") + "\r\n" + Event("ADDED", "b", "2");
  stream.insert(stream.size() - 1, "\r");
  WatchStreamParser parser;
  std::vector<std::string> chunks;
  for (char c : stream) chunks.emplace_back(1, c);
  auto events = FeedAll(parser, chunks);
  ASSERT_EQ(events.size(), 2u);
  EXPECT_EQ(events[1].object["metadata"]["name"], "b");
  EXPECT_EQ(parser.buffered_bytes(), 0u);
}

TEST(WatchStream, ErrorEventCarriesTheStatus) {
  WatchStreamParser parser;
  auto events = FeedAll(
      parser, {R"({"type":"ERROR","object":{"kind":"Status","code":410,"reason":"Expired"}})"
               "\n"});
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].type, WatchEventType::kError);
  EXPECT_EQ(events[0].object["code"], 410);
}

TEST(WatchStream, GarbageGivesAClearErrorNotACrash) {
  EXPECT_NE(DecodeErrorOf("this is not json\n").find("line is not JSON: 'this is not json'"),
            std::string::npos);
  EXPECT_NE(DecodeErrorOf("[1,2]\n").find("event is not a JSON object"), std::string::npos);
  EXPECT_NE(DecodeErrorOf(R"({"object":{}})"
                          "\n")
                .find("no string 'type'"),
            std::string::npos);
  EXPECT_NE(DecodeErrorOf(R"({"type":"ADDED","object":3})"
                          "\n")
                .find("no 'object' map"),
            std::string::npos);
  EXPECT_NE(DecodeErrorOf(R"({"type":"EXPLODED","object":{}})"
                          "\n")
                .find("unknown event type 'EXPLODED'"),
            std::string::npos);
  EXPECT_NE(DecodeErrorOf(std::string("\x00\xff\xfe{\n", 5)).find("line is not JSON"),
            std::string::npos);
  // A connection cut inside an event.
  EXPECT_NE(DecodeErrorOf(R"({"type":"ADDED","obj)").find("stream ended inside an event"),
            std::string::npos);
  // The error names the event but stays short.
  std::string long_garbage(10000, 'x');
  EXPECT_LT(DecodeErrorOf(long_garbage + "\n").size(), 300u);
}

TEST(WatchStream, HugeLinesWithinTheLimitParse) {
  std::string big_value(4u << 20, 'v');
  std::string line = R"({"type":"ADDED","object":{"metadata":{"name":"big"},"data":{"k":")" +
                     big_value + "\"}}}\n";
  WatchStreamParser parser;
  std::vector<std::string> chunks;
  for (std::size_t at = 0; at < line.size(); at += 16384) chunks.push_back(line.substr(at, 16384));
  auto events = FeedAll(parser, chunks);
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].object["data"]["k"].get<std::string>().size(), big_value.size());
}

TEST(WatchStream, LinesOverTheLimitAreRefusedBeforeBufferingThem) {
  WatchStreamParser parser(1024);
  std::string chunk(600, 'x');
  parser.Feed(chunk, [](WatchEvent&&) {});
  try {
    parser.Feed(chunk, [](WatchEvent&&) {});
    FAIL() << "no error";
  } catch (const ApiError& error) {
    EXPECT_EQ(error.code(), ErrorCode::kDecode);
    EXPECT_NE(std::string(error.what()).find("exceeds 1024 bytes"), std::string::npos);
  }
  EXPECT_LE(parser.buffered_bytes(), 1024u);
  WatchStreamParser whole_line(1024);
  EXPECT_THROW(whole_line.Feed(std::string(2000, 'y') + "\n", [](WatchEvent&&) {}), ApiError);
}

TEST(WatchStream, EventsBeforeAMalformedLineAreDelivered) {
  WatchStreamParser parser;
  std::vector<WatchEvent> events;
  EXPECT_THROW(parser.Feed(Event("ADDED", "a", "1") + "garbage\n" + Event("ADDED", "b", "2"),
                           [&](WatchEvent&& event) { events.push_back(std::move(event)); }),
               ApiError);
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].object["metadata"]["name"], "a");
}

}  // namespace
}  // namespace ncclguard::kube
