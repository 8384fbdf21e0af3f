// core::ReadJson is ncclguard's own reader (the webhook's reviews, every list and watch event the
// informers decode, the CLI's JSON). It must accept exactly the JSON nlohmann's parser accepts and
// build the same tree, number types included: checked here against nlohmann on generated texts
// (every kind of value, escape, UTF-8 sequence and number form), on single-byte mutations of
// them, and on the fuzz corpora.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "core/json_access.h"
#include "core/json_reader.h"
#include "memory/allocation_budget.h"

namespace ncclguard::test {
namespace {

using core::Json;
using core::JsonReadError;

// What a reader made of a text: the tree, or which error.
struct Outcome {
  bool read = false;
  Json tree;
  std::string error;  // "syntax" or "range"
};

Outcome Ours(const std::string& text) {
  Outcome outcome;
  try {
    outcome.tree = core::ReadJson(text, {.max_depth = 100000});
    outcome.read = true;
  } catch (const JsonReadError& e) {
    outcome.error = e.kind() == JsonReadError::Kind::NumberOutOfRange ? "range" : "syntax";
  }
  return outcome;
}

Outcome Nlohmanns(const std::string& text) {
  Outcome outcome;
  try {
    outcome.tree = Json::parse(text);
    outcome.read = true;
  } catch (const nlohmann::json::parse_error&) {
    outcome.error = "syntax";
  } catch (const nlohmann::json::out_of_range&) {
    outcome.error = "range";
  }
  return outcome;
}

// nlohmann takes a NUL byte outside a string for the end of the input ("{}\0junk" reads as {});
// ours refuses it (below), so texts with one are compared only where nlohmann refuses them too.
::testing::AssertionResult ReadAlike(const std::string& text) {
  const Outcome ours = Ours(text);
  const Outcome theirs = Nlohmanns(text);
  const bool nul = text.find('\0') != std::string::npos;
  if (nul && theirs.read && !ours.read) return ::testing::AssertionSuccess();
  if (ours.read != theirs.read || ours.error != theirs.error ||
      (ours.read && !core::SameJsonTree(ours.tree, theirs.tree))) {
    return ::testing::AssertionFailure()
           << "text " << ::testing::PrintToString(text) << ": ours "
           << (ours.read ? ours.tree.dump() : ours.error) << ", nlohmann's "
           << (theirs.read ? theirs.tree.dump() : theirs.error);
  }
  return ::testing::AssertionSuccess();
}

// Random JSON texts, written directly (not through dump) so that every form the grammar allows
// turns up: whitespace, escapes, raw UTF-8, every number form, repeated keys; and now and then
// something the grammar does not allow.
class TextMaker {
 public:
  explicit TextMaker(std::uint32_t seed) : random_(seed) {}

  std::string Value(int depth) {
    switch (Pick(depth > 4 ? 5 : 7)) {
      case 0:
        return Pick(2) == 0 ? "true" : (Pick(2) == 0 ? "false" : "null");
      case 1:
      case 2:
        return Number();
      case 3:
      case 4:
        return String();
      case 5:
        return Array(depth + 1);
      default:
        return Object(depth + 1);
    }
  }

 private:
  std::size_t Pick(std::size_t n) {
    return std::uniform_int_distribution<std::size_t>(0, n - 1)(random_);
  }

  std::string Space() {
    static const char* kSpaces[] = {"", "", "", " ", "\n", "\t", "\r\n  "};
    return kSpaces[Pick(std::size(kSpaces))];
  }

  std::string Digits(std::size_t most) {
    std::string digits;
    const std::size_t count = 1 + Pick(most);
    for (std::size_t i = 0; i < count; ++i) digits += static_cast<char>('0' + Pick(10));
    return digits;
  }

  std::string Number() {
    static const char* kEdges[] = {"0",
                                   "-0",
                                   "-0.0",
                                   "18446744073709551615",
                                   "18446744073709551616",
                                   "-9223372036854775808",
                                   "-9223372036854775809",
                                   "9223372036854775808",
                                   "99999999999999999999999",
                                   "1e999",
                                   "-1e999",
                                   "1e-999",
                                   "4.9e-324",
                                   "2.5e-324",
                                   "1.7976931348623157e308",
                                   "1.7976931348623159e308",
                                   "0.1",
                                   "1E+2",
                                   "1e-2",
                                   "123.456e7",
                                   "00",
                                   "01",
                                   "-",
                                   "1.",
                                   ".5",
                                   "1e",
                                   "1e+",
                                   "+1",
                                   "-01",
                                   "0x10",
                                   "1.e5",
                                   "--1"};
    if (Pick(4) == 0) return kEdges[Pick(std::size(kEdges))];
    std::string number = Pick(3) == 0 ? "-" : "";
    number += Pick(5) == 0 ? "0" : std::to_string(1 + Pick(9)) + (Pick(2) == 0 ? Digits(19) : "");
    if (Pick(3) == 0) number += "." + Digits(17);
    if (Pick(4) == 0) {
      number += Pick(2) == 0 ? "e" : "E";
      static const char* kSigns[] = {"", "+", "-"};
      number += kSigns[Pick(3)];
      number += Digits(3);
    }
    return number;
  }

