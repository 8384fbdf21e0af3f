// The processes' one structured logger (webhook, controller, probe publisher, kube client): one
// line per call with ts, level, msg and fields. JSON lines where a log collector reads them
// (stderr is not a terminal, or --log-format json), text for a person at a terminal
// (--log-format text):
//   {"ts":"2026-12-03T10:00:00.000Z","level":"info","msg":"policy reloaded","file":"p.yaml"}
//   2026-12-03T10:00:00.000Z INFO policy reloaded file=p.yaml
// Built on spdlog: its sink serialises lines from many threads and its level filters them.
#pragma once

#include <initializer_list>
#include <memory>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

namespace spdlog::sinks {
class sink;
}

namespace ncclguard::log {

enum class Level { Trace, Debug, Info, Warn, Error, Off };
// Auto: JSON unless stderr is a terminal.
enum class Format { Auto, Json, Text };

using Value = nlohmann::ordered_json;

struct Field {
  std::string_view key;  // a literal in practice; it must outlive the call
  Value value;
};
using Fields = std::vector<Field>;

// The flag values; throw std::invalid_argument naming the flag and the accepted values.
Level ParseLevel(std::string_view name);
Format ParseFormat(std::string_view name);

struct Options {
  Level level = Level::Info;
  Format format = Format::Auto;
  // Where lines go; null: stderr. Tests pass a sink they can read.
  std::shared_ptr<spdlog::sinks::sink> sink;
};

// Replaces the process's logger. Until the first call lines go to stderr at info, in the format
// Format::Auto picks.
void Configure(const Options& options);
// The same from the --log-level and --log-format flags (stderr); throws as the parsers do.
void ConfigureFromFlags(std::string_view level, std::string_view format);

bool Enabled(Level level);
void Write(Level level, std::string_view message, std::initializer_list<Field> fields = {});
void Write(Level level, std::string_view message, const Fields& fields);

inline void Trace(std::string_view message, std::initializer_list<Field> fields = {}) {
  Write(Level::Trace, message, fields);
}
inline void Debug(std::string_view message, std::initializer_list<Field> fields = {}) {
  Write(Level::Debug, message, fields);
}
inline void Info(std::string_view message, std::initializer_list<Field> fields = {}) {
  Write(Level::Info, message, fields);
}
inline void Warn(std::string_view message, std::initializer_list<Field> fields = {}) {
  Write(Level::Warn, message, fields);
}
inline void Error(std::string_view message, std::initializer_list<Field> fields = {}) {
  Write(Level::Error, message, fields);
}

// Writes out what the sink buffers (before exit).
void Flush();

// While it lives, every line this thread writes carries `fields` after msg (a reconcile's
// object key, say). Scopes nest; a field the call itself names wins.
class Scope {
 public:
  explicit Scope(std::initializer_list<Field> fields);
  ~Scope();
  Scope(const Scope&) = delete;
  Scope& operator=(const Scope&) = delete;

 private:
  Fields fields_;
};

}  // namespace ncclguard::log
