#include "cdc/base/logging.h"

#include <errno.h>
#include <poll.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>

#include "cdc/base/mutex.h"
#include "cdc/base/text.h"

namespace walwatch {
namespace {

std::atomic<int> g_min_level{static_cast<int>(LogLevel::kInfo)};

// Serializes the write(2) calls. One write is atomic for a pipe only up to
// PIPE_BUF bytes, and a write can be cut short by a signal; holding the mutex
// while the rest of a line goes out keeps lines whole within this process.
Mutex g_write_mu;


// "2026-12-02T13:21:36.726Z": UTC, millisecond precision.
void AppendTimestamp(std::string* out) {
  timespec now{};
  clock_gettime(CLOCK_REALTIME, &now);
  tm utc{};
  gmtime_r(&now.tv_sec, &utc);
  char buf[32];
  int n = std::snprintf(
      buf, sizeof(buf), "%04d-%02d-%02dT%02d:%02d:%02d.%03ldZ",
      utc.tm_year + 1900, utc.tm_mon + 1, utc.tm_mday, utc.tm_hour, utc.tm_min,
      utc.tm_sec, static_cast<long>(now.tv_nsec / 1000000));
  if (n > 0) out->append(buf, static_cast<size_t>(n));
}

// True if `s` matches the JSON number grammar (RFC 8259 section 6).
// std::to_string(double) yields "nan" and "inf", which do not.
bool IsJsonNumber(std::string_view s) {
  size_t i = 0;
  auto digit = [&](size_t at) {
    return at < s.size() && s[at] >= '0' && s[at] <= '9';
  };
  if (i < s.size() && s[i] == '-') ++i;
  if (!digit(i)) return false;
  if (s[i] == '0') {
    ++i;
  } else {
    while (digit(i)) ++i;
  }
  if (i < s.size() && s[i] == '.') {
    ++i;
    if (!digit(i)) return false;
    while (digit(i)) ++i;
  }
  if (i < s.size() && (s[i] == 'e' || s[i] == 'E')) {
    ++i;
    if (i < s.size() && (s[i] == '+' || s[i] == '-')) ++i;
    if (!digit(i)) return false;
    while (digit(i)) ++i;
  }
  return i == s.size();
}

// Writes all of `line` to stderr. Normally one write(2); more only if the
// kernel accepted part of it (signal, full non-blocking pipe).
void WriteLine(const std::string& line) {
  MutexLock lock(&g_write_mu);
  const char* p = line.data();
  size_t left = line.size();
  int stalls = 0;
  while (left > 0) {
    ssize_t n = ::write(STDERR_FILENO, p, left);
    if (n > 0) {
      p += n;
      left -= static_cast<size_t>(n);
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK) && stalls++ < 10) {
      pollfd pfd{STDERR_FILENO, POLLOUT, 0};
      ::poll(&pfd, 1, 100);
      continue;
    }
    return;  // Nowhere to report a failure to log.
  }
}

}  // namespace

const char* LogLevelName(LogLevel level) {
  switch (level) {
    case LogLevel::kDebug:
      return "debug";
    case LogLevel::kInfo:
      return "info";
    case LogLevel::kWarn:
      return "warn";
    case LogLevel::kError:
      return "error";
  }
  return "error";
}

void SetLogLevel(LogLevel level) {
  g_min_level.store(static_cast<int>(level), std::memory_order_relaxed);
}

bool ParseLogLevel(std::string_view text, LogLevel* level) {
  static constexpr LogLevel kAll[] = {LogLevel::kDebug, LogLevel::kInfo,
                                      LogLevel::kWarn, LogLevel::kError};
  for (LogLevel l : kAll) {
    if (text == LogLevelName(l)) {
      *level = l;
      return true;
    }
  }
  return false;
}

bool LogEnabled(LogLevel level) {
  return static_cast<int>(level) >= g_min_level.load(std::memory_order_relaxed);
}

void Log(LogLevel level, std::string_view msg,
         std::initializer_list<LogField> fields) {
  if (!LogEnabled(level)) return;
  std::string line;
  line.reserve(64 + msg.size() + 32 * fields.size());
  line += "{\"time\":\"";
  AppendTimestamp(&line);
  line += "\",\"level\":\"";
  line += LogLevelName(level);
  line += "\",\"msg\":";
  AppendJsonString(&line, msg);
  for (const LogField& f : fields) {
    line += ',';
    AppendJsonString(&line, f.key);
    line += ':';
    if (f.is_raw || (f.is_number && IsJsonNumber(f.value))) {
      line += f.value;
    } else {
      AppendJsonString(&line, f.value);  // Includes NaN and infinities.
    }
  }
  line += "}\n";
  WriteLine(line);
}

void AppendJsonString(std::string* out, std::string_view s) {
  static constexpr char kHex[] = "0123456789abcdef";
  out->reserve(out->size() + s.size() + 2);
  out->push_back('"');
  size_t i = 0;
  while (i < s.size()) {
    // Copy the run of bytes that need no attention in one go.
    size_t run = i;
    while (run < s.size()) {
      const unsigned char c = static_cast<unsigned char>(s[run]);
      if (c < 0x20 || c == '"' || c == '\\' || c >= 0x80) break;
      ++run;
    }
    out->append(s.data() + i, run - i);
    i = run;
    if (i == s.size()) break;

    const unsigned char c = static_cast<unsigned char>(s[i]);
    if (c >= 0x80) {
      size_t consumed = 0;
      const size_t len = Utf8SequenceLength(s, i, &consumed);
      if (len > 0) {
        out->append(s.data() + i, len);
        i += len;
      } else {
        out->append("\xEF\xBF\xBD");  // U+FFFD REPLACEMENT CHARACTER
        i += consumed;
      }
      continue;
    }
    switch (c) {
      case '"':
        out->append("\\\"");
        break;
      case '\\':
        out->append("\\\\");
        break;
      case '\n':
        out->append("\\n");
        break;
      case '\r':
        out->append("\\r");
        break;
      case '\t':
        out->append("\\t");
        break;
      default:
        out->append("\\u00");
        out->push_back(kHex[c >> 4]);
        out->push_back(kHex[c & 0xF]);
        break;
    }
    ++i;
  }
  out->push_back('"');
}

}  // namespace walwatch
