#include "cli/json_log.h"

#include <spdlog/pattern_formatter.h>
#include <spdlog/sinks/stdout_sinks.h>
#include <spdlog/spdlog.h>

#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>

namespace ncclguard::cli {
namespace {

// %* : the payload as JSON members (no braces) so the pattern can wrap it with ts and level.
class JsonPayloadFlag final : public spdlog::custom_flag_formatter {
 public:
  void format(const spdlog::details::log_msg& message, const std::tm&,
              spdlog::memory_buf_t& dest) override {
    const std::string_view payload(message.payload.data(), message.payload.size());
    if (payload.size() >= 2 && payload.front() == '{' && payload.back() == '}') {
      const std::string_view members = payload.substr(1, payload.size() - 2);
      if (!members.empty()) dest.append(members.data(), members.data() + members.size());
      return;
    }
    const std::string text =
        "\"msg\":" + nlohmann::json(std::string(payload))
                         .dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
    dest.append(text.data(), text.data() + text.size());
  }
  std::unique_ptr<custom_flag_formatter> clone() const override {
    return std::make_unique<JsonPayloadFlag>();
  }
};

}  // namespace

void ConfigureJsonLogging(std::string_view level) {
  const spdlog::level::level_enum parsed = spdlog::level::from_str(std::string(level));
  if (parsed == spdlog::level::off && level != "off") {
    throw std::invalid_argument("--log-level " + std::string(level) +
                                ": use trace, debug, info, warn, error or off");
  }
  auto logger = std::make_shared<spdlog::logger>("ncclguard",
                                                 std::make_shared<spdlog::sinks::stderr_sink_mt>());
  auto formatter = std::make_unique<spdlog::pattern_formatter>(spdlog::pattern_time_type::utc,
                                                               std::string("\n"));
  formatter->add_flag<JsonPayloadFlag>('*').set_pattern(
      R"({"ts":"%Y-%m-%dT%H:%M:%S.%eZ","level":"%l",%*})");
  logger->set_formatter(std::move(formatter));
  logger->set_level(parsed);
  logger->flush_on(spdlog::level::warn);
  spdlog::set_default_logger(std::move(logger));
}

}  // namespace ncclguard::cli
