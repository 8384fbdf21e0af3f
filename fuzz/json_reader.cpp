// core::ReadJson, ncclguard's own JSON reader (every review, list and watch event, the CLI's
// JSON), against nlohmann's parser, which it replaced. Properties: both accept the same texts
// and build the same tree, number types included, and refuse the same texts with the same kind
// of error (a number out of range apart from bad syntax); the one known difference is a NUL byte
// outside a string, which nlohmann takes for the end of the text and ours refuses. A value read
// from the middle of a text ends where the whole text's reading says it does. And core::WriteJson
// writes each tree read as Json::dump() does.
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <string>

#include "core/json_access.h"
#include "core/json_reader.h"
#include "core/json_writer.h"
#include "fuzz/fuzz_support.h"

namespace {

using ncclguard::core::Json;
using ncclguard::core::JsonReadError;

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using ncclguard::fuzz::Require;
  const std::string text(reinterpret_cast<const char*>(data), size);
  Json ours;
  std::string our_error;
  try {
    ours = ncclguard::core::ReadJson(text, {.max_depth = 512});
  } catch (const JsonReadError& e) {
    if (e.kind() == JsonReadError::Kind::TooDeep) return 0;  // nlohmann has no such limit
    our_error = e.kind() == JsonReadError::Kind::NumberOutOfRange ? "range" : "syntax";
  }
  Json theirs;
  std::string their_error;
  try {
    theirs = Json::parse(text);
  } catch (const nlohmann::json::parse_error&) {
    their_error = "syntax";
  } catch (const nlohmann::json::out_of_range&) {
    their_error = "range";
  }
  if (text.find('\0') != std::string::npos && their_error.empty() && !our_error.empty()) return 0;
  Require(our_error == their_error, "refused alike",
          "ours: " + (our_error.empty() ? "read" : our_error) +
              ", nlohmann's: " + (their_error.empty() ? "read" : their_error));
  if (our_error.empty()) {
    Require(ncclguard::core::SameJsonTree(ours, theirs), "the same tree",
            ours.dump() + "\n" + theirs.dump());
    const std::string written = ncclguard::core::WriteJson(ours);
    Require(written == ours.dump(), "written as dump writes it", written + "\n" + ours.dump());
    // The same value read as the first of concatenated values ends where the text's own
    // whitespace begins.
    std::size_t offset = 0;
    const Json first = ncclguard::core::ReadJsonValueAt(text, offset, {.max_depth = 512});
    Require(ncclguard::core::SameJsonTree(first, ours),
            "a value read from a stream is the same value");
    Require(text.find_first_not_of(" \t\r\n", offset) == std::string::npos,
            "nothing but whitespace after the value");
  }
  return 0;
}
