#include "log/log.h"

#include <spdlog/pattern_formatter.h>
#include <spdlog/sinks/stdout_sinks.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <array>
#include <atomic>
#include <mutex>
#include <stdexcept>
#include <string>

#include "core/json_writer.h"

namespace ncclguard::log {
namespace {

struct State {
  std::shared_ptr<spdlog::logger> logger;
  Format format = Format::Json;  // resolved: never Auto
};

spdlog::level::level_enum SpdlogLevel(Level level) {
  switch (level) {
    case Level::Trace:
      return spdlog::level::trace;
    case Level::Debug:
      return spdlog::level::debug;
    case Level::Info:
      return spdlog::level::info;
    case Level::Warn:
      return spdlog::level::warn;
    case Level::Error:
      return spdlog::level::err;
    case Level::Off:
      return spdlog::level::off;
  }
  return spdlog::level::off;
}

// %* : the level as the text format writes it (INFO, WARN ...).
class TextLevelFlag final : public spdlog::custom_flag_formatter {
 public:
  void format(const spdlog::details::log_msg& message, const std::tm&,
              spdlog::memory_buf_t& dest) override {
    // Indexed by spdlog's level: trace, debug, info, warn, err, critical, off.
    static constexpr std::array<std::string_view, 7> kNames{"TRACE", "DEBUG", "INFO", "WARN",
                                                            "ERROR", "ERROR", "OFF"};
    const std::string_view name = kNames.at(static_cast<std::size_t>(message.level));
    dest.append(name.data(), name.data() + name.size());
  }
  std::unique_ptr<custom_flag_formatter> clone() const override {
    return std::make_unique<TextLevelFlag>();
  }
};

State* MakeState(const Options& options) {
  auto state = std::make_unique<State>();
  state->format = options.format;
  if (state->format == Format::Auto) {
    state->format = isatty(STDERR_FILENO) == 1 ? Format::Text : Format::Json;
  }
  std::shared_ptr<spdlog::sinks::sink> sink =
      options.sink ? options.sink : std::make_shared<spdlog::sinks::stderr_sink_mt>();
  state->logger = std::make_shared<spdlog::logger>("ncclguard", std::move(sink));
  auto formatter = std::make_unique<spdlog::pattern_formatter>(spdlog::pattern_time_type::utc,
                                                               std::string("\n"));
  if (state->format == Format::Json) {
    // The payload is the members after ts and level: "msg":"...",...
    formatter->set_pattern(R"({"ts":"%Y-%m-%dT%H:%M:%S.%eZ","level":"%l",%v})");
  } else {
    formatter->add_flag<TextLevelFlag>('*').set_pattern("%Y-%m-%dT%H:%M:%S.%eZ %* %v");
  }
  state->logger->set_formatter(std::move(formatter));
  state->logger->set_level(SpdlogLevel(options.level));
  state->logger->flush_on(spdlog::level::warn);
  // A replaced logger may still be in use on another thread: states live until exit (a process
  // configures its logger once; tests a few times).
  static std::mutex mutex;
  static std::vector<std::unique_ptr<State>> all;
  std::lock_guard lock(mutex);
  all.push_back(std::move(state));
  return all.back().get();
}

std::atomic<State*>& CurrentSlot() {
  static std::atomic<State*> slot{MakeState(Options{})};
  return slot;
}

State& Current() { return *CurrentSlot().load(std::memory_order_acquire); }

thread_local std::vector<const Fields*> scopes;

// Messages and fields quote user input: invalid UTF-8 is replaced, never thrown on.
void AppendJson(std::string& out, const Value& value) {
  core::AppendJson(out, value, core::InvalidUtf8::Replace);
}

std::string Json(const Value& value) {
  std::string out;
  AppendJson(out, value);
  return out;
}

// Text: a string stays bare when it reads back unambiguously, else it is JSON-quoted.
void AppendText(std::string& out, const Value& value, bool allow_spaces) {
  const std::string quoted = Json(value);
  if (value.is_string()) {
    const auto& text = value.get_ref<const std::string&>();
    const std::string_view inner = std::string_view(quoted).substr(1, quoted.size() - 2);
    const bool bare = !text.empty() && inner == text &&
                      (allow_spaces || text.find_first_of(" =") == std::string::npos);
    if (bare) {
      out += text;
      return;
    }
  }
  out += quoted;
}

template <typename Visit>
void ForEachField(const Field* begin, const Field* end, Visit&& visit) {
  for (const Fields* scope : scopes) {
    for (const Field& field : *scope) {
      bool overridden = false;
      for (const Field* call = begin; call != end && !overridden; ++call) {
        overridden = call->key == field.key;
      }
      if (!overridden) visit(field);
    }
  }
  for (const Field* field = begin; field != end; ++field) visit(*field);
}

void WriteLine(Level level, std::string_view message, const Field* begin, const Field* end) {
  State& state = Current();
  const spdlog::level::level_enum spd_level = SpdlogLevel(level);
  if (level == Level::Off || !state.logger->should_log(spd_level)) return;
  std::string line;
  line.reserve(256);
  const Value text(message);
  if (state.format == Format::Json) {
    line += "\"msg\":";
    AppendJson(line, text);
    ForEachField(begin, end, [&line](const Field& field) {
      line += ',';
      core::AppendJsonString(line, field.key, core::InvalidUtf8::Replace);
      line += ':';
      AppendJson(line, field.value);
    });
  } else {
    AppendText(line, text, /*allow_spaces=*/true);
    ForEachField(begin, end, [&line](const Field& field) {
      line += ' ';
      line += field.key;
      line += '=';
      AppendText(line, field.value, /*allow_spaces=*/false);
    });
  }
  state.logger->log(spdlog::source_loc{}, spd_level,
                    spdlog::string_view_t(line.data(), line.size()));
}

}  // namespace

Level ParseLevel(std::string_view name) {
  if (name == "trace") return Level::Trace;
  if (name == "debug") return Level::Debug;
  if (name == "info") return Level::Info;
  if (name == "warn" || name == "warning") return Level::Warn;
  if (name == "error" || name == "err" || name == "critical") return Level::Error;
  if (name == "off") return Level::Off;
  throw std::invalid_argument("--log-level " + std::string(name) +
                              ": use trace, debug, info, warn, error or off");
}

Format ParseFormat(std::string_view name) {
  if (name == "auto") return Format::Auto;
  if (name == "json") return Format::Json;
  if (name == "text") return Format::Text;
  throw std::invalid_argument("--log-format " + std::string(name) +
                              ": use json, text or auto (json unless stderr is a terminal)");
}

void Configure(const Options& options) {
  State* state = MakeState(options);
  CurrentSlot().store(state, std::memory_order_release);
}

void ConfigureFromFlags(std::string_view level, std::string_view format) {
  Options options;
  options.level = ParseLevel(level);
  options.format = ParseFormat(format);
  Configure(options);
}

bool Enabled(Level level) {
  return level != Level::Off && Current().logger->should_log(SpdlogLevel(level));
}

void Write(Level level, std::string_view message, std::initializer_list<Field> fields) {
  WriteLine(level, message, fields.begin(), fields.end());
}

void Write(Level level, std::string_view message, const Fields& fields) {
  WriteLine(level, message, fields.data(), fields.data() + fields.size());
}

void Flush() { Current().logger->flush(); }

Scope::Scope(std::initializer_list<Field> fields) : fields_(fields) { scopes.push_back(&fields_); }

Scope::~Scope() { std::erase(scopes, &fields_); }

}  // namespace ncclguard::log
