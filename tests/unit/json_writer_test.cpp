// core::WriteJson writes what Json::dump() writes, byte for byte, or throws what it throws: on
// generated trees whose strings hold every kind of byte (escapes, controls, DEL, UTF-8 good and
// bad), every number type at its edges, and on every file of the fuzz corpora. The webhook's
// patch and every log line go through it.
#include <gtest/gtest.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <limits>
#include <optional>
#include <random>
#include <string>

#include "core/json_reader.h"
#include "core/json_writer.h"

namespace ncclguard::core {
namespace {

// What one writer made of a value: its text, or that it threw a type_error.
std::optional<std::string> Dumped(const Json& value, Json::error_handler_t handler) {
  try {
    return value.dump(-1, ' ', false, handler);
  } catch (const Json::type_error&) {
    return std::nullopt;
  }
}

std::optional<std::string> Written(const Json& value, InvalidUtf8 invalid) {
  try {
    return WriteJson(value, invalid);
  } catch (const Json::type_error&) {
    return std::nullopt;
  }
}

::testing::AssertionResult WritesAsDump(const Json& value) {
  for (const InvalidUtf8 invalid : {InvalidUtf8::Throw, InvalidUtf8::Replace}) {
    const auto handler = invalid == InvalidUtf8::Throw ? Json::error_handler_t::strict
                                                       : Json::error_handler_t::replace;
    const auto ours = Written(value, invalid);
    const auto theirs = Dumped(value, handler);
    if (ours != theirs) {
      return ::testing::AssertionFailure()
             << "ours: " << ours.value_or("<threw>") << "\ndump: " << theirs.value_or("<threw>");
    }
  }
  return ::testing::AssertionSuccess();
}

class Generator {
 public:
  explicit Generator(unsigned seed) : random_(seed) {}

  Json Value(int depth) {
    switch (Pick(depth > 0 ? 9 : 7)) {
      case 0:
        return nullptr;
      case 1:
        return Pick(2) == 0;
      case 2:
        return Integer();
      case 3:
        return Unsigned();
      case 4:
        return Double();
      case 5:
      case 6:
        return Text();
      case 7: {
        Json object = Json::object();
        for (int i = Pick(5); i > 0; --i) object[Text()] = Value(depth - 1);
        return object;
      }
      default: {
        Json array = Json::array();
        for (int i = Pick(5); i > 0; --i) array.push_back(Value(depth - 1));
        return array;
      }
    }
  }

  std::string Text() {
    static const std::string kPieces[] = {"a",
                                          "Z",
                                          "0",
                                          " ",
                                          "~",
                                          "/",
                                          "\"",
                                          "\\",
                                          "\b",
                                          "\f",
                                          "\n",
                                          "\r",
                                          "\t",
                                          std::string(1, '\0'),
                                          "\x01",
                                          "\x1f",
                                          "\x7f",
                                          "é",
                                          "€",
                                          "😀",
                                          "\xc3",
                                          "\x80",
                                          "\xff",
                                          "\xe2\x82",
                                          "\xed\xa0\x80",
                                          "\xf4\x90\x80\x80",
                                          "\xc0\xaf",
                                          "NCCL_SOCKET_IFNAME"};
    std::string text;
    for (int i = Pick(8); i > 0; --i) text += kPieces[Pick(std::size(kPieces))];
    return text;
  }

 private:
  int Pick(std::size_t n) { return static_cast<int>(random_() % n); }
  Json Integer() {
    static const std::int64_t kEdges[] = {0,
                                          -1,
                                          1,
                                          -9,
                                          42,
                                          std::numeric_limits<std::int64_t>::min(),
                                          std::numeric_limits<std::int64_t>::max()};
    return Pick(2) == 0 ? Json(kEdges[Pick(std::size(kEdges))])
                        : Json(static_cast<std::int64_t>(random_()) - (1LL << 31));
  }
  Json Unsigned() {
    static const std::uint64_t kEdges[] = {0, 1, std::numeric_limits<std::uint64_t>::max(),
                                           std::uint64_t{1} << 63};
    return Pick(2) == 0 ? Json(kEdges[Pick(std::size(kEdges))]) : Json(std::uint64_t{random_()});
  }
  Json Double() {
    static const double kEdges[] = {0.0, -0.0, 1.0, 0.1, -2.5, 1e300, 5e-324, 1e21, 123456789.0};
    return kEdges[Pick(std::size(kEdges))];
  }

  std::mt19937 random_;
};

TEST(JsonWriter, WritesWhatDumpWritesOnGeneratedTrees) {
  Generator generate(20261207);
  for (int i = 0; i < 4000; ++i) {
    const Json value = generate.Value(4);
    ASSERT_TRUE(WritesAsDump(value)) << "tree " << i;
  }
}

TEST(JsonWriter, WritesAStringAsDumpWritesIt) {
  Generator generate(7);
  for (int i = 0; i < 4000; ++i) {
    const std::string text = generate.Text();
    std::string ours;
    AppendJsonString(ours, text, InvalidUtf8::Replace);
    EXPECT_EQ(ours, Json(text).dump(-1, ' ', false, Json::error_handler_t::replace));
  }
  // Every single byte.
  for (int byte = 0; byte < 256; ++byte) {
    EXPECT_TRUE(WritesAsDump(Json(std::string(1, static_cast<char>(byte))))) << "byte " << byte;
  }
}

TEST(JsonWriter, AStringThatIsNotUtf8ThrowsOrIsReplacedAsAsked) {
  const Json bad = Json::array({"ok", std::string("\xff")});
  EXPECT_THROW(WriteJson(bad), Json::type_error);
  EXPECT_EQ(WriteJson(bad, InvalidUtf8::Replace), "[\"ok\",\"\xef\xbf\xbd\"]");
}

TEST(JsonWriter, WritesTheFuzzCorporaAsDumpDoes) {
  namespace fs = std::filesystem;
  int trees = 0;
  for (const auto& entry :
       fs::recursive_directory_iterator(fs::path(NCCLGUARD_SOURCE_DIR) / "fuzz" / "corpus")) {
    if (!entry.is_regular_file()) continue;
    std::ifstream in(entry.path(), std::ios::binary);
    const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    Json value;
    try {
      value = ReadJson(text, {.max_depth = 512});
    } catch (const JsonReadError&) {
      continue;
    }
    EXPECT_TRUE(WritesAsDump(value)) << entry.path();
    ++trees;
  }
  EXPECT_GT(trees, 30);
}

}  // namespace
}  // namespace ncclguard::core