  std::string String() {
    static const char* kPieces[] = {"a",
                                    "plain text",
                                    "nccl",
                                    "\\\"",
                                    "\\\\",
                                    "\\/",
                                    "\\b",
                                    "\\f",
                                    "\\n",
                                    "\\r",
                                    "\\t",
                                    "\\u0000",
                                    "\\u00e9",
                                    "\\u20AC",
                                    "\\ud83d\\ude80",
                                    "\\uD800",
                                    "\\uDC00",
                                    "\\ud800\\u0041",
                                    "\\u12",
                                    "\\x",
                                    "\xc3\xa9",
                                    "\xe2\x82\xac",
                                    "\xf0\x9f\x9a\x80",
                                    "\xed\x9f\xbf",
                                    "\xc0\xaf",
                                    "\xe0\x80\xaf",
                                    "\xed\xa0\x80",
                                    "\xf4\x90\x80\x80",
                                    "\xff",
                                    "\xc3",
                                    "\x01",
                                    "\x7f",
                                    "tab\there"};
    std::string text = "\"";
    const std::size_t pieces = Pick(6);
    for (std::size_t i = 0; i < pieces; ++i) {
      text += Pick(3) == 0 ? kPieces[Pick(std::size(kPieces))] : kPieces[Pick(3)];
    }
    return text + "\"";
  }

  std::string Array(int depth) {
    std::string text = "[" + Space();
    const std::size_t items = Pick(5);
    for (std::size_t i = 0; i < items; ++i) {
      text += (i == 0 ? "" : "," + Space()) + Value(depth) + Space();
    }
    return text + "]";
  }

  std::string Object(int depth) {
    static const char* kKeys[] = {
        "\"a\"", "\"b\"", "\"name\"", "\"a-key-longer-than-sixteen\"", "\"\\u0061\"", "\"\""};
    std::string text = "{" + Space();
    const std::size_t members = Pick(Pick(8) == 0 ? 40 : 5);
    for (std::size_t i = 0; i < members; ++i) {
      const std::string key =
          Pick(2) == 0 ? kKeys[Pick(std::size(kKeys))] : "\"k" + std::to_string(Pick(30)) + "\"";
      text += (i == 0 ? "" : "," + Space()) + key + Space() + ":" + Space() + Value(depth);
    }
    return text + Space() + "}";
  }

