#include "kube/watch_stream.h"

#include "core/json_reader.h"

namespace ncclguard::kube {
namespace {

std::string Excerpt(std::string_view line) {
  constexpr std::size_t kMax = 120;
  std::string text(line.substr(0, kMax));
  for (char& c : text) {
    if (static_cast<unsigned char>(c) < 0x20) c = '?';
  }
  return line.size() > kMax ? text + "..." : text;
}

ApiError DecodeError(const std::string& why, std::string_view line) {
  return ApiError(ErrorCode::kDecode, "watch stream: " + why + ": '" + Excerpt(line) + "'");
}

}  // namespace

const char* WatchEventTypeName(WatchEventType type) {
  switch (type) {
    case WatchEventType::kAdded:
      return "ADDED";
    case WatchEventType::kModified:
      return "MODIFIED";
    case WatchEventType::kDeleted:
      return "DELETED";
    case WatchEventType::kBookmark:
      return "BOOKMARK";
    case WatchEventType::kError:
      return "ERROR";
  }
  return "?";
}

WatchEvent ParseWatchEvent(std::string_view line) {
  core::Json parsed;
  try {
    parsed = core::ReadJson(line);
  } catch (const core::JsonReadError&) {
    throw DecodeError("line is not JSON", line);
  }
  if (!parsed.is_object()) throw DecodeError("event is not a JSON object", line);
  auto type_it = parsed.find("type");
  if (type_it == parsed.end() || !type_it->is_string()) {
    throw DecodeError("event has no string 'type'", line);
  }
  auto object_it = parsed.find("object");
  if (object_it == parsed.end() || !object_it->is_object()) {
    throw DecodeError("event has no 'object' map", line);
  }
  const std::string& type = type_it->get_ref<const std::string&>();
  WatchEvent event{WatchEventType::kAdded, std::move(*object_it)};
  if (type == "ADDED") {
    event.type = WatchEventType::kAdded;
  } else if (type == "MODIFIED") {
    event.type = WatchEventType::kModified;
  } else if (type == "DELETED") {
    event.type = WatchEventType::kDeleted;
  } else if (type == "BOOKMARK") {
    event.type = WatchEventType::kBookmark;
  } else if (type == "ERROR") {
    event.type = WatchEventType::kError;
  } else {
    throw DecodeError("unknown event type '" + Excerpt(type) + "'", line);
  }
  return event;
}

WatchStreamParser::WatchStreamParser(std::size_t max_line_bytes)
    : max_line_bytes_(max_line_bytes) {}

void WatchStreamParser::ParseLine(std::string_view line,
                                  const std::function<void(WatchEvent&&)>& on_event) {
  ++lines_;
  while (!line.empty() && (line.back() == '\r' || line.back() == ' ')) line.remove_suffix(1);
  if (line.empty()) return;
  on_event(ParseWatchEvent(line));
}

void WatchStreamParser::Feed(std::string_view chunk,
                             const std::function<void(WatchEvent&&)>& on_event) {
  while (!chunk.empty()) {
    auto newline = chunk.find('\n');
    if (newline == std::string_view::npos) {
      if (pending_.size() + chunk.size() > max_line_bytes_) {
        throw ApiError(ErrorCode::kDecode, "watch stream: line " + std::to_string(lines_ + 1) +
                                               " exceeds " + std::to_string(max_line_bytes_) +
                                               " bytes");
      }
      pending_.append(chunk);
      return;
    }
    std::string_view head = chunk.substr(0, newline);
    chunk.remove_prefix(newline + 1);
    if (pending_.size() + head.size() > max_line_bytes_) {
      throw ApiError(ErrorCode::kDecode, "watch stream: line " + std::to_string(lines_ + 1) +
                                             " exceeds " + std::to_string(max_line_bytes_) +
                                             " bytes");
    }
    if (pending_.empty()) {
      ParseLine(head, on_event);
    } else {
      pending_.append(head);
      std::string line = std::move(pending_);
      pending_.clear();
      ParseLine(line, on_event);
    }
  }
}

void WatchStreamParser::Finish() const {
  std::string_view rest = pending_;
  while (!rest.empty() && (rest.back() == '\r' || rest.back() == ' ')) rest.remove_suffix(1);
  if (!rest.empty()) throw DecodeError("stream ended inside an event", rest);
}

}  // namespace ncclguard::kube
