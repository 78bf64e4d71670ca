// Structured logs: one JSON object per line on stderr:
//   {"time":"2026-12-02T13:21:36.726Z","level":"info","msg":"...", <fields>}
// Thread safety: every function may be called from any thread; a line is
// written with one write(2) so lines from different threads never interleave.
#ifndef WALWATCH_CDC_BASE_LOGGING_H_
#define WALWATCH_CDC_BASE_LOGGING_H_

#include <cstdint>
#include <initializer_list>
#include <string>
#include <string_view>

namespace walwatch {

enum class LogLevel { kDebug = 0, kInfo = 1, kWarn = 2, kError = 3 };

// One key/value of a log line. Strings are JSON-escaped; numbers are bare.
struct LogField {
  LogField(std::string_view k, std::string_view v) : key(k), value(v) {}
  LogField(std::string_view k, const std::string& v) : key(k), value(v) {}
  LogField(std::string_view k, const char* v) : key(k), value(v) {}
  LogField(std::string_view k, int64_t v)
      : key(k), value(std::to_string(v)), is_number(true) {}
  LogField(std::string_view k, uint64_t v)
      : key(k), value(std::to_string(v)), is_number(true) {}
  LogField(std::string_view k, int v)
      : key(k), value(std::to_string(v)), is_number(true) {}
  LogField(std::string_view k, double v)
      : key(k), value(std::to_string(v)), is_number(true) {}
  // A value that is already JSON (an object, say), written as it is.
  static LogField Raw(std::string_view k, std::string json) {
    LogField f(k, std::string_view());
    f.value = std::move(json);
    f.is_raw = true;
    return f;
  }
  std::string key;
  std::string value;
  bool is_number = false;
  bool is_raw = false;
};

void SetLogLevel(LogLevel level);
// "debug", "info", "warn" or "error".
const char* LogLevelName(LogLevel level);
// Accepts debug, info, warn, error. Returns false for anything else.
bool ParseLogLevel(std::string_view text, LogLevel* level);
bool LogEnabled(LogLevel level);

void Log(LogLevel level, std::string_view msg,
         std::initializer_list<LogField> fields = {});

inline void LogDebug(std::string_view msg, std::initializer_list<LogField> f = {}) { Log(LogLevel::kDebug, msg, f); }
inline void LogInfo(std::string_view msg, std::initializer_list<LogField> f = {}) { Log(LogLevel::kInfo, msg, f); }
inline void LogWarn(std::string_view msg, std::initializer_list<LogField> f = {}) { Log(LogLevel::kWarn, msg, f); }
inline void LogError(std::string_view msg, std::initializer_list<LogField> f = {}) { Log(LogLevel::kError, msg, f); }

// Appends `s` to `out` as a JSON string literal, quotes included.
void AppendJsonString(std::string* out, std::string_view s);

}  // namespace walwatch

#endif  // WALWATCH_CDC_BASE_LOGGING_H_