  std::mt19937 random_;
};

TEST(JsonReader, ReadsWhatNlohmannReadsOnGeneratedTexts) {
  TextMaker maker(20261207);
  int read = 0;
  for (int i = 0; i < 4000; ++i) {
    const std::string text = maker.Value(0);
    ASSERT_TRUE(ReadAlike(text));
    read += Ours(text).read ? 1 : 0;
  }
  // Both kinds are exercised: most texts read, many are refused.
  EXPECT_GT(read, 800);
  EXPECT_LT(read, 3800);
}

TEST(JsonReader, ReadsWhatNlohmannReadsAfterEverySingleByteChange) {
  TextMaker maker(7);
  std::mt19937 random(11);
  static const char kBytes[] = {'{', '}', '[', ']', '"', '\\', ',',    ':',    ' ',  '0',
                                '-', 'e', '.', 't', 'n', 'u',  '\x80', '\xff', '\0', '\n'};
  for (int i = 0; i < 600; ++i) {
    const std::string text = maker.Value(0);
    for (int change = 0; change < 8; ++change) {
      std::string changed = text;
      const std::size_t at = std::uniform_int_distribution<std::size_t>(0, changed.size())(random);
      const char byte =
          kBytes[std::uniform_int_distribution<std::size_t>(0, sizeof(kBytes) - 1)(random)];
      switch (change % 3) {
        case 0:
          if (at < changed.size()) changed[at] = byte;
          break;
        case 1:
          changed.insert(at, 1, byte);
          break;
        default:
          if (at < changed.size()) changed.erase(at, 1);
      }
      ASSERT_TRUE(ReadAlike(changed));
      ASSERT_TRUE(ReadAlike(changed.substr(0, at)));  // every prefix of a text is cut somewhere
    }
  }
}

TEST(JsonReader, ReadsTheFuzzCorporaAsNlohmannDoes) {
  namespace fs = std::filesystem;
  int files = 0;
  for (const auto& entry :
       fs::recursive_directory_iterator(fs::path(NCCLGUARD_SOURCE_DIR) / "fuzz" / "corpus")) {
    if (!entry.is_regular_file()) continue;
    std::ifstream in(entry.path(), std::ios::binary);
    const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    EXPECT_TRUE(ReadAlike(text)) << entry.path();
    ++files;
  }
  EXPECT_GT(files, 50);
}

TEST(JsonReader, ANulByteAfterTheValueIsRefused) {
  // nlohmann's parser stops at a NUL byte as at the end of the text, so that "{}\0anything"
  // read as {}; kube-apiserver refuses it, and so does ncclguard now.
  EXPECT_THROW(core::ReadJson(std::string("{}\0{\"x\": 1}", 11)), JsonReadError);
  // Inside a string a NUL is a control character: escaped it reads, raw it is refused.
  EXPECT_EQ(core::ReadJson("\"a\\u0000b\"").get<std::string>(), std::string("a\0b", 3));
  EXPECT_THROW(core::ReadJson(std::string("\"a\0b\"", 5)), JsonReadError);
}

TEST(JsonReader, AnErrorNamesItsLineAndColumn) {
  try {
    core::ReadJson("{\"a\": 1,\n  \"b\": tru}");
    FAIL() << "read";
  } catch (const JsonReadError& e) {
    EXPECT_EQ(e.kind(), JsonReadError::Kind::Syntax);
    EXPECT_EQ(std::string(e.what()), "not valid JSON: line 2, column 8: expected the literal true");
  }
  try {
    core::ReadJson("[1e400]");
    FAIL() << "read";
  } catch (const JsonReadError& e) {
    EXPECT_EQ(e.kind(), JsonReadError::Kind::NumberOutOfRange);
    EXPECT_EQ(std::string(e.what()), "a number is out of range: 1e400");
  }
}

TEST(JsonReader, NestingUpToTheLimitIsReadAndOneLevelMoreIsRefused) {
  const auto nested = [](std::size_t levels) {
    return std::string(levels, '[') + std::string(levels, ']');
  };
  EXPECT_NO_THROW(core::ReadJson(nested(5), {.max_depth = 5}));
  try {
    core::ReadJson(nested(6), {.max_depth = 5});
    FAIL() << "read";
  } catch (const JsonReadError& e) {
    EXPECT_EQ(e.kind(), JsonReadError::Kind::TooDeep);
  }
  // Refused when the level opens: what follows it is never looked at.
  try {
    core::ReadJson("[[[[[[\xff", {.max_depth = 5});
    FAIL() << "read";
  } catch (const JsonReadError& e) {
    EXPECT_EQ(e.kind(), JsonReadError::Kind::TooDeep);
  }
}

TEST(JsonReader, ConcatenatedValuesAreReadOneAtATime) {
  const std::string text = "{\"a\": [1, 2]} 17\n\"s\"[true]";
  std::size_t offset = 0;
  EXPECT_EQ(core::ReadJsonValueAt(text, offset), Json::parse(R"({"a": [1, 2]})"));
  EXPECT_EQ(offset, 13u);
  EXPECT_EQ(core::ReadJsonValueAt(text, offset), 17);
  EXPECT_EQ(offset, 16u);
  EXPECT_EQ(core::ReadJsonValueAt(text, offset), "s");
  EXPECT_EQ(core::ReadJsonValueAt(text, offset), Json::parse("[true]"));
  EXPECT_EQ(offset, text.size());
}

TEST(JsonReader, AListsItemsAreHandedOnOneAtATimeAndTheRestIsKept) {
  const std::string text = R"({"kind": "PodList", "items": [{"n": 1}, 2, {"n": 3, "items": [4]}], )"
                           R"("metadata": {"resourceVersion": "7", "items": [5]}})";
  std::vector<Json> handed;
  const Json list = core::ReadJsonStreamingList(
      text, "items", [&](Json&& item) { handed.push_back(std::move(item)); });
  // Every item in order, nested ones whole; only the top-level member is streamed.
  ASSERT_EQ(handed.size(), 3u);
  EXPECT_EQ(handed[0], Json::parse(R"({"n": 1})"));
  EXPECT_EQ(handed[1], 2);
  EXPECT_EQ(handed[2], Json::parse(R"({"n": 3, "items": [4]})"));
  EXPECT_EQ(list, Json::parse(R"({"kind": "PodList", "items": [], )"
                              R"("metadata": {"resourceVersion": "7", "items": [5]}})"));
  // A member that is not a list is read as it is.
  EXPECT_EQ(core::ReadJsonStreamingList(R"({"items": {"a": [1]}})", "items", [](Json&&) {}),
            Json::parse(R"({"items": {"a": [1]}})"));
}

TEST(JsonReader, AStreamedListCutShortHandsOnWhatWasReadAndThenFails) {
  std::vector<Json> handed;
  EXPECT_THROW(core::ReadJsonStreamingList(R"({"items": [{"n": 1}, {"n": 2}, {"n":)", "items",
                                           [&](Json&& item) { handed.push_back(std::move(item)); }),
               JsonReadError);
  EXPECT_EQ(handed.size(), 2u);
  // What the caller throws ends the reading and reaches the caller.
  EXPECT_THROW(core::ReadJsonStreamingList(R"({"items": [{"n": 1}, {"n": 2}]})", "items",
                                           [](Json&&) { throw std::runtime_error("stop"); }),
               std::runtime_error);
}

TEST(JsonReader, AnAllocationRefusedAnywhereFailsTheReadAloneAndLeavesNothingAllocated) {
  // The webhook reads under a memory budget (memory/allocation_budget.h) that may refuse any
  // allocation: at every point of the read in turn, the read throws, everything it built is
  // freed (without a second allocation refused, which would end the process), and nothing is
  // left allocated.
  const std::string text =
      R"({"a": [1, "a string longer than sixteen bytes", {"b": [[], {}, "x", -2.5]}],)"
      R"( "keys": {"k0": 0, "k1": 1, "k2": 2, "k3": 3, "k4": 4, "k5": 5, "k6": 6, "k7": 7,)"
      R"( "k8": 8, "k9": 9, "k10": 10, "k11": 11, "k12": 12, "k13": 13, "k14": 14, "k15": 15,)"
      R"( "k16": 16, "k17": 17, "k0": "again"}, "c": {"d": null}})";
  std::size_t refused = 0;
  std::size_t read = 0;
  for (std::size_t limit = 0; limit < 32768 && read < 3; limit += 8) {
    memory::BudgetScope budget(limit, nullptr);
    try {
      const Json tree = core::ReadJson(text);
      ++read;
    } catch (const memory::BudgetExceeded&) {
      ++refused;
    }
    EXPECT_EQ(budget.Allocated(), 0) << "at a limit of " << limit << " bytes";
  }
  EXPECT_GT(refused, 100u);
  EXPECT_EQ(read, 3u);
}

// A wide tree: a list of objects, each with a list of strings past the small-string size.
Json WideTree() {
  Json tree = Json::array();
  for (int i = 0; i < 200; ++i) {
    Json item = Json::object();
    item["name"] = "an object of the list, number " + std::to_string(i);
    item["values"] = Json::array({"a string longer than sixteen bytes", Json::object(), 7});
    tree.push_back(std::move(item));
  }
  return tree;
}

TEST(JsonReader, FreeJsonFreesATreeWithoutAllocating) {
  // The webhook frees its reviews' trees so: nothing allocated while freeing (nlohmann's
  // destructor allocates a stack as large as each container first), the tree left null.
  Json tree = WideTree();
  {
    memory::BudgetScope budget(std::size_t{1} << 30, nullptr);
    core::FreeJson(tree);
    EXPECT_EQ(budget.Peak(), 0u);
    EXPECT_LT(budget.Allocated(), 0);
  }
  EXPECT_TRUE(tree.is_null());
  // What it saves: the library's own destructor allocates while freeing the same tree.
  Json other = WideTree();
  memory::BudgetScope budget(std::size_t{1} << 30, nullptr);
  other = nullptr;
  EXPECT_GT(budget.Peak(), 0u);
}

TEST(JsonReader, FreeJsonFreesATreeDeeperThanItRecursesTheLibrarysWay) {
  // Past kFreeJsonDepth levels the rest goes to nlohmann's destructor, which does not recurse.
  Json tree = Json::array();
  Json* node = &tree;
  for (std::size_t depth = 0; depth < 20 * core::kFreeJsonDepth; ++depth) {
    node->push_back(Json::array());
    node = &node->back();
  }
  core::FreeJson(tree);
  EXPECT_TRUE(tree.is_null());
}

}  // namespace
}  // namespace ncclguard::test
