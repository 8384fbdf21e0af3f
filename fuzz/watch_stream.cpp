// The watch response body: kube::WatchStreamParser, fed the way the informer feeds it (chunks
// split anywhere), catching kube::ApiError as the informer does (it then starts a new watch).
// Properties: the events do not depend on where chunks split; the parser never buffers more
// than its line limit; a stream that never ends a line is refused at the limit.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "fuzz/fuzz_support.h"
#include "kube/watch_stream.h"

namespace {

using namespace ncclguard;

constexpr std::size_t kMaxLine = 4096;

struct Outcome {
  std::vector<std::string> events;  // type + object, in order
  bool failed = false;
};

Outcome Run(std::string_view stream, std::size_t chunk) {
  Outcome outcome;
  kube::WatchStreamParser parser(kMaxLine);
  try {
    for (std::size_t at = 0; at < stream.size(); at += chunk) {
      parser.Feed(stream.substr(at, chunk), [&](kube::WatchEvent&& event) {
        outcome.events.push_back(
            std::string(kube::WatchEventTypeName(event.type)) +
            event.object.dump(-1, ' ', false, core::Json::error_handler_t::replace));
      });
      fuzz::Require(parser.buffered_bytes() <= kMaxLine, "the parser buffers at most a line");
    }
    parser.Finish();
  } catch (const kube::ApiError& e) {
    fuzz::Require(e.code() == kube::ErrorCode::kDecode, "a bad stream is a decode error");
    outcome.failed = true;
  }
  return outcome;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const auto input = fuzz::SplitInputOf(data, size);
  if (!input) return 0;
  const Outcome whole = Run(input->bytes, input->bytes.size() + 1);
  const Outcome split = Run(input->bytes, input->chunk);
  fuzz::Require(whole.failed == split.failed, "a stream is refused however it is split");
  fuzz::Require(whole.events == split.events, "events do not depend on where chunks split");
  return 0;
}
